// model-server, assembled: the model store, the config (from flags or a file, polled, and
// reloadable over gRPC), the gRPC services and the REST server.
//
// Configs are applied whole or not at all (a bad one leaves the running one serving). A model
// new to the server has no versions loaded yet, so its version_labels could not point at an
// available version when the config arrives; as TF Serving does, the server applies such a
// config without those labels first, waits for the loads, then applies it with them. A
// config that adds models returns once their first loads are done (as TF Serving's
// ReloadConfig does), so that a reload's caller can use them at once.
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "model_store/manager.h"
#include "runtime/status.h"
#include "server/batching/batch_scheduler.h"
#include "server/batching/batching_parameters.h"
#include "server/flags.h"
#include "server/grpc_services.h"
#include "server/health.h"
#include "server/open_inference/grpc_inference_service.h"
#include "server/open_inference/model_repository.h"
#include "server/request_log/request_logger.h"
#include "server/shadow.h"
#include "server/http_server.h"
#include "server/rest_api.h"
#include "tensorflow_serving/config/model_server_config.pb.h"

namespace lockstep {

class ModelServer {
 public:
  // Applies the initial config, waits for its first loads, then opens the gRPC and REST ports.
  static StatusOr<std::unique_ptr<ModelServer>> Start(const ServerFlags& flags);
  ~ModelServer();  // Shutdown()
  ModelServer(const ModelServer&) = delete;
  ModelServer& operator=(const ModelServer&) = delete;

  int grpc_port() const { return grpc_port_; }
  int rest_api_port() const { return http_ ? http_->port() : 0; }

  // What HandleReloadConfigRequest and the config file poll call.
  Status ReloadConfig(const tensorflow::serving::ModelServerConfig& proto);

  // The v2 protocol's model_repository extension. The repository is the config: every model it
  // has, and whether it was unloaded.
  std::vector<open_inference::RepositoryModel> RepositoryModels();
  // Unloading takes a model of the config out of the model store and keeps it out, config
  // reloads included, until it is loaded again; loading puts it back and reads its base path
  // again, and returns once its loads are done. NotFound for a model the config does not have.
  Status SetModelLoaded(const std::string& model, bool load);

  // SIGTERM's drain: readiness and gRPC health turn NOT_SERVING, the ports stop accepting, and
  // the requests already accepted finish (at most `timeout`; then they are cut). Then Shutdown.
  void Drain(std::chrono::milliseconds timeout);

  // SIGHUP: reads --model_config_file now and applies it (whether or not its text changed).
  // Without a config file, does nothing.
  void ReloadConfigFile();

  // Stops the ports, the config poll and the model store (idempotent).
  void Shutdown();

  // `batching`: --enable_batching's parameters; none when batching is off.
  ModelServer(const ServerFlags& flags, std::optional<ServerBatching> batching);

 private:
  // Models with batching options of their own.
  using ModelBatching = std::map<std::string, BatchingOptions, std::less<>>;
  // What a ModelServerConfig asks of the model store and of the batch scheduler.
  struct ServerConfig {
    StoreConfig store;
    ModelBatching batching;
    ModelLoggingMap logging;  // the models that log requests
  };
  StatusOr<ServerConfig> TranslateConfig(const tensorflow::serving::ModelServerConfig& proto) const;
  Status ApplyConfig(ServerConfig config);
  // Applies `config` (see the top of this file). UNKNOWN when models it adds have no version
  // available once their loads are done; the config is applied all the same.
  // `batching` goes to the batch scheduler once the model store has taken `config`, and
  // `logging` to the request logger once the config is applied.
  Status ApplyStoreConfig(StoreConfig config, ModelBatching batching, const ModelLoggingMap& logging);
  Status ApplyStoreConfigLocked(StoreConfig config, ModelBatching batching);
  // Waits (at most kFirstLoadWait, less if the server stops) for the manager's loads.
  bool WaitForLoads();
  void ConfigFilePollLoop();
  // Reads the config file and applies it when its text changed since the last read, or
  // always with `force`; a refusal is logged once per distinct message.
  void ReadConfigFile(bool force);

  const ServerFlags flags_;
  ModelManager manager_;
  ServingMetrics metrics_;
  ServerHealth health_;
  ShadowRunner shadow_;
  RequestLogger request_logger_;  // before the transports, whose answered requests it takes
  const std::optional<ServerBatching> server_batching_;
  // Declared before the transports: their requests wait in it, so it outlives them.
  std::unique_ptr<BatchScheduler> batching_;
  RestApi rest_api_;
  PredictionServiceImpl prediction_service_;
  ModelServiceImpl model_service_;
  open_inference::InferenceServiceImpl inference_service_;
  std::unique_ptr<grpc::Server> grpc_server_;
  int grpc_port_ = 0;
  std::unique_ptr<HttpServer> http_;

  std::mutex config_mu_;  // serialises config applications and loads and unloads
  StoreConfig applied_;   // the config, unloaded models included
  ModelBatching applied_batching_;
  StoreConfig served_;    // what the manager holds now: the config less the unloaded models
  std::set<std::string, std::less<>> unloaded_;  // models of the config unloaded over v2
  // applied_ and unloaded_ as RepositoryModels shows them, published after each change: an index
  // must not wait behind a load that holds config_mu_ for minutes.
  void PublishRepositoryLocked();
  std::mutex repository_mu_;
  std::vector<open_inference::RepositoryModel> repository_;

  std::mutex poll_mu_;
  std::condition_variable poll_cv_;
  bool stopping_ = false;
  std::mutex config_file_mu_;      // the poll thread and SIGHUP both read the file
  std::string last_config_text_;   // the file's text when it was last read
  std::string last_config_error_;  // why the file was last refused; empty when it was not
  std::thread config_poll_thread_;
  std::once_flag shutdown_once_;
};

}  // namespace lockstep
