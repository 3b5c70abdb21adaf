// What model-server measures, as Prometheus metrics (metrics.h), served at /metrics and at the
// --monitoring_config_file path:
//
//   lockstep_requests_total{model,version,signature,protocol,api,status}   counter
//   lockstep_request_seconds{model,version,protocol,api}                   histogram: whole requests
//   lockstep_request_queue_seconds{model,version,protocol,api}             histogram: waits to run
//   lockstep_request_compute_seconds{model,version,protocol,api}           histogram: graph runs
//   lockstep_model_version_state{model,version,state}                      gauge: 1, the state now
//   lockstep_model_version_load_seconds{model,version}                     gauge: the last load
//   lockstep_model_stale_temporaries{model}                                gauge: dead writers'
//                                                                          temporaries in the base path
//   lockstep_traffic_split_requests_total{model,arm}                       counter
//   lockstep_shadow_requests_total{model,version,result}                   counter: agree, disagree,
//                                                                          error or dropped
//   lockstep_shadow_seconds{model,version}                                 histogram: candidate runs
//   lockstep_batch_size{model,version,signature}                           histogram: rows each batch
//                                                                          ran, padding included
//   lockstep_batch_padding_rows_total{model,version,signature}             counter: rows of padding
//   lockstep_batch_queue_requests{model,version,signature}                 gauge: requests waiting
//                                                                          for a batch
//   lockstep_request_log_records_total{model,result}                       counter: logged requests'
//                                                                          records written, dropped
//                                                                          or failed (request_log/)
//   lockstep_request_log_truncated_total{model}                            counter: records cut to
//                                                                          --request_log_max_record_bytes
//   lockstep_build_info{version}                                           gauge: 1
//   process_resident_memory_bytes, process_virtual_memory_bytes,
//   process_cpu_seconds_total, process_open_fds, process_start_time_seconds (Prometheus' standard)
//
// and TensorFlow Serving's own, for dashboards made for it:
//   :tensorflow:serving:request_count{model_name,status}                         counter
//   :tensorflow:serving:request_latency{model_name,API,entrypoint}               histogram, microseconds
//   :tensorflow:serving:runtime_latency{model_name,API,runtime}                  histogram, microseconds
//
// A request's model, version and signature are labels only once they resolved: a request for
// a model the server does not serve is counted with an empty model, so a client cannot make
// series at will.
//
// Series of versions that are gone go too, so that a server rolling versions for weeks does not
// grow its exposition: a version is gone once the manager has it neither waiting to load,
// loading, available nor unloading (and a model once it left the config, for TensorFlow
// Serving's per-model series). A gone version's series stay, with their last counts, for the
// grace period (--metrics_gone_version_grace_seconds: longer than the scrape interval, so every
// scraper sees them) and are dropped at the first scrape after it. A version that comes back
// starts its counters again, which Prometheus reads as a counter reset. Scrapes do the sweep:
// a server nobody scrapes keeps them.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "model_store/manager.h"
#include "runtime/status.h"
#include "server/batching/batch_scheduler.h"
#include "server/metrics.h"

namespace lockstep {

// One inference request, filled in by its handler as it goes.
struct RequestRecord {
  std::string_view protocol;   // "rest" or "grpc" (TF Serving's API), "rest_v2" or "grpc_v2" (v2's)
  std::string_view api;        // "predict", "classify", "regress", "multi_inference", "infer"; empty: not inference
  ServableHandle servable;     // null until it resolved; holds the model and the signature alive
  std::string_view signature;  // empty until the signature was found
  double queue_seconds = 0;    // waiting in a batch queue before its graph ran
  double compute_seconds = 0;  // running its graph (alone, or the batch it joined)
};

// What the metrics hold about one version of a model, whatever the API: the v2 protocol's
// statistics extension reads it.
struct VersionStatistics {
  int64_t version = 0;
  uint64_t success_count = 0;  // requests answered
  double success_seconds = 0;  // their whole times, summed
  uint64_t fail_count = 0;     // requests that resolved to this version and failed
  double queue_seconds = 0;    // the answered requests' waits in batch queues, summed
  double compute_seconds = 0;  // the answered requests' graph runs, summed
  uint64_t batches = 0;        // batches run (dynamic batching); 0 without batching
};

class ServingMetrics {
 public:
  static constexpr std::chrono::seconds kDefaultGoneSeriesGrace{300};
  explicit ServingMetrics(const ModelManager& manager,
                          std::chrono::steady_clock::duration gone_series_grace = kDefaultGoneSeriesGrace);

  // Thread-safe; allocates nothing once the request's label values have been seen.
  void Record(const RequestRecord& request, StatusCode code, double total_seconds);
  // A shadow run on `candidate` (shadow.h): `result` is agree, disagree, error or dropped.
  void RecordShadow(const LoadedVersion& candidate, std::string_view result, double seconds);
  // `records` PredictionLog records of `model` the request logger wrote, dropped or failed
  // (`result`), and one it truncated.
  void RecordRequestLog(std::string_view model, std::string_view result, int64_t records);
  void RecordRequestLogTruncated(std::string_view model);
  // A batch that ran (BatchScheduler's observer).
  void RecordBatch(const BatchRun& batch);
  // Serves `batching`'s queue depths from now on; it must outlive this. Before any scrape.
  void AddBatchQueues(const BatchScheduler& batching);

  // Every version of `model` the metrics hold (a gone one until its series are dropped),
  // ascending.
  std::vector<VersionStatistics> Statistics(std::string_view model) const;

  // The exposition, with the values read at scrape time (versions, memory) fresh, after the
  // series of versions gone since the scrape before are dropped.
  std::string Render();

 private:
  // Drops the series of versions (and models) gone for longer than the grace; remembers since
  // when the others are gone.
  void DropGoneSeries();

  const ModelManager& manager_;
  const std::chrono::steady_clock::duration gone_series_grace_;
  std::mutex sweep_mu_;
  // Since when each gone {model, version label}, and each gone model, has been seen gone.
  std::map<std::pair<std::string, std::string>, std::chrono::steady_clock::time_point> gone_versions_;
  std::map<std::string, std::chrono::steady_clock::time_point> gone_models_;
  metrics::Registry registry_;
  metrics::Family<metrics::Counter>& requests_;
  metrics::Family<metrics::Histogram>& total_;
  metrics::Family<metrics::Histogram>& queue_;
  metrics::Family<metrics::Histogram>& compute_;
  metrics::Family<metrics::Counter>& tf_request_count_;
  metrics::Family<metrics::Histogram>& tf_request_latency_;
  metrics::Family<metrics::Histogram>& tf_runtime_latency_;
  metrics::Family<metrics::Counter>& shadow_requests_;
  metrics::Family<metrics::Histogram>& shadow_seconds_;
  metrics::Family<metrics::Histogram>& batch_size_;
  metrics::Family<metrics::Counter>& batch_padding_;
  metrics::Family<metrics::Counter>& request_log_records_;
  metrics::Family<metrics::Counter>& request_log_truncated_;
};

}  // namespace lockstep
