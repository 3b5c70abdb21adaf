#include "model_store/model_config.h"

#include "model_store/s3/s3_settings.h"

#include <filesystem>
#include <set>
#include <string_view>

namespace lockstep {
namespace {

constexpr size_t kMaxModelNameLength = 255;

Status CheckName(std::string_view name, size_t index) {
  const std::string where = "model_config_list.config[" + std::to_string(index) + "].name";
  if (name.empty()) return InvalidArgument(where + " is empty");
  if (name.size() > kMaxModelNameLength) {
    return InvalidArgument(where + " is longer than " + std::to_string(kMaxModelNameLength) + " characters");
  }
  for (char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) return InvalidArgument(where + " '" + std::string(name) + "' has a control character");
    if (c == '/' || c == '\\') {
      return InvalidArgument(where + " '" + std::string(name) + "' has a path separator");
    }
  }
  if (name.find("..") != std::string_view::npos || name == ".") {
    return InvalidArgument(where + " '" + std::string(name) + "' may not be '.' or contain '..'");
  }
  return Status::Ok();
}

Status CheckTraffic(const ModelConfig& m, const std::string& who) {
  std::set<std::string> names;
  uint64_t total = 0;
  for (size_t i = 0; i < m.traffic.size(); ++i) {
    const TrafficArm& arm = m.traffic[i];
    const std::string where = who + "traffic_split.arms[" + std::to_string(i) + "]";
    if (arm.label.empty() && arm.version <= 0) {
      return InvalidArgument(where + " names no label and no positive version");
    }
    if (!arm.label.empty() && m.labels.count(arm.label) == 0) {
      return InvalidArgument(where + ": label '" + arm.label + "' is not one of the model's version_labels");
    }
    if (!names.insert(arm.Name()).second) {
      return InvalidArgument(where + ": " + arm.Name() + " appears more than once");
    }
    total += arm.weight;
  }
  if (!m.traffic.empty() && total == 0) return InvalidArgument(who + "traffic_split: every arm has weight 0");
  if (m.shadow) {
    const ShadowTraffic& s = *m.shadow;
    if (s.label.empty() && s.version <= 0) {
      return InvalidArgument(who + "traffic_split.shadow names no label and no positive version");
    }
    if (!s.label.empty() && m.labels.count(s.label) == 0) {
      return InvalidArgument(who + "traffic_split.shadow: label '" + s.label + "' is not one of the model's version_labels");
    }
    if (!(s.percent > 0 && s.percent <= 100)) {
      return InvalidArgument(who + "traffic_split.shadow.percent must be in (0, 100], got " + std::to_string(s.percent));
    }
  }
  return Status::Ok();
}

Status CheckModel(const ModelConfig& m) {
  const std::string who = "model '" + m.name + "': ";
  if (m.base_path.empty()) return InvalidArgument(who + "base_path is empty");
  if (m.intra_op_threads < 0 || m.intra_op_threads > kMaxIntraOpThreads) {
    return InvalidArgument(who + "intra_op_parallelism " + std::to_string(m.intra_op_threads) + " is not in [0, " +
                           std::to_string(kMaxIntraOpThreads) + "]");
  }
  if (IsS3Url(m.base_path)) {
    LS_RETURN_IF_ERROR(ParseS3Url(m.base_path).status().WithPrefix(who + "base_path"));
  } else if (!std::filesystem::path(m.base_path).lexically_normal().is_absolute()) {
    return InvalidArgument(who + "base_path '" + m.base_path + "' is not an absolute path (or an s3:// URL)");
  }
  switch (m.policy.kind) {
    case VersionPolicy::kLatest:
      if (m.policy.num_versions < 1) {
        return InvalidArgument(who + "model_version_policy.latest.num_versions must be at least 1");
      }
      break;
    case VersionPolicy::kAll:
      break;
    case VersionPolicy::kSpecific:
      if (m.policy.versions.empty()) {
        return InvalidArgument(who + "model_version_policy.specific.versions is empty");
      }
      for (int64_t v : m.policy.versions) {
        if (v <= 0) {
          return InvalidArgument(who + "model_version_policy.specific.versions has " + std::to_string(v) +
                                 "; versions are positive");
        }
      }
      break;
    default:
      return InvalidArgument(who + "model_version_policy has an unknown kind");
  }
  for (const auto& [label, version] : m.labels) {
    if (label.empty()) return InvalidArgument(who + "version_labels has an empty label");
    if (version <= 0) {
      return InvalidArgument(who + "version_labels['" + label + "'] is " + std::to_string(version) +
                             "; versions are positive");
    }
  }
  return CheckTraffic(m, who);
}

}  // namespace

std::string TrafficArm::Name() const {
  return label.empty() ? "version:" + std::to_string(version) : "label:" + label;
}

Status ValidateStoreConfig(const StoreConfig& config) {
  std::set<std::string_view> names;
  for (size_t i = 0; i < config.models.size(); ++i) {
    const ModelConfig& m = config.models[i];
    LS_RETURN_IF_ERROR(CheckName(m.name, i));
    if (!names.insert(m.name).second) {
      return InvalidArgument("model '" + m.name + "': name appears more than once in model_config_list");
    }
    LS_RETURN_IF_ERROR(CheckModel(m));
  }
  return Status::Ok();
}

}  // namespace lockstep
