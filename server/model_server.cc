#include "server/model_server.h"

#include <google/protobuf/text_format.h>
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <climits>
#include <set>

#include "runtime/thread_pool.h"
#include "server/model_server_config.h"
#include "tensorflow_serving/config/monitoring_config.pb.h"

namespace lockstep {

namespace {

// How long a config application waits for the first loads of new models before applying
// their labels. Loads that take longer leave the labels refused (and say so).
constexpr auto kFirstLoadWait = std::chrono::minutes(5);

int DefaultThreads() {
  const unsigned cpus = std::thread::hardware_concurrency();
  return 4 * static_cast<int>(cpus == 0 ? 1 : cpus);
}

ModelManager::Options ManagerOptions(const ServerFlags& flags) {
  ModelManager::Options options;
  options.file_system_poll_wait_seconds = flags.file_system_poll_wait_seconds;
  options.allow_version_labels_for_unavailable_models = flags.allow_version_labels_for_unavailable_models;
  options.num_load_threads = flags.num_load_threads > 0 ? flags.num_load_threads : 2;
  return options;
}

StatusOr<StoreConfig> InitialConfig(const ServerFlags& flags, std::string* config_text) {
  if (flags.model_config_file.empty()) return SingleModelConfig(flags.model_name, flags.model_base_path);
  LS_ASSIGN_OR_RETURN(*config_text, ReadConfigFileText(flags.model_config_file));
  LS_ASSIGN_OR_RETURN(const tensorflow::serving::ModelServerConfig proto,
                      ParseModelServerConfig(*config_text, flags.model_config_file));
  StatusOr<StoreConfig> config = StoreConfigFromProto(proto);
  if (!config.ok()) return config.status().WithPrefix(flags.model_config_file);
  return config;
}

// The path --monitoring_config_file asks the metrics to be served at; empty when it leaves
// Prometheus off. Errors name the file.
StatusOr<std::string> PrometheusPath(const std::string& file) {
  LS_ASSIGN_OR_RETURN(const std::string text, ReadConfigFileText(file));
  tensorflow::serving::MonitoringConfig config;
  if (!google::protobuf::TextFormat::ParseFromString(text, &config)) {
    return InvalidArgument(file + ": not a MonitoringConfig in text format (e.g. prometheus_config { enable: true })");
  }
  if (!config.prometheus_config().enable()) return std::string();
  std::string path = config.prometheus_config().path();
  if (path.empty()) path = "/monitoring/prometheus/metrics";
  if (path[0] != '/' || path.rfind("/v1/", 0) == 0 || path.find_first_of("?# ") != std::string::npos) {
    return InvalidArgument(file + ": prometheus_config.path '" + path +
                           "' must be an absolute path outside /v1/, without '?', '#' or spaces");
  }
  return path;
}

}  // namespace

ModelServer::ModelServer(const ServerFlags& flags)
    : flags_(flags),
      manager_(ManagerOptions(flags)),
      metrics_(manager_),
      health_(manager_),
      shadow_(metrics_),
      rest_api_(manager_, metrics_, health_, shadow_),
      prediction_service_(manager_, metrics_, health_, shadow_),
      model_service_(manager_, [this](const tensorflow::serving::ModelServerConfig& proto) {
        return ReloadConfig(proto);
      }) {}

ModelServer::~ModelServer() { Shutdown(); }

StatusOr<std::unique_ptr<ModelServer>> ModelServer::Start(const ServerFlags& flags) {
  LS_RETURN_IF_ERROR(ValidateServerFlags(flags));
  if (flags.tensorflow_intra_op_parallelism > 0) ThreadPool::SetDefaultThreads(flags.tensorflow_intra_op_parallelism);
  auto server = std::make_unique<ModelServer>(flags);

  if (!flags.admin_token_file.empty()) {
    LS_ASSIGN_OR_RETURN(AdminAccess access, AdminAccess::WithTokenFile(flags.admin_token_file));
    server->model_service_.set_admin_access(std::move(access));
  }
  if (!flags.monitoring_config_file.empty()) {
    LS_ASSIGN_OR_RETURN(std::string path, PrometheusPath(flags.monitoring_config_file));
    server->rest_api_.set_monitoring_path(std::move(path));
  }
  std::string config_text;
  LS_ASSIGN_OR_RETURN(StoreConfig config, InitialConfig(flags, &config_text));
  server->last_config_text_ = config_text;
  // Returns once the first loads are done, so the ports open with the models available (as
  // TF Serving does). A model with nothing to serve yet does not stop the server: its first
  // version may still be exported into its base path.
  const Status applied = server->ApplyStoreConfig(std::move(config));
  if (applied.code() == StatusCode::kUnknown) {
    spdlog::warn("event=startup_models_unavailable error=\"{}\"", applied.message());
  } else if (!applied.ok()) {
    return applied;
  }

  grpc::ServerBuilder builder;
  builder.AddListeningPort("0.0.0.0:" + std::to_string(flags.port), grpc::InsecureServerCredentials(),
                           &server->grpc_port_);
  builder.SetMaxReceiveMessageSize(INT_MAX);
  builder.SetMaxSendMessageSize(INT_MAX);
  // gRPC's synchronous server answers RESOURCE_EXHAUSTED to a call that finds all its
  // threads busy rather than queueing it, so a cap is set only when asked for: by default the
  // server grows threads with the calls in flight.
  if (flags.grpc_max_threads > 0) {
    grpc::ResourceQuota quota("model-server");
    quota.SetMaxThreads(flags.grpc_max_threads);
    builder.SetResourceQuota(quota);
  }
  builder.RegisterService(&server->prediction_service_);
  builder.RegisterService(&server->model_service_);
  // gRPC's standard health service (grpc.health.v1.Health), for Kubernetes' gRPC probes.
  grpc::EnableDefaultHealthCheckService(true);
  server->grpc_server_ = builder.BuildAndStart();
  if (!server->grpc_server_ || server->grpc_port_ == 0) {
    return Status(StatusCode::kUnavailable, "cannot listen for gRPC on 0.0.0.0:" + std::to_string(flags.port));
  }

  if (flags.rest_api_port != 0) {
    HttpServerOptions http;
    http.port = flags.rest_api_port;
    http.num_threads = flags.rest_api_num_threads > 0 ? flags.rest_api_num_threads : DefaultThreads();
    http.timeout = std::chrono::milliseconds(flags.rest_api_timeout_in_ms);
    http.max_body_bytes = static_cast<size_t>(flags.rest_api_max_request_bytes);
    http.enable_cors = flags.rest_api_enable_cors_support;
    http.max_connections = static_cast<size_t>(flags.rest_api_max_connections);
    LS_ASSIGN_OR_RETURN(server->http_, HttpServer::Start(http, server->rest_api_));
  }

  if (!flags.model_config_file.empty() && flags.model_config_file_poll_wait_seconds > 0) {
    ModelServer* raw = server.get();
    server->config_poll_thread_ = std::thread([raw] { raw->ConfigFilePollLoop(); });
  }
  server->health_.SetStarted();
  return server;
}

Status ModelServer::ReloadConfig(const tensorflow::serving::ModelServerConfig& proto) {
  LS_ASSIGN_OR_RETURN(StoreConfig config, StoreConfigFromProto(proto));
  return ApplyStoreConfig(std::move(config));
}

bool ModelServer::WaitForLoads() {
  const auto deadline = std::chrono::steady_clock::now() + kFirstLoadWait;
  while (std::chrono::steady_clock::now() < deadline) {
    if (manager_.WaitUntilIdle(std::chrono::milliseconds(100))) return true;
    std::lock_guard<std::mutex> lock(poll_mu_);
    if (stopping_) return false;
  }
  spdlog::warn("event=config_loads_slow wait_s={}", std::chrono::seconds(kFirstLoadWait).count());
  return false;
}

Status ModelServer::ApplyStoreConfig(StoreConfig config) {
  std::lock_guard<std::mutex> lock(config_mu_);
  // Models new here (or read from another base path) have nothing loaded yet: the config
  // returns once they have loaded, and their labels wait for that.
  std::set<std::pair<std::string, std::string>> known;
  for (const ModelConfig& m : applied_.models) known.insert({m.name, m.base_path});
  std::vector<std::string> added;
  for (const ModelConfig& m : config.models) {
    if (known.count({m.name, m.base_path}) == 0) added.push_back(m.name);
  }
  StoreConfig first = config;
  bool deferred = false;
  if (!flags_.allow_version_labels_for_unavailable_models) {
    for (ModelConfig& m : first.models) {
      if (!m.labels.empty() && known.count({m.name, m.base_path}) == 0) {
        m.labels.clear();
        m.traffic.clear();  // its arms may name those labels
        m.shadow.reset();
        deferred = true;
      }
    }
  }
  if (deferred) {
    LS_RETURN_IF_ERROR(manager_.ApplyConfig(first));
    applied_ = std::move(first);
    WaitForLoads();
  }
  const Status status = manager_.ApplyConfig(config);
  if (!status.ok()) {
    if (deferred) {
      return status.WithPrefix("the config's models are being served, but its version_labels were refused");
    }
    return status;
  }
  applied_ = std::move(config);
  if (!added.empty() && !deferred) WaitForLoads();
  std::string names;
  for (const ModelConfig& m : applied_.models) names += (names.empty() ? "" : ",") + m.name;
  spdlog::info("event=config_applied models={}", names);

  // As TF Serving's reload does, a config whose new models serve nothing says so (the config
  // stays applied: their versions may yet appear or be fixed on disk).
  std::string unavailable;
  const std::shared_ptr<const ServingSnapshot> snapshot = manager_.Snapshot();
  for (const std::string& name : added) {
    const auto it = snapshot->models.find(name);
    if (it == snapshot->models.end() || it->second.versions.empty()) {
      unavailable += (unavailable.empty() ? "" : ", ") + name;
    }
  }
  if (!unavailable.empty()) {
    return Status(StatusCode::kUnknown, "the config is applied, but these models have no version available "
                                        "(see their model status): " + unavailable);
  }
  return Status::Ok();
}

void ModelServer::ConfigFilePollLoop() {
  const auto wait = std::chrono::seconds(flags_.model_config_file_poll_wait_seconds);
  std::unique_lock<std::mutex> lock(poll_mu_);
  while (!poll_cv_.wait_for(lock, wait, [this] { return stopping_; })) {
    lock.unlock();
    ReadConfigFile(/*force=*/false);
    lock.lock();
  }
}

void ModelServer::ReloadConfigFile() {
  if (flags_.model_config_file.empty()) {
    spdlog::info("event=sighup action=none reason=\"no --model_config_file\"");
    return;
  }
  ReadConfigFile(/*force=*/true);
}

void ModelServer::ReadConfigFile(bool force) {
  std::lock_guard<std::mutex> lock(config_file_mu_);
  StatusOr<std::string> text = ReadConfigFileText(flags_.model_config_file);
  Status status;
  if (!text.ok()) {
    status = text.status();
  } else if (force || *text != last_config_text_) {
    last_config_text_ = *text;
    StatusOr<tensorflow::serving::ModelServerConfig> proto = ParseModelServerConfig(*text, flags_.model_config_file);
    status = proto.ok() ? ReloadConfig(*proto).WithPrefix(flags_.model_config_file) : proto.status();
    if (status.ok()) spdlog::info("event=config_file_reloaded file={}", flags_.model_config_file);
  } else {
    return;  // unchanged since it was last read
  }
  // A bad or unreadable file is reported once, not on every poll (but on every SIGHUP).
  if (!status.ok() && (force || status.message() != last_config_error_)) {
    spdlog::error("event=config_file_rejected file={} error=\"{}\" action=\"keeping the running config\"",
                  flags_.model_config_file, status.message());
  }
  last_config_error_ = status.message();
}

void ModelServer::Drain(std::chrono::milliseconds timeout) {
  health_.SetDraining();
  if (grpc_server_) grpc_server_->GetHealthCheckService()->SetServingStatus(false);
  spdlog::info("event=draining timeout_ms={}", timeout.count());
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // Both transports at once, each finishing what it accepted by the one deadline.
  int http_cut = 0;
  std::thread http_drain([this, timeout, &http_cut] {
    if (http_) http_cut = http_->Drain(timeout);
  });
  // gRPC: new calls are refused UNAVAILABLE by the service; wait for the running ones, then
  // stop the server (which cancels only what is left at the deadline).
  while (prediction_service_.in_flight() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const int grpc_cut = prediction_service_.in_flight();
  if (grpc_server_) grpc_server_->Shutdown(std::chrono::system_clock::now());
  http_drain.join();
  spdlog::info("event=drained grpc_calls_cut={} http_connections_cut={}", grpc_cut, http_cut);
  Shutdown();
}

void ModelServer::Shutdown() {
  std::call_once(shutdown_once_, [this] {
    {
      std::lock_guard<std::mutex> lock(poll_mu_);
      stopping_ = true;
    }
    poll_cv_.notify_all();
    if (config_poll_thread_.joinable()) config_poll_thread_.join();
    if (grpc_server_) grpc_server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    if (http_) http_->Stop();
    manager_.Stop();
  });
}

}  // namespace lockstep
