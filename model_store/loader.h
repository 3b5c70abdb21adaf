// The loader: turns a version directory into a servable LoadedVersion. Reads and validates the
// bundle (runtime/bundle), compiles a Session, and warms it up, so that the first real request
// meets a compiled, exercised model. Nothing here is shared or mutable once built.
//
// Warm-up requests: an optional asset <dir>/assets/warmup_requests.json holding a JSON array
// of at most 1000 requests, each
//     {"signature_name": "serving_default", "inputs": {"x": [[1.0, 2.0]]}}
// ("signature_name" may be left out: serving_default). Input dtypes come from the signature.
// Each request runs once; any failure fails the load, so a model that cannot answer its own
// warm-up requests is never served. (TensorFlow Serving's own warm-up file, which any version
// may carry, is the server's: server/warmup.h, through ModelManager::Options::warm_up.)
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "runtime/session.h"
#include "runtime/status.h"

namespace lockstep {

inline constexpr std::string_view kWarmupRequestsAsset = "warmup_requests.json";
inline constexpr size_t kMaxWarmupRequests = 1000;

// One loaded version of a model. Immutable; shared by the manager's snapshot and by every
// request in flight, and destroyed (weights freed) when the last of them lets go.
class LoadedVersion {
 public:
  LoadedVersion(std::string model, int64_t version, std::filesystem::path dir,
                std::unique_ptr<Session> session, std::chrono::system_clock::time_point loaded_at,
                std::shared_ptr<ThreadPool> pool = nullptr, int threads = 0)
      : model_(std::move(model)),
        version_(version),
        dir_(std::move(dir)),
        pool_(std::move(pool)),
        session_(std::move(session)),
        loaded_at_(loaded_at),
        threads_(threads) {}
  LoadedVersion(const LoadedVersion&) = delete;
  LoadedVersion& operator=(const LoadedVersion&) = delete;

  const std::string& model() const { return model_; }
  int64_t version() const { return version_; }
  const std::filesystem::path& dir() const { return dir_; }
  const Session& session() const { return *session_; }  // Session::Run is thread-safe
  std::chrono::system_clock::time_point loaded_at() const { return loaded_at_; }
  // The threads a request computes on: its own pool's, or the pool it was loaded with.
  int threads() const { return threads_; }

 private:
  const std::string model_;
  const int64_t version_;
  const std::filesystem::path dir_;
  const std::shared_ptr<ThreadPool> pool_;  // the session's, when it has one of its own: outlives it
  const std::unique_ptr<const Session> session_;
  const std::chrono::system_clock::time_point loaded_at_;
  const int threads_;
};

// Reads, compiles and (unless `warm_up` is false) warms up the bundle at `dir`. Errors name the
// model, the version and what failed (the bundle reader's message names the file). The session
// releases its packed weights (SessionOptions::release_packed_weights), whatever `options` say.
// With `own_pool`, the session runs on it instead of options.pool, and the version holds it.
StatusOr<std::shared_ptr<const LoadedVersion>> LoadVersion(const std::string& model, int64_t version,
                                                           const std::filesystem::path& dir,
                                                           const SessionOptions& options, bool warm_up = true,
                                                           std::shared_ptr<ThreadPool> own_pool = nullptr);

// Runs the warm-up requests in `json_text` (the format above) against `session`.
// Exposed for tests; LoadVersion calls it when the asset exists.
Status RunWarmupRequests(const Session& session, std::string_view json_text);

}  // namespace lockstep
