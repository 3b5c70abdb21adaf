// TensorFlow Serving's REST API, independent of the HTTP transport: a request's method,
// target and body in, a status code and a JSON body out.
//
//   GET  /v1/models/{m}[/versions/{v} | /labels/{l}]             model status
//   GET  /v1/models/{m}[/versions/{v} | /labels/{l}]/metadata    model metadata
//   POST /v1/models/{m}[/versions/{v} | /labels/{l}]:predict     also :classify, :regress
//   GET  /metrics (and the monitoring path)                      Prometheus' text format
//   GET  /v2/health/live, /v2/health/ready                       200, or 503 {"error": why}
//   GET  /v2/models/{m}[/versions/{v}]/ready                     200, 404 (no such model) or 503
//   /v2/...                                                      the Open Inference Protocol
//                                                                (server/open_inference/rest_paths.h)
//
// As in TF Serving the path is matched case-insensitively, the model name and label are
// URL-decoded, and the version must be digits. Errors are {"error": "..."} with the HTTP
// status of the error's code (status_mapping.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model_store/manager.h"
#include "runtime/status.h"
#include "server/admin_access.h"
#include "server/batching/batch_scheduler.h"
#include "server/health.h"
#include "server/open_inference/infer_api.h"
#include "server/open_inference/model_repository.h"
#include "server/open_inference/rest_infer.h"
#include "server/open_inference/rest_paths.h"
#include "server/inference.h"
#include "server/predict_body_reader.h"
#include "server/request_log/request_logger.h"
#include "server/serving_metrics.h"
#include "server/shadow.h"

namespace lockstep {

// A REST path taken apart.
struct RestPath {
  enum class Kind { kStatus, kMetadata, kPredict, kClassify, kRegress };
  Kind kind = Kind::kStatus;
  std::string model;
  std::optional<int64_t> version;
  std::optional<std::string> label;
};

// Parses `target` (query string ignored) for `method` ("GET" or "POST"). NotFound for paths
// outside /v1/, InvalidArgument "Malformed request: ..." for the rest, "Missing model name in
// request." for /v1/models alone, and the both-version-and-label message.
StatusOr<RestPath> ParseRestPath(std::string_view method, std::string_view target);
// The same into `out`, reusing its strings (a connection's call parses into one RestPath).
Status ParseRestPath(std::string_view method, std::string_view target, RestPath* out);

// %XX decoding of a path segment ('+' stays '+': this is a path, not a form) into `out`,
// reusing its capacity. False for a malformed escape.
bool UrlDecodeInto(std::string_view s, std::string* out);

// The header whose value keeps a client on one arm of a traffic split.
inline constexpr char kRoutingKeyHeader[] = "X-Routing-Key";

// What the transport hands over: views into its request, valid for the call.
struct RestRequest {
  std::string_view method;
  std::string_view target;
  std::string_view body;
  std::string_view routing_key;  // the X-Routing-Key header's value; empty when absent
  // Past it the request is not run (it waited too long in a batch queue).
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  std::string_view inference_header_length;  // the v2 binary extension's header; empty when absent
  std::string_view authorization;  // the Authorization header (admin calls); empty when absent
  std::string_view peer;           // the client, as gRPC names peers ("ipv4:127.0.0.1:5000")
  std::string_view origin;         // the Origin header a browser sends; empty when absent
};

struct RestResponse {
  int http_status = 200;
  std::string body;            // JSON, or the metrics' text
  std::string_view content_type = "application/json";
  int64_t model_version = -1;  // the version that served a predict/classify/regress; -1 if none
  // A v2 answer with binary outputs after its JSON: the JSON's length; 0: none.
  size_t inference_header_length = 0;
};

class RestApi;
class RestCall;

// A REST call's v2 infer: the REST codec (open_inference/rest_infer.h) on InferApi's path.
class RestInferCall final : public open_inference::InferCall {
 public:
  explicit RestInferCall(RestCall& owner) : owner_(owner) {}

 private:
  friend class RestApi;
  Status ReadRequest(open_inference::InferRequest* request) override;
  Status WriteResponse(std::span<const open_inference::AnsweredOutput> outputs) override;
  void OnAnswered(const Status& status) override;

  RestCall& owner_;
  open_inference::InferBodyReader reader_;  // the connection's, with its buffers
  std::string_view body_;
  std::string_view header_length_;
};

// One request in flight, and its answer: the transport's, which runs one request at a time
// per connection and reuses its call from request to request (and with it the capacity of its
// buffers). A predict that waits for a batch is this call in the batch queue: no thread waits
// with it.
class RestCall : public BatchTask {
 public:
  RestResponse response;
  // In: the client's id, or empty. Out: also a failed request's fresh id, which went into its
  // log line (and should go back to the client).
  std::string request_id;

 protected:
  RestCall() = default;
  ~RestCall() = default;

 private:
  friend class RestApi;
  friend class RestInferCall;
  // The answer is in `response` and `request_id`. Called once per RestApi::Start: on the
  // thread that called Start, before Start returns, or later on a batch thread; either way
  // the call and its request's views are free again once it is called.
  virtual void OnAnswered() = 0;
  void OnBatchDone(Status status) final;

  const RestApi* api_ = nullptr;
  std::string_view method_;
  std::string_view target_;
  std::chrono::steady_clock::time_point start_;
  bool probe_ = false;  // a /v2/ health probe
  RequestRecord record_;
  RestPath path_;
  open_inference::RestPath v2_path_;
  RestInferCall infer_{*this};
  bool row_format_ = true;
  PredictBodyReader body_reader_;  // the connection's, with its buffers
  std::chrono::steady_clock::time_point deadline_;
  const Signature* signature_ = nullptr;  // a predict's
  std::vector<NamedTensor> inputs_;
  std::vector<NamedTensor> outputs_;
  // A classify's or regress's examples, its run and its result.
  tensorflow::serving::Input examples_;
  ExamplesRun examples_run_;
  tensorflow::serving::ClassificationResult classification_;
  tensorflow::serving::RegressionResult regression_;
};

class RestApi {
 public:
  // Inference requests are recorded in `metrics`, which GET /metrics serves, and so does GET
  // `monitoring_path` when it is not empty (TF Serving's --monitoring_config_file path).
  // `health` answers the v2 health paths; `shadow` gets the predicts a shadow should see. With
  // `batching` (null: off), inference runs in batches.
  RestApi(const ModelManager& manager, ServingMetrics& metrics, const ServerHealth& health, ShadowRunner& shadow,
          BatchScheduler* batching, std::string monitoring_path = "")
      : manager_(manager),
        metrics_(metrics),
        health_(health),
        shadow_(shadow),
        batching_(batching),
        infer_(manager, metrics, health, shadow, batching),
        monitoring_path_(std::move(monitoring_path)) {}
  // Before the transport starts calling Start.
  void set_monitoring_path(std::string path) { monitoring_path_ = std::move(path); }
  // Answered predicts, classifies, regresses and v2 infers are offered to `logger`
  // (logging_config). Before the transport starts calling Start.
  void set_request_logger(RequestLogger* logger) {
    logger_ = logger;
    infer_.set_request_logger(logger);
  }
  // The v2 model_repository extension's loads and unloads: admin calls, allowed as `admin` says
  // (as gRPC's HandleReloadConfigRequest). Without a repository, /v2/repository/... is 404.
  void set_repository(open_inference::RepositoryControl repository, AdminAccess admin) {
    repository_ = std::move(repository);
    admin_ = std::move(admin);
  }

  // Serves `request` into `call`, whose OnAnswered says when the answer is there (see RestCall).
  // `request`'s views must stay valid until then. Thread-safe.
  void Start(const RestRequest& request, RestCall* call) const;

 private:
  friend class RestCall;
  friend class RestInferCall;
  // Serves the request; with `*pending` set, the answer comes through the call's batch task.
  Status Dispatch(const RestRequest& request, RestCall* call, bool* pending) const;
  // A predict body: resolves the servable and its signature (into the call's record) and
  // decodes the inputs into the call, with the same errors in the same order as the DOM path.
  StatusOr<const Signature*> ReadPredictBody(std::string_view body, const ServableRequest& request,
                                             RestCall* call) const;
  // A predict's graph ran (or failed): its answer.
  void FinishPredict(RestCall* call, Status status) const;
  // Starts a classify's or regress's graph, or answers it with `status` when that failed or
  // the graph has run (ExamplesRun).
  void ContinueExamples(RestCall* call, Status status) const;
  // Records the request, turns a failure into its error body, and answers the call.
  void Answer(RestCall* call, const Status& status) const;
  // GET /v2/health/{live,ready} and /v2/models/{m}[/versions/{v}]/ready.
  Status Health(std::string_view path, RestResponse* response) const;
  // The Open Inference Protocol's paths; as Dispatch.
  Status DispatchV2(const RestRequest& request, RestCall* call, bool* pending) const;

  const ModelManager& manager_;
  ServingMetrics& metrics_;
  const ServerHealth& health_;
  ShadowRunner& shadow_;
  RequestLogger* logger_ = nullptr;
  BatchScheduler* const batching_;
  open_inference::InferApi infer_;
  std::string monitoring_path_;
  open_inference::RepositoryControl repository_;
  AdminAccess admin_;
};

}  // namespace lockstep
