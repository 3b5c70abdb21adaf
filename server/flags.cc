#include "server/flags.h"

#include <charconv>
#include <limits>
#include <optional>
#include <string_view>
#include <variant>

namespace lockstep {

namespace {

constexpr std::string_view kVersion = "0.3.0";

struct FlagSpec {
  std::string_view name;
  std::variant<int ServerFlags::*, int64_t ServerFlags::*, bool ServerFlags::*, std::string ServerFlags::*> field;
  std::string_view help;
  bool ours = false;  // a Lockstep flag, not tensorflow_model_server's
};

const FlagSpec kFlags[] = {
    {"port", &ServerFlags::port, "Port for the gRPC API (0: an ephemeral port, logged at start)."},
    {"rest_api_port", &ServerFlags::rest_api_port,
     "Port for the HTTP/REST API; 0 turns REST off. Must differ from --port."},
    {"rest_api_num_threads", &ServerFlags::rest_api_num_threads,
     "Threads that serve REST connections and run their requests (0: 4 x CPUs). A request waiting for its batch "
     "holds none."},
    {"rest_api_timeout_in_ms", &ServerFlags::rest_api_timeout_in_ms,
     "Timeout for reading a REST request and writing its response, and for an idle keep-alive connection."},
    {"rest_api_enable_cors_support", &ServerFlags::rest_api_enable_cors_support,
     "Add CORS headers (Access-Control-Allow-Origin: *) to REST responses."},
    {"rest_api_max_request_bytes", &ServerFlags::rest_api_max_request_bytes,
     "Largest REST request body accepted; larger ones get HTTP 413.", true},
    {"rest_api_max_connections", &ServerFlags::rest_api_max_connections,
     "Lockstep's: open REST connections at most; one more is closed as soon as it is accepted (0: no cap)."},
    {"grpc_max_threads", &ServerFlags::grpc_max_threads, "Accepted for TF Serving's command lines; caps nothing: gRPC calls hold no thread here (see server/README.md)."},
    {"grpc_socket_path", &ServerFlags::grpc_socket_path,
     "Also serve the gRPC API on this Unix socket (relative or absolute path), with the same credentials as "
     "--port. Admin calls over it count as local."},
    {"grpc_channel_arguments", &ServerFlags::grpc_channel_arguments,
     "gRPC server channel arguments, 'key=value,...' (e.g. grpc.max_concurrent_streams=100,"
     "grpc.max_connection_idle_ms=60000,grpc.max_receive_message_length=67108864). They override the defaults."},
    {"model_name", &ServerFlags::model_name, "Name of the model, without --model_config_file."},
    {"model_base_path", &ServerFlags::model_base_path,
     "Directory holding the model's versions <base_path>/<version>/, without --model_config_file."},
    {"model_config_file", &ServerFlags::model_config_file,
     "ModelServerConfig in text format (model_config_list); overrides --model_name and --model_base_path."},
    {"model_config_file_poll_wait_seconds", &ServerFlags::model_config_file_poll_wait_seconds,
     "Seconds between reads of --model_config_file; 0 reads it once at start."},
    {"file_system_poll_wait_seconds", &ServerFlags::file_system_poll_wait_seconds,
     "Seconds between polls of the base paths for new versions; 0 polls once at start."},
    {"allow_version_labels_for_unavailable_models", &ServerFlags::allow_version_labels_for_unavailable_models,
     "Let a config assign a new label to a version that is not loaded yet (moving a label still needs it loaded)."},
    {"num_load_threads", &ServerFlags::num_load_threads, "Threads that load versions (0: 2)."},
    {"max_model_memory_bytes", &ServerFlags::max_model_memory_bytes,
     "The most bytes all loaded versions may hold together, each counted as its files' size; a load that would "
     "pass it fails and the serving version stays (0: no bound). Lockstep's own."},
    {"enable_model_warmup", &ServerFlags::enable_model_warmup,
     "Before a version serves, replay its warm-up requests: TF Serving's assets.extra/tf_serving_warmup_requests "
     "(PredictionLog records) and a bundle's assets/warmup_requests.json. One that fails fails the load."},
    {"num_request_iterations_for_warmup", &ServerFlags::num_request_iterations_for_warmup,
     "Times each warm-up record runs; used only when above 0 (else once), as upstream."},
    {"tensorflow_intra_op_parallelism", &ServerFlags::tensorflow_intra_op_parallelism,
     "Threads one request's kernels may use (0: the number of CPUs)."},
    {"enable_batching", &ServerFlags::enable_batching,
     "Merge predict, classify and regress requests for the same model version and signature into batches "
     "(dynamic batching; see --batching_parameters_file)."},
    {"batching_parameters_file", &ServerFlags::batching_parameters_file,
     "BatchingParameters in text format (max_batch_size, batch_timeout_micros, max_enqueued_batches, "
     "num_batch_threads, allowed_batch_sizes, pad_variable_length_inputs); needs --enable_batching. Without it, "
     "TF Serving's defaults."},
    {"monitoring_config_file", &ServerFlags::monitoring_config_file,
     "MonitoringConfig in text format: prometheus_config { enable: true path: \"/monitoring/prometheus/metrics\" } "
     "serves the metrics there on the REST port (they are at /metrics always)."},
    {"ssl_config_file", &ServerFlags::ssl_config_file,
     "SSLConfig in text format (server_key, server_cert, custom_ca: PEM text; client_verify: require client "
     "certificates signed by custom_ca). Serves gRPC and REST over TLS (upstream: gRPC only)."},
    {"metrics_gone_version_grace_seconds", &ServerFlags::metrics_gone_version_grace_seconds,
     "Lockstep's: how long the metric series of a version that is gone (unloaded, or its model out of the config) "
     "stay before the next scrape drops them; keep it above the scrape interval."},
    {"drain_timeout_seconds", &ServerFlags::drain_timeout_seconds,
     "On SIGTERM or SIGINT: stop accepting, finish the requests accepted within this many seconds, exit 0."},
    {"admin_token_file", &ServerFlags::admin_token_file,
     "A file holding a token that admin calls (HandleReloadConfigRequest) must send as 'authorization: Bearer "
     "<token>', from any peer. Without it, admin calls are allowed from loopback only."},
    {"model_cache_dir", &ServerFlags::model_cache_dir,
     "Where versions of s3:// base paths are downloaded before they load (default <temp dir>/lockstep-model-cache). "
     "S3 is reached as the AWS tools and TF Serving do: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, "
     "AWS_REGION, S3_ENDPOINT (host:port, path-style), S3_USE_HTTPS, S3_VERIFY_SSL."},
    {"request_log_max_file_bytes", &ServerFlags::request_log_max_file_bytes,
     "Lockstep's, for logging_config's file collector: a request log file closes (and a new one opens) before a "
     "record would take it past this many bytes."},
    {"request_log_max_file_age_seconds", &ServerFlags::request_log_max_file_age_seconds,
     "Lockstep's: a request log file closes once it has been open this long; until it closes it is named "
     "*.tfrecord.partial."},
    {"request_log_queue_records", &ServerFlags::request_log_queue_records,
     "Lockstep's: sampled requests waiting for the log writer; past it (or past 256 MiB) they are dropped and "
     "counted, never waited for."},
    {"request_log_max_record_bytes", &ServerFlags::request_log_max_record_bytes,
     "Lockstep's: a PredictionLog record larger than this is written without its tensors' values and examples "
     "(log_metadata.truncated)."},
    {"help", &ServerFlags::help, "Print this help and exit."},
    {"version", &ServerFlags::version, "Print the version and exit."},
};

const FlagSpec* FindFlag(std::string_view name) {
  for (const FlagSpec& f : kFlags) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

template <typename T>
Status ParseInteger(std::string_view name, std::string_view text, T* out) {
  T value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) {
    return InvalidArgument("--" + std::string(name) + ": '" + std::string(text) + "' is not an integer" +
                           (ec == std::errc::result_out_of_range ? " in range" : ""));
  }
  *out = value;
  return Status::Ok();
}

Status ParseBool(std::string_view name, std::string_view text, bool* out) {
  if (text == "true" || text == "1") {
    *out = true;
  } else if (text == "false" || text == "0") {
    *out = false;
  } else {
    return InvalidArgument("--" + std::string(name) + ": '" + std::string(text) + "' is not true or false");
  }
  return Status::Ok();
}

std::string DefaultText(const FlagSpec& f) {
  const ServerFlags defaults;
  return std::visit(
      [&](auto member) -> std::string {
        const auto& value = defaults.*member;
        using V = std::decay_t<decltype(value)>;
        if constexpr (std::is_same_v<V, bool>) return value ? "true" : "false";
        else if constexpr (std::is_same_v<V, std::string>) return "\"" + value + "\"";
        else return std::to_string(value);
      },
      f.field);
}

}  // namespace

StatusOr<ServerFlags> ParseServerFlags(const std::vector<std::string>& args) {
  ServerFlags flags;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string_view arg = args[i];
    if (!arg.starts_with("--") || arg.size() == 2) {
      return InvalidArgument("unexpected argument '" + std::string(arg) + "' (flags are --name=value; see --help)");
    }
    arg.remove_prefix(2);
    const size_t eq = arg.find('=');
    const std::string_view name = arg.substr(0, eq);
    const FlagSpec* spec = FindFlag(name);
    if (spec == nullptr) return InvalidArgument("unknown flag --" + std::string(name) + " (see --help)");
    std::optional<std::string_view> value;
    if (eq != std::string_view::npos) value = arg.substr(eq + 1);
    const bool is_bool = std::holds_alternative<bool ServerFlags::*>(spec->field);
    if (!value && !is_bool) {
      if (i + 1 >= args.size()) return InvalidArgument("--" + std::string(name) + " needs a value");
      value = args[++i];
    }
    Status status = std::visit(
        [&](auto member) -> Status {
          auto& field = flags.*member;
          using V = std::decay_t<decltype(field)>;
          if constexpr (std::is_same_v<V, bool>) {
            if (!value) {
              field = true;
              return Status::Ok();
            }
            return ParseBool(name, *value, &field);
          } else if constexpr (std::is_same_v<V, std::string>) {
            field = std::string(*value);
            return Status::Ok();
          } else {
            return ParseInteger(name, *value, &field);
          }
        },
        spec->field);
    LS_RETURN_IF_ERROR(status);
  }
  return flags;
}

Status ValidateServerFlags(const ServerFlags& flags) {
  auto check_port = [](std::string_view name, int port) {
    if (port < 0 || port > 65535) {
      return InvalidArgument("--" + std::string(name) + "=" + std::to_string(port) + " is not a port (0..65535)");
    }
    return Status::Ok();
  };
  LS_RETURN_IF_ERROR(check_port("port", flags.port));
  LS_RETURN_IF_ERROR(check_port("rest_api_port", flags.rest_api_port));
  if (flags.rest_api_port != 0 && flags.rest_api_port == flags.port) {
    return InvalidArgument("--rest_api_port and --port must differ (both are " + std::to_string(flags.port) + ")");
  }
  auto check_non_negative = [](std::string_view name, int64_t value) {
    if (value < 0) return InvalidArgument("--" + std::string(name) + " must not be negative");
    return Status::Ok();
  };
  LS_RETURN_IF_ERROR(check_non_negative("rest_api_num_threads", flags.rest_api_num_threads));
  LS_RETURN_IF_ERROR(check_non_negative("grpc_max_threads", flags.grpc_max_threads));
  LS_RETURN_IF_ERROR(check_non_negative("num_load_threads", flags.num_load_threads));
  LS_RETURN_IF_ERROR(check_non_negative("max_model_memory_bytes", flags.max_model_memory_bytes));
  LS_RETURN_IF_ERROR(
      check_non_negative("metrics_gone_version_grace_seconds", flags.metrics_gone_version_grace_seconds));
  LS_RETURN_IF_ERROR(check_non_negative("tensorflow_intra_op_parallelism", flags.tensorflow_intra_op_parallelism));
  LS_RETURN_IF_ERROR(check_non_negative("model_config_file_poll_wait_seconds", flags.model_config_file_poll_wait_seconds));
  LS_RETURN_IF_ERROR(check_non_negative("file_system_poll_wait_seconds", flags.file_system_poll_wait_seconds));
  if (flags.rest_api_timeout_in_ms <= 0) return InvalidArgument("--rest_api_timeout_in_ms must be positive");
  if (flags.rest_api_max_request_bytes <= 0) return InvalidArgument("--rest_api_max_request_bytes must be positive");
  LS_RETURN_IF_ERROR(check_non_negative("rest_api_max_connections", flags.rest_api_max_connections));
  auto check_positive = [](std::string_view name, int64_t value) {
    if (value <= 0) return InvalidArgument("--" + std::string(name) + " must be positive");
    return Status::Ok();
  };
  LS_RETURN_IF_ERROR(check_positive("request_log_max_file_bytes", flags.request_log_max_file_bytes));
  LS_RETURN_IF_ERROR(check_positive("request_log_max_file_age_seconds", flags.request_log_max_file_age_seconds));
  if (flags.request_log_max_file_age_seconds > int64_t{10} * 365 * 24 * 3600) {
    return InvalidArgument("--request_log_max_file_age_seconds must be at most ten years");
  }
  LS_RETURN_IF_ERROR(check_positive("request_log_queue_records", flags.request_log_queue_records));
  LS_RETURN_IF_ERROR(check_positive("request_log_max_record_bytes", flags.request_log_max_record_bytes));
  if (flags.drain_timeout_seconds < 0 || flags.drain_timeout_seconds > 3600) {
    return InvalidArgument("--drain_timeout_seconds must be between 0 and 3600");
  }
  if (!flags.batching_parameters_file.empty() && !flags.enable_batching) {
    return InvalidArgument("--batching_parameters_file needs --enable_batching");
  }
  if (StatusOr<std::vector<GrpcChannelArgument>> args = ParseGrpcChannelArguments(flags.grpc_channel_arguments);
      !args.ok()) {
    return args.status();
  }
  if (flags.model_config_file.empty() && flags.model_base_path.empty()) {
    return InvalidArgument("give --model_config_file, or --model_base_path (with --model_name)");
  }
  return Status::Ok();
}

StatusOr<std::vector<GrpcChannelArgument>> ParseGrpcChannelArguments(std::string_view text) {
  auto trim = [](std::string_view s) {
    while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
    while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
    return s;
  };
  std::vector<GrpcChannelArgument> args;
  if (trim(text).empty()) return args;
  while (true) {
    const size_t comma = text.find(',');
    const std::string_view entry = text.substr(0, comma);
    const size_t equals = entry.find('=');
    const std::string_view key = trim(entry.substr(0, equals));
    if (equals == std::string_view::npos || key.empty()) {
      return InvalidArgument("--grpc_channel_arguments: '" + std::string(trim(entry)) + "' is not key=value");
    }
    const std::string_view value = trim(entry.substr(equals + 1));
    int number = 0;
    const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), number);
    if (!value.empty() && error == std::errc() && end == value.data() + value.size()) {
      args.push_back({std::string(key), number});
    } else {
      args.push_back({std::string(key), std::string(value)});
    }
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return args;
}

std::string ServerUsage() {
  std::string out =
      "usage: model-server [--flag=value ...]\n"
      "\n"
      "Serves Lockstep bundles with TensorFlow Serving's gRPC and REST APIs. Examples:\n"
      "  model-server --rest_api_port=8501 --model_name=half_plus_two --model_base_path=/models/half_plus_two\n"
      "  model-server --port=8500 --rest_api_port=8501 --model_config_file=/models/models.config\n"
      "\n"
      "Flags (those marked [lockstep] are not tensorflow_model_server's):\n";
  for (const FlagSpec& f : kFlags) {
    out += "  --" + std::string(f.name) + " (default " + DefaultText(f) + ")" + (f.ours ? " [lockstep]" : "") +
           "\n      " + std::string(f.help) + "\n";
  }
  return out;
}

std::string_view ServerVersion() { return kVersion; }

std::string ServerVersionString() {
  return "model-server " + std::string(kVersion) + " (Lockstep; TensorFlow Serving API compatible)";
}

}  // namespace lockstep
