// TensorFlow Serving's request logging (ModelConfig.logging_config): a sampled share of a
// model's answered requests, each with its answer, written as PredictionLog records by the file
// collector (log_file.h).
//
// What is logged, per API (prediction_logs.h builds the records):
//   Predict (REST and gRPC)        predict_log: the request (model spec, inputs, output_filter)
//                                  and the response (outputs, the model spec that served)
//   Classify, Regress              classify_log, regress_log: the request (its examples) and
//                                  the response
//   MultiInference (gRPC)          multi_inference_log
//   Open Inference Protocol infer  predict_log, mapped: the model and version (a label or a
//   (REST and gRPC)                routed request as the version that answered), the inputs
//                                  by name as TensorProtos (BYTES as DT_STRING), the outputs
//                                  answered (all, or those asked for); parameters are not kept
// Every record's log_metadata holds the model spec that served (name, version, signature),
// the model's sampling_config, and the request id (Lockstep's field 1001): the client's, or one
// the server made. Only answered requests are logged; failed ones are in the server's log.
//
// Logging never slows or fails a request. The request's thread draws (Draw: a lock, a lookup
// and a random number; nothing allocated when the model does not log), builds the record and
// queues it; one writer thread serializes and writes. The queue is bounded in records and bytes:
// when it is full the record is dropped and counted. A record larger than max_record_bytes is
// truncated by one rule (prediction_logs.h's TruncatePredictionLog): the values of its tensors
// and its examples go, their dtypes and shapes stay, and log_metadata.truncated says so.
// Stop writes everything queued and closes the files: the server calls it once requests have
// drained.
//
// Metrics (serving_metrics.h): lockstep_request_log_records_total{model,result} with result
// written, dropped (queue full) or failed (the write failed: directory gone, disk full), and
// lockstep_request_log_truncated_total{model}.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>

#include "runtime/status.h"
#include "server/request_log/log_file.h"
#include "server/serving_metrics.h"
#include "tensorflow_serving/apis/prediction_log.pb.h"
#include "tensorflow_serving/config/model_server_config.pb.h"

namespace lockstep {

// The server's flags for the file collector.
struct RequestLogOptions {
  LogFileLimits file;
  size_t max_queue_records = 4096;
  size_t max_queue_bytes = size_t{256} << 20;
  size_t max_record_bytes = size_t{4} << 20;
};

// One model's logging_config, checked.
struct ModelLogging {
  std::string filename_prefix;
  double sampling_rate = 0;
  int32_t sampling_attributes = 0;
  bool operator==(const ModelLogging&) const = default;
};
using ModelLoggingMap = std::map<std::string, ModelLogging, std::less<>>;

// The models of a config that log (a sampling_rate above 0). InvalidArgument naming the model
// and the field: a rate outside [0, 1], a collector type other than "file", no filename_prefix.
StatusOr<ModelLoggingMap> ModelLoggingFromConfig(const tensorflow::serving::ModelServerConfig& proto);

class RequestLogger {
 public:
  // Where a drawn request's record goes: the model's settings and file. Empty: not logged.
  struct Sink;
  using Ticket = std::shared_ptr<Sink>;

  RequestLogger(ServingMetrics& metrics, RequestLogOptions options);
  ~RequestLogger();  // Stop()
  RequestLogger(const RequestLogger&) = delete;
  RequestLogger& operator=(const RequestLogger&) = delete;

  // The models that log from now on; a model's file stays open across configs that keep its
  // prefix. Files no model names any more close once their queued records are written.
  void SetModels(const ModelLoggingMap& models);

  // Whether this answered request of `model` is logged (drawn at its sampling rate).
  Ticket Draw(std::string_view model) const;

  // Completes `log`'s metadata (the builders of prediction_logs.h fill its model spec) with the
  // sampling config and `request_id`, truncates it past max_record_bytes, and queues it; drops
  // it (counted) when the queue is full or the logger has stopped.
  void Submit(const Ticket& ticket, tensorflow::serving::PredictionLog log, std::string_view request_id);

  // Writes what is queued, closes the files; later records are dropped. Idempotent.
  void Stop();

  // Draws for `model` and, when drawn, builds the record with `build(PredictionLog*)` (a
  // prediction_logs.h builder; a Status it returns that is not OK drops the record) and submits
  // it. Never throws: a record that cannot be built is dropped, the request unharmed.
  template <typename Build>
  void MaybeLog(std::string_view model, std::string_view request_id, Build&& build);

 private:
  struct Entry {
    Ticket sink;
    tensorflow::serving::PredictionLog log;
    size_t bytes;
  };
  void Loop();
  // Serializes and buffers the record; false when it is lost. `*lost`: records buffered before
  // it that the file's rotation lost.
  bool Write(Entry& entry, std::string* scratch, int64_t* lost);

  ServingMetrics& metrics_;
  const RequestLogOptions options_;

  std::atomic<bool> any_{false};  // some model logs: a server that logs nothing takes no lock
  mutable std::mutex models_mu_;
  std::map<std::string, Ticket, std::less<>> models_;
  std::map<std::string, std::shared_ptr<RotatingLogFile>> files_;  // by prefix, shared across configs

  std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::deque<Entry> queue_;
  size_t queued_bytes_ = 0;
  bool stopping_ = false;
  bool writer_asleep_ = false;  // waiting for a record, not for its period
  std::thread writer_;
};

struct RequestLogger::Sink {
  std::string model;
  ModelLogging logging;
  std::shared_ptr<RotatingLogFile> file;  // touched by the writer thread only
};

template <typename Build>
void RequestLogger::MaybeLog(std::string_view model, std::string_view request_id, Build&& build) {
  const Ticket ticket = Draw(model);
  if (!ticket) return;
  try {
    tensorflow::serving::PredictionLog log;
    if constexpr (std::is_same_v<decltype(build(&log)), Status>) {
      if (!build(&log).ok()) return metrics_.RecordRequestLog(ticket->model, "failed", 1);
    } else {
      build(&log);
    }
    Submit(ticket, std::move(log), request_id);
  } catch (const std::exception&) {
    metrics_.RecordRequestLog(ticket->model, "failed", 1);
  }
}

}  // namespace lockstep
