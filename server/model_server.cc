#include "server/model_server.h"

#include <google/protobuf/text_format.h>
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <climits>
#include <filesystem>
#include <set>

#include "model_store/s3/s3_settings.h"
#include "runtime/thread_pool.h"
#include "server/model_server_config.h"
#include "server/socket_queues.h"
#include "server/tls_config.h"
#include "server/warmup.h"
#include "tensorflow_serving/config/monitoring_config.pb.h"

namespace lockstep {

namespace {

// How long a config application waits for the first loads of new models before applying
// their labels. Loads that take longer leave the labels refused (and say so).
constexpr auto kFirstLoadWait = std::chrono::minutes(5);

// REST threads when --rest_api_num_threads is 0: 4 per CPU, as upstream. A request waiting in
// a batch queue holds none, so batching needs no more.
int DefaultRestThreads() {
  const unsigned cpus = std::thread::hardware_concurrency();
  return 4 * static_cast<int>(cpus == 0 ? 1 : cpus);
}

ModelManager::Options ManagerOptions(const ServerFlags& flags) {
  ModelManager::Options options;
  options.file_system_poll_wait_seconds = flags.file_system_poll_wait_seconds;
  options.allow_version_labels_for_unavailable_models = flags.allow_version_labels_for_unavailable_models;
  options.num_load_threads = flags.num_load_threads > 0 ? flags.num_load_threads : 2;
  options.max_model_memory_bytes = flags.max_model_memory_bytes;
  options.enable_model_warmup = flags.enable_model_warmup;
  options.storage.cache_dir = flags.model_cache_dir.empty()
                                  ? std::filesystem::temp_directory_path() / "lockstep-model-cache"
                                  : std::filesystem::path(flags.model_cache_dir);
  if (StatusOr<S3Settings> s3 = S3SettingsFromEnvironment(); s3.ok()) {
    options.storage.s3 = *std::move(s3);
  } else {
    options.storage.s3_settings_status = s3.status();  // reported by every s3:// listing
  }
  const int iterations = std::max(1, flags.num_request_iterations_for_warmup);
  options.warm_up = [iterations](const ServableHandle& version) -> Status {
    const auto start = std::chrono::steady_clock::now();
    LS_ASSIGN_OR_RETURN(const WarmupReplay replay, ReplayWarmupFile(version, iterations));
    if (replay.records > 0) {
      spdlog::info("event=warmup_replayed model={} version={} records={} runs={} seconds={:.3f}", version->model(),
                   version->version(), replay.records, replay.runs,
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    return Status::Ok();
  };
  return options;
}

RequestLogOptions RequestLogOptionsFrom(const ServerFlags& flags) {
  RequestLogOptions options;
  options.file.max_file_bytes = flags.request_log_max_file_bytes;
  options.file.max_file_age = std::chrono::seconds(flags.request_log_max_file_age_seconds);
  options.max_queue_records = static_cast<size_t>(flags.request_log_queue_records);
  options.max_record_bytes = static_cast<size_t>(flags.request_log_max_record_bytes);
  return options;
}

std::unique_ptr<BatchScheduler> MakeBatchScheduler(const std::optional<ServerBatching>& batching,
                                                   ServingMetrics& metrics) {
  if (!batching) return nullptr;
  auto scheduler = std::make_unique<BatchScheduler>(batching->num_batch_threads, batching->defaults,
                                                    [&metrics](const BatchRun& run) { metrics.RecordBatch(run); });
  metrics.AddBatchQueues(*scheduler);
  const BatchingOptions& d = batching->defaults;
  spdlog::info("event=batching_on num_batch_threads={} max_batch_size={} batch_timeout_micros={} "
               "max_enqueued_batches={} allowed_batch_sizes={} pad_variable_length_inputs={}",
               batching->num_batch_threads, d.max_batch_size, d.batch_timeout.count(), d.max_enqueued_batches,
               d.allowed_batch_sizes.size(), d.pad_variable_length_inputs);
  return scheduler;
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

ModelServer::ModelServer(const ServerFlags& flags, std::optional<ServerBatching> batching)
    : flags_(flags),
      manager_(ManagerOptions(flags)),
      metrics_(manager_, std::chrono::seconds(flags.metrics_gone_version_grace_seconds)),
      health_(manager_),
      shadow_(metrics_),
      request_logger_(metrics_, RequestLogOptionsFrom(flags)),
      server_batching_(std::move(batching)),
      batching_(MakeBatchScheduler(server_batching_, metrics_)),
      rest_api_(manager_, metrics_, health_, shadow_, batching_.get()),
      prediction_service_(manager_, metrics_, health_, shadow_, batching_.get()),
      model_service_(manager_, [this](const tensorflow::serving::ModelServerConfig& proto) {
        return ReloadConfig(proto);
      }),
      inference_service_(manager_, metrics_, health_, shadow_, batching_.get()) {
  rest_api_.set_request_logger(&request_logger_);
  prediction_service_.set_request_logger(&request_logger_);
  inference_service_.set_request_logger(&request_logger_);
}

ModelServer::~ModelServer() { Shutdown(); }

StatusOr<std::unique_ptr<ModelServer>> ModelServer::Start(const ServerFlags& flags) {
  LS_RETURN_IF_ERROR(ValidateServerFlags(flags));
  if (flags.tensorflow_intra_op_parallelism > 0) ThreadPool::SetDefaultThreads(flags.tensorflow_intra_op_parallelism);
  std::optional<ServerBatching> batching;
  if (flags.enable_batching) {
    LS_ASSIGN_OR_RETURN(batching, ReadServerBatching(flags.batching_parameters_file));
  }
  auto server = std::make_unique<ModelServer>(flags, std::move(batching));

  AdminAccess admin;
  if (!flags.admin_token_file.empty()) {
    LS_ASSIGN_OR_RETURN(admin, AdminAccess::WithTokenFile(flags.admin_token_file));
  }
  server->model_service_.set_admin_access(admin);
  ModelServer* raw_server = server.get();
  const open_inference::RepositoryControl repository{
      [raw_server] { return raw_server->RepositoryModels(); },
      [raw_server](const std::string& model, bool load) { return raw_server->SetModelLoaded(model, load); }};
  server->rest_api_.set_repository(repository, admin);
  server->inference_service_.set_repository(repository, admin);
  // Before any model loads: a bad file should stop the server at once.
  std::optional<TlsCredentials> tls;
  if (!flags.ssl_config_file.empty()) {
    LS_ASSIGN_OR_RETURN(tls, ReadSslConfig(flags.ssl_config_file));
  }

  if (!flags.monitoring_config_file.empty()) {
    LS_ASSIGN_OR_RETURN(std::string path, PrometheusPath(flags.monitoring_config_file));
    server->rest_api_.set_monitoring_path(std::move(path));
  }
  ServerConfig config;
  if (flags.model_config_file.empty()) {
    LS_ASSIGN_OR_RETURN(config.store, SingleModelConfig(flags.model_name, flags.model_base_path));
  } else {
    LS_ASSIGN_OR_RETURN(server->last_config_text_, ReadConfigFileText(flags.model_config_file));
    LS_ASSIGN_OR_RETURN(const tensorflow::serving::ModelServerConfig proto,
                        ParseModelServerConfig(server->last_config_text_, flags.model_config_file));
    StatusOr<ServerConfig> translated = server->TranslateConfig(proto);
    if (!translated.ok()) return translated.status().WithPrefix(flags.model_config_file);
    config = std::move(translated).value();
  }
  // Returns once the first loads are done, so the ports open with the models available (as
  // TF Serving does). A model with nothing to serve yet does not stop the server: its first
  // version may still be exported into its base path.
  const Status applied = server->ApplyConfig(std::move(config));
  if (applied.code() == StatusCode::kUnknown) {
    spdlog::warn("event=startup_models_unavailable error=\"{}\"", applied.message());
  } else if (!applied.ok()) {
    return applied;
  }

  grpc::ServerBuilder builder;
  const std::shared_ptr<grpc::ServerCredentials> grpc_credentials =
      tls ? GrpcServerCredentials(*tls) : grpc::InsecureServerCredentials();
  builder.AddListeningPort("0.0.0.0:" + std::to_string(flags.port), grpc_credentials, &server->grpc_port_);
  int socket_bound = 0;
  if (!flags.grpc_socket_path.empty()) {
    builder.AddListeningPort("unix:" + flags.grpc_socket_path, grpc_credentials, &socket_bound);
  }
  // TF Serving's message limits (INT_MAX) unless the operator's --grpc_channel_arguments set
  // them: gRPC keeps the first of two values for one key, so the defaults must step aside.
  LS_ASSIGN_OR_RETURN(const std::vector<GrpcChannelArgument> channel_arguments,
                      ParseGrpcChannelArguments(flags.grpc_channel_arguments));
  auto operator_sets = [&](std::string_view key) {
    return std::any_of(channel_arguments.begin(), channel_arguments.end(),
                       [&](const GrpcChannelArgument& argument) { return argument.key == key; });
  };
  if (!operator_sets(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH)) builder.SetMaxReceiveMessageSize(INT_MAX);
  if (!operator_sets(GRPC_ARG_MAX_SEND_MESSAGE_LENGTH)) builder.SetMaxSendMessageSize(INT_MAX);
  for (const GrpcChannelArgument& argument : channel_arguments) {
    std::visit([&](const auto& value) { builder.AddChannelArgument(argument.key, value); }, argument.value);
    spdlog::info("event=grpc_channel_argument key={} value={}", argument.key,
                 std::visit([](const auto& value) { return fmt::format("{}", value); }, argument.value));
  }
  // --grpc_max_threads caps nothing here: the services are on gRPC's callback API, where a call
  // holds no thread (the synchronous server's cap refused calls beyond it).
  builder.RegisterService(&server->prediction_service_);
  builder.RegisterService(&server->model_service_);
  builder.RegisterService(&server->inference_service_);
  // gRPC's standard health service (grpc.health.v1.Health), for Kubernetes' gRPC probes.
  grpc::EnableDefaultHealthCheckService(true);
  server->grpc_server_ = builder.BuildAndStart();
  // gRPC starts no server when any of its ports fails.
  if (!server->grpc_server_ || server->grpc_port_ == 0 || (!flags.grpc_socket_path.empty() && socket_bound == 0)) {
    std::string where = "0.0.0.0:" + std::to_string(flags.port);
    if (!flags.grpc_socket_path.empty()) where += " and unix:" + flags.grpc_socket_path + " (--grpc_socket_path)";
    return Status(StatusCode::kUnavailable, "cannot listen for gRPC on " + where +
                                                ": a port in use, a missing directory, or a file in the way");
  }

  if (flags.rest_api_port != 0) {
    HttpServerOptions http;
    http.port = flags.rest_api_port;
    http.num_threads =
        flags.rest_api_num_threads > 0 ? flags.rest_api_num_threads : DefaultRestThreads();
    http.timeout = std::chrono::milliseconds(flags.rest_api_timeout_in_ms);
    http.max_body_bytes = static_cast<size_t>(flags.rest_api_max_request_bytes);
    http.enable_cors = flags.rest_api_enable_cors_support;
    http.max_connections = static_cast<size_t>(flags.rest_api_max_connections);
    http.tls = tls;
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
  // As TF Serving: a running server moves only from one model list to another. A config with
  // none (an empty file, caught half-written or truncated by an editor) would unload every
  // model; "model_config_list {}" says that on purpose.
  if (proto.config_case() == tensorflow::serving::ModelServerConfig::CONFIG_NOT_SET) {
    return FailedPrecondition(
        "Cannot transition to requested config. It is only legal to transition from one ModelConfigList to "
        "another.");
  }
  LS_ASSIGN_OR_RETURN(ServerConfig config, TranslateConfig(proto));
  return ApplyConfig(std::move(config));
}

StatusOr<ModelServer::ServerConfig> ModelServer::TranslateConfig(
    const tensorflow::serving::ModelServerConfig& proto) const {
  ServerConfig config;
  LS_ASSIGN_OR_RETURN(config.store, StoreConfigFromProto(proto));
  LS_ASSIGN_OR_RETURN(config.batching,
                      ModelBatchingFromConfig(proto, server_batching_ ? &*server_batching_ : nullptr));
  LS_ASSIGN_OR_RETURN(config.logging, ModelLoggingFromConfig(proto));
  return config;
}

Status ModelServer::ApplyConfig(ServerConfig config) {
  return ApplyStoreConfig(std::move(config.store), std::move(config.batching), config.logging);
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

Status ModelServer::ApplyStoreConfig(StoreConfig config, ModelBatching batching, const ModelLoggingMap& logging) {
  std::lock_guard<std::mutex> lock(config_mu_);
  // A model that left the config is forgotten as unloaded: if it comes back, it loads.
  std::set<std::string, std::less<>> unloaded;
  for (const ModelConfig& m : config.models) {
    if (unloaded_.contains(m.name)) unloaded.insert(m.name);
  }
  StoreConfig full = config;
  std::erase_if(config.models, [&](const ModelConfig& m) { return unloaded.contains(m.name); });
  const Status status = ApplyStoreConfigLocked(std::move(config), batching);
  // UNKNOWN: applied, but a model it adds has nothing available (yet).
  if (!status.ok() && status.code() != StatusCode::kUnknown) return status;
  applied_ = std::move(full);
  applied_batching_ = std::move(batching);
  request_logger_.SetModels(logging);
  unloaded_ = std::move(unloaded);
  PublishRepositoryLocked();
  return status;
}

void ModelServer::PublishRepositoryLocked() {
  std::vector<open_inference::RepositoryModel> models;
  for (const ModelConfig& m : applied_.models) models.push_back({m.name, unloaded_.contains(m.name)});
  std::sort(models.begin(), models.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  std::lock_guard<std::mutex> lock(repository_mu_);
  repository_ = std::move(models);
}

std::vector<open_inference::RepositoryModel> ModelServer::RepositoryModels() {
  std::lock_guard<std::mutex> lock(repository_mu_);
  return repository_;
}

Status ModelServer::SetModelLoaded(const std::string& model, bool load) {
  std::lock_guard<std::mutex> lock(config_mu_);
  if (std::none_of(applied_.models.begin(), applied_.models.end(), [&](const ModelConfig& m) { return m.name == model; })) {
    return NotFound("model '" + model + "' is not in the server's model config");
  }
  if (load && !unloaded_.contains(model)) {
    // Loaded already: read its base path again, as a load of a loaded model does.
    manager_.PollNow();
    WaitForLoads();
    spdlog::info("event=model_reloaded model={}", model);
    return Status::Ok();
  }
  if (!load && unloaded_.contains(model)) return Status::Ok();
  std::set<std::string, std::less<>> unloaded = unloaded_;
  if (load) {
    unloaded.erase(model);
  } else {
    unloaded.insert(model);
  }
  StoreConfig config = applied_;
  std::erase_if(config.models, [&](const ModelConfig& m) { return unloaded.contains(m.name); });
  const Status status = ApplyStoreConfigLocked(std::move(config), applied_batching_);
  // UNKNOWN: applied, but nothing of the loaded model is available (yet).
  if (!status.ok() && status.code() != StatusCode::kUnknown) return status;
  unloaded_ = std::move(unloaded);
  PublishRepositoryLocked();
  spdlog::info("event={} model={}", load ? "model_loaded" : "model_unloaded", model);
  return status;
}

Status ModelServer::ApplyStoreConfigLocked(StoreConfig config, ModelBatching batching) {
  // The models' batching goes with the store's config, as soon as the manager has taken it
  // (before its loads), under the same lock: two reloads at once cannot mix their halves.
  auto set_batching = [&] {
    if (batching_) batching_->SetModelOptions(std::move(batching));
  };
  // Models new here (or read from another base path) have nothing loaded yet: the config
  // returns once they have loaded, and their labels wait for that.
  std::set<std::pair<std::string, std::string>> known;
  for (const ModelConfig& m : served_.models) known.insert({m.name, m.base_path});
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
    served_ = std::move(first);
    set_batching();
    WaitForLoads();
  }
  const Status status = manager_.ApplyConfig(config);
  if (!deferred && status.ok()) set_batching();
  if (!status.ok()) {
    if (deferred) {
      return status.WithPrefix("the config's models are being served, but its version_labels were refused");
    }
    return status;
  }
  served_ = std::move(config);
  if (!added.empty() && !deferred) WaitForLoads();
  std::string names;
  for (const ModelConfig& m : served_.models) names += (names.empty() ? "" : ",") + m.name;
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
  {
    // A repository load or config reload waiting for its loads stops waiting: its gRPC call
    // would otherwise hold up the server's shutdown below.
    std::lock_guard<std::mutex> lock(poll_mu_);
    stopping_ = true;
  }
  poll_cv_.notify_all();
  if (grpc_server_) grpc_server_->GetHealthCheckService()->SetServingStatus(false);
  spdlog::info("event=draining timeout_ms={}", timeout.count());
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // Both transports at once, each finishing what it accepted by the one deadline.
  int http_cut = 0;
  std::thread http_drain([this, timeout, &http_cut] {
    if (http_) http_cut = http_->Drain(timeout);
  });
  // gRPC: new calls are refused UNAVAILABLE by the service, and open streams end once their
  // answers are sent; wait for the running ones, then stop the server (which cancels only what
  // is left at the deadline).
  inference_service_.FinishStreams();
  auto grpc_in_flight = [this] { return prediction_service_.in_flight() + inference_service_.in_flight(); };
  while (grpc_in_flight() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const int grpc_cut = grpc_in_flight();
  // The answers' last bytes reach the clients' kernels before the connections can be reset
  // (socket_queues.h).
  for (StatusOr<uint64_t> unsent = UnsentBytesOnPort(grpc_port_);
       unsent.ok() && *unsent > 0 && std::chrono::steady_clock::now() < deadline;
       unsent = UnsentBytesOnPort(grpc_port_)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
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
    // After the transports: requests still queued in it are answered before they end.
    if (batching_) batching_->Stop();
    // Once no request can answer any more: everything it logged is written and its files closed.
    request_logger_.Stop();
    manager_.Stop();
  });
}

}  // namespace lockstep
