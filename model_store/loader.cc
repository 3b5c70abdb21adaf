#include "model_store/loader.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <system_error>
#include <utility>
#include <vector>

#include "runtime/bundle/bundle.h"
#include "runtime/model_dir.h"
#include "runtime/tensor_json.h"

namespace lockstep {
namespace {

// A warm-up file is a handful of small requests; anything far larger is a mistake, and reading
// it whole would cost memory for nothing.
constexpr uintmax_t kMaxWarmupFileBytes = uintmax_t{64} << 20;

StatusOr<std::string> ReadSmallFile(const std::filesystem::path& path) {
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) return FailedPrecondition("cannot read " + path.string() + ": " + ec.message());
  if (size > kMaxWarmupFileBytes) {
    return InvalidArgument(path.string() + " is " + std::to_string(size) + " bytes; the limit is " +
                           std::to_string(kMaxWarmupFileBytes));
  }
  // Read exactly the size checked above, never more, whatever happens to the file meanwhile.
  std::ifstream in(path, std::ios::binary);
  std::string text(static_cast<size_t>(size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  if (!in || in.gcount() != static_cast<std::streamsize>(size)) {
    return FailedPrecondition("cannot read " + path.string());
  }
  return text;
}

Status RunOneWarmupRequest(const Session& session, const nlohmann::json& request) {
  if (!request.is_object()) return InvalidArgument("is not a JSON object");
  std::string signature_name(kDefaultSignature);
  if (auto it = request.find("signature_name"); it != request.end()) {
    if (!it->is_string()) return InvalidArgument("'signature_name' is not a string");
    signature_name = it->get<std::string>();
  }
  const Signature* signature = session.FindSignature(signature_name);
  if (signature == nullptr) return InvalidArgument("the model has no signature '" + signature_name + "'");
  const auto inputs_it = request.find("inputs");
  if (inputs_it == request.end() || !inputs_it->is_object()) {
    return InvalidArgument("'inputs' is missing or not a JSON object");
  }
  std::vector<NamedTensor> inputs;
  for (const auto& [key, value] : inputs_it->items()) {
    const TensorBinding* binding = nullptr;
    for (const TensorBinding& b : signature->inputs) {
      if (b.key == key) binding = &b;
    }
    if (binding == nullptr) {
      return InvalidArgument("signature '" + signature_name + "' has no input '" + key + "'");
    }
    StatusOr<Tensor> tensor = TensorFromJson(value, binding->dtype);
    if (!tensor.ok()) return tensor.status().WithPrefix("input '" + key + "'");
    inputs.push_back({key, std::move(tensor).value()});
  }
  std::vector<NamedTensor> outputs;
  return session.Run(signature_name, inputs, &outputs).WithPrefix("signature '" + signature_name + "'");
}

}  // namespace

Status RunWarmupRequests(const Session& session, std::string_view json_text) {
  StatusOr<nlohmann::json> parsed = ParseJson(json_text);
  if (!parsed.ok()) return parsed.status();
  const nlohmann::json& requests = *parsed;
  if (!requests.is_array()) return InvalidArgument("warm-up requests must be a JSON array");
  if (requests.size() > kMaxWarmupRequests) {
    return InvalidArgument("there are " + std::to_string(requests.size()) + " warm-up requests; the limit is " +
                           std::to_string(kMaxWarmupRequests));
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    LS_RETURN_IF_ERROR(RunOneWarmupRequest(session, requests[i]).WithPrefix("warm-up request " + std::to_string(i)));
  }
  return Status::Ok();
}

StatusOr<std::shared_ptr<const LoadedVersion>> LoadVersion(const std::string& model, int64_t version,
                                                           const std::filesystem::path& dir,
                                                           const SessionOptions& options, bool warm_up,
                                                           std::shared_ptr<ThreadPool> own_pool) {
  const std::string who = "model '" + model + "' version " + std::to_string(version);
  StatusOr<Model> bundle = ReadModelDir(dir);
  if (!bundle.ok()) return bundle.status().WithPrefix(who);
  // A served version never reads its weights back: what is packed is held once.
  SessionOptions serving = options;
  serving.release_packed_weights = true;
  if (own_pool != nullptr) serving.pool = own_pool.get();
  const int threads = (serving.pool != nullptr ? *serving.pool : ThreadPool::Default()).num_threads();
  StatusOr<std::unique_ptr<Session>> session = Session::Create(std::move(bundle).value(), serving);
  if (!session.ok()) return session.status().WithPrefix(who);

  const std::filesystem::path warmup = dir / kBundleAssetsDir / kWarmupRequestsAsset;
  std::error_code ec;
  const bool has_warmup = warm_up && std::filesystem::exists(warmup, ec);
  // Cannot tell whether there are warm-up requests: fail rather than serve un-warmed.
  if (ec) return FailedPrecondition(who + ": cannot check " + warmup.string() + ": " + ec.message());
  if (has_warmup) {
    StatusOr<std::string> text = ReadSmallFile(warmup);
    if (!text.ok()) return text.status().WithPrefix(who + ": warm-up");
    Status s = RunWarmupRequests(**session, *text);
    if (!s.ok()) return s.WithPrefix(who + ": " + warmup.string());
  }
  return std::shared_ptr<const LoadedVersion>(std::make_shared<LoadedVersion>(
      model, version, dir, std::move(session).value(), std::chrono::system_clock::now(), std::move(own_pool), threads));
}

}  // namespace lockstep
