#include "server/model_server_config.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "model_store/s3/s3_settings.h"
#include "server/text_proto.h"

namespace lockstep {

namespace tfs = tensorflow::serving;

StatusOr<tfs::ModelServerConfig> ParseModelServerConfig(std::string_view text, std::string_view source) {
  tfs::ModelServerConfig config;
  LS_RETURN_IF_ERROR(ParseTextProto(text, source, &config));
  return config;
}

StatusOr<std::string> ReadConfigFileText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(path + ": cannot open the model config file");
  std::string text;
  text.resize(kMaxConfigFileBytes + 1);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) return DataLoss(path + ": cannot read the model config file");
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxConfigFileBytes) {
    return InvalidArgument(path + ": the model config file is larger than " + std::to_string(kMaxConfigFileBytes) +
                           " bytes");
  }
  return text;
}

StatusOr<StoreConfig> StoreConfigFromProto(const tfs::ModelServerConfig& proto) {
  if (proto.config_case() == tfs::ModelServerConfig::kCustomModelConfig) {
    return Unimplemented("custom_model_config is not supported; use model_config_list");
  }
  StoreConfig config;
  const auto& list = proto.model_config_list().config();
  for (int i = 0; i < list.size(); ++i) {
    const tfs::ModelConfig& m = list[i];
    ModelConfig model;
    model.name = m.name();
    model.base_path = m.base_path();
    model.platform = m.model_platform().empty() ? std::string(kSupportedPlatforms[0]) : m.model_platform();
    if (std::find(std::begin(kSupportedPlatforms), std::end(kSupportedPlatforms), model.platform) ==
        std::end(kSupportedPlatforms)) {
      return InvalidArgument("model_config_list.config[" + std::to_string(i) + "] (model '" + m.name() +
                             "'): model_platform '" + model.platform + "' is not supported (use tensorflow, lockstep or onnx)");
    }
    const auto& policy = m.model_version_policy();
    using Policy = tensorflow::serving::FileSystemStoragePathSourceConfig::ServableVersionPolicy;
    switch (policy.policy_choice_case()) {
      case Policy::kAll:
        model.policy.kind = VersionPolicy::kAll;
        break;
      case Policy::kSpecific:
        model.policy.kind = VersionPolicy::kSpecific;
        model.policy.versions.assign(policy.specific().versions().begin(), policy.specific().versions().end());
        break;
      case Policy::kLatest:
        model.policy.kind = VersionPolicy::kLatest;
        // An unset num_versions means 1, as upstream.
        model.policy.num_versions = policy.latest().num_versions() == 0 ? 1 : policy.latest().num_versions();
        break;
      default:
        break;  // latest 1
    }
    model.labels.insert(m.version_labels().begin(), m.version_labels().end());
    for (const lockstep::config::TrafficSplit::Arm& arm : m.traffic_split().arms()) {
      model.traffic.push_back({arm.label(), arm.version(), arm.weight()});
    }
    if (m.traffic_split().has_shadow()) {
      const auto& shadow = m.traffic_split().shadow();
      model.shadow = ShadowTraffic{shadow.label(), shadow.version(), shadow.percent()};
    }
    if (m.matmul_precision() == "bfloat16") {
      model.bf16_products = true;
    } else if (!m.matmul_precision().empty() && m.matmul_precision() != "float32") {
      return InvalidArgument("model_config_list.config[" + std::to_string(i) + "] (model '" + m.name() +
                             "'): matmul_precision '" + m.matmul_precision() + "' is not float32 or bfloat16");
    }
    model.intra_op_threads = m.intra_op_parallelism();
    if (m.version_transition() == "resource_preserving") {
      model.transition = ModelConfig::Transition::kResourcePreserving;
    } else if (!m.version_transition().empty() && m.version_transition() != "availability_preserving") {
      return InvalidArgument("model_config_list.config[" + std::to_string(i) + "] (model '" + m.name() +
                             "'): version_transition '" + m.version_transition() +
                             "' is not availability_preserving or resource_preserving");
    }
    config.models.push_back(std::move(model));
  }
  LS_RETURN_IF_ERROR(ValidateStoreConfig(config));
  return config;
}

StatusOr<StoreConfig> SingleModelConfig(const std::string& name, const std::string& base_path) {
  StoreConfig config;
  ModelConfig model;
  model.name = name;
  // A relative path is taken from the working directory, as a shell user expects.
  std::error_code ec;
  const std::filesystem::path absolute =
      base_path.empty() || IsS3Url(base_path) ? std::filesystem::path() : std::filesystem::absolute(base_path, ec);
  model.base_path = ec || absolute.empty() ? base_path : absolute.lexically_normal().string();
  model.platform = std::string(kSupportedPlatforms[0]);
  config.models.push_back(std::move(model));
  Status status = ValidateStoreConfig(config);
  if (!status.ok()) return status.WithPrefix("--model_name/--model_base_path");
  return config;
}

}  // namespace lockstep
