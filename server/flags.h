// model-server's command line: tensorflow_model_server's flags, names and defaults, plus a few
// of Lockstep's own (marked so in --help). Flags are written --name=value or --name value;
// booleans also as --name alone. An unknown flag or a bad value is an error naming the flag.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "runtime/status.h"

namespace lockstep {

struct ServerFlags {
  int port = 8500;
  int rest_api_port = 0;       // 0: REST off, as upstream
  int rest_api_num_threads = 0;  // 0: 4 x CPUs, as upstream
  int64_t rest_api_timeout_in_ms = 30000;
  bool rest_api_enable_cors_support = false;
  int64_t rest_api_max_request_bytes = int64_t{64} << 20;  // Lockstep's: 413 beyond it
  int64_t rest_api_max_connections = 4096;                 // Lockstep's: more are closed at once
  int grpc_max_threads = 0;      // accepted, caps nothing: calls hold no thread (see model_server.cc)
  std::string grpc_socket_path;     // also serve gRPC on this Unix socket; empty: TCP only
  std::string grpc_channel_arguments;  // "key=value,..." for gRPC's server (see ParseGrpcChannelArguments)
  std::string model_name = "default";
  std::string model_base_path;
  std::string model_config_file;
  int64_t model_config_file_poll_wait_seconds = 0;
  int64_t file_system_poll_wait_seconds = 1;
  bool allow_version_labels_for_unavailable_models = false;
  int num_load_threads = 0;      // 0: 2 threads (upstream 0 means serial loads on one)
  int64_t max_model_memory_bytes = 0;  // Lockstep's: what loaded versions may hold together; 0: no bound
  bool enable_model_warmup = true;         // replay each version's warm-up requests before it serves
  int num_request_iterations_for_warmup = 1;  // times each warm-up record runs; 0 or less: once
  int tensorflow_intra_op_parallelism = 0;  // 0: the runtime's default pool size
  bool enable_batching = false;
  std::string batching_parameters_file;     // BatchingParameters; empty: TF Serving's defaults
  std::string monitoring_config_file;       // MonitoringConfig; /metrics is served regardless
  int64_t drain_timeout_seconds = 20;       // Lockstep's: SIGTERM's drain, at most this long
  int64_t metrics_gone_version_grace_seconds = 300;  // Lockstep's: a gone version's series stay this long
  std::string ssl_config_file;              // SSLConfig: TLS for gRPC and REST; empty: plaintext
  std::string admin_token_file;             // Lockstep's: admin calls need this token (else loopback only)
  std::string model_cache_dir;  // where s3:// versions are downloaded; empty: <temp dir>/lockstep-model-cache
  // Lockstep's, for logging_config's file collector (server/request_log/):
  int64_t request_log_max_file_bytes = int64_t{64} << 20;   // a log file closes before it passes this
  int64_t request_log_max_file_age_seconds = 300;           // and once it has been open this long
  int64_t request_log_queue_records = 4096;                 // records waiting to be written; more are dropped
  int64_t request_log_max_record_bytes = int64_t{4} << 20;  // larger records are truncated
  bool help = false;
  bool version = false;
};

// Parses argv[1..]. The result is not yet checked for consistency: see ValidateServerFlags.
StatusOr<ServerFlags> ParseServerFlags(const std::vector<std::string>& args);

// Ranges and combinations: ports in 0..65535 (--port may be 0 for an ephemeral gRPC port),
// REST and gRPC ports different, a model to serve (--model_config_file or
// --model_base_path), positive timeouts.
Status ValidateServerFlags(const ServerFlags& flags);

// One of --grpc_channel_arguments: a gRPC channel argument such as grpc.max_concurrent_streams,
// with an integer value when the value is a whole number that fits an int, else a string (as
// upstream).
struct GrpcChannelArgument {
  std::string key;
  std::variant<int, std::string> value;
};

// Parses --grpc_channel_arguments, "key=value,key=value" (spaces around either trimmed). An
// entry without '=' or with an empty key is an error naming it. gRPC ignores keys it does not
// know, as upstream.
StatusOr<std::vector<GrpcChannelArgument>> ParseGrpcChannelArguments(std::string_view text);

// The --help text: every flag, its default and what it does.
std::string ServerUsage();

// "model-server <version> (TensorFlow Serving API compatible)".
std::string ServerVersionString();
// The version alone, "0.3.0".
std::string_view ServerVersion();

}  // namespace lockstep
