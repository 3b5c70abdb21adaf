#include "server/serving_metrics.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "server/flags.h"

namespace lockstep {
namespace {

// From 50 us to about 100 s: a small model answers in tens of microseconds, a large batch in
// seconds.
std::vector<double> LatencyBounds(double scale) {
  return metrics::ExponentialBounds(50e-6 * scale, 2.0, 22);
}

std::string_view VersionLabel(int64_t version, std::array<char, 24>& buffer) {
  if (version < 0) return {};
  const auto [end, ec] = std::to_chars(buffer.data(), buffer.data() + buffer.size(), version);
  return std::string_view(buffer.data(), static_cast<size_t>(end - buffer.data()));
}

// Prometheus' standard process metrics, from /proc.
void CollectProcess(metrics::Exposition& out) {
  const long page = sysconf(_SC_PAGESIZE);
  const long ticks = sysconf(_SC_CLK_TCK);
  std::ifstream statm("/proc/self/statm");
  uint64_t size_pages = 0, resident_pages = 0;
  if (statm >> size_pages >> resident_pages) {
    out.Family("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
    out.Sample("process_resident_memory_bytes", {}, {}, static_cast<double>(resident_pages * page));
    out.Family("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.");
    out.Sample("process_virtual_memory_bytes", {}, {}, static_cast<double>(size_pages * page));
  }
  // /proc/self/stat: the command may hold spaces, so fields are counted after its ')'.
  std::ifstream stat_file("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
  if (const size_t close = stat.rfind(')'); close != std::string::npos) {
    std::istringstream fields(stat.substr(close + 2));
    std::vector<std::string> f;
    for (std::string field; fields >> field;) f.push_back(field);
    // Fields 14, 15 (utime, stime) and 22 (starttime) of proc(5), counted from field 3 here.
    if (f.size() > 19) {
      const double cpu = (std::stod(f[11]) + std::stod(f[12])) / static_cast<double>(ticks);
      out.Family("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.");
      out.Sample("process_cpu_seconds_total", {}, {}, cpu);
      std::ifstream proc_stat("/proc/stat");
      for (std::string line; std::getline(proc_stat, line);) {
        if (line.rfind("btime ", 0) != 0) continue;
        const double boot = std::stod(line.substr(6));
        out.Family("process_start_time_seconds", "gauge",
                   "Start time of the process since unix epoch in seconds.");
        out.Sample("process_start_time_seconds", {}, {},
                   boot + std::stod(f[19]) / static_cast<double>(ticks));
        break;
      }
    }
  }
  std::error_code ec;
  double fds = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end; it.increment(ec))
    ++fds;
  out.Family("process_open_fds", "gauge", "Number of open file descriptors.");
  out.Sample("process_open_fds", {}, {}, fds);
}

void CollectModels(const ModelManager& manager, metrics::Exposition& out) {
  static constexpr std::array<std::string_view, 3> kStateLabels = {"model", "version", "state"};
  static constexpr std::array<std::string_view, 2> kVersionLabels = {"model", "version"};
  static constexpr std::array<std::string_view, 2> kArmLabels = {"model", "arm"};
  struct Row {
    std::string model;
    VersionStatusInfo info;
  };
  std::vector<Row> rows;
  // Held: `for (... : manager.Snapshot()->models)` would free it before the loop body runs,
  // and a version loading meanwhile replaces it.
  const std::shared_ptr<const ServingSnapshot> snapshot = manager.Snapshot();
  for (const auto& [model, unused] : snapshot->models) {
    StatusOr<std::vector<VersionStatusInfo>> versions = manager.GetModelStatus(model);
    if (!versions.ok()) continue;
    for (VersionStatusInfo& v : *versions) rows.push_back({model, std::move(v)});
  }
  std::array<char, 24> buffer;
  out.Family("lockstep_model_version_state", "gauge",
             "1 for each model version's current state (START, LOADING, AVAILABLE, UNLOADING, END).");
  for (const Row& r : rows) {
    const std::array<std::string_view, 3> values = {r.model, VersionLabel(r.info.version, buffer),
                                                    VersionStateName(r.info.state)};
    out.Sample("lockstep_model_version_state", kStateLabels, values, 1);
  }
  out.Family("lockstep_model_version_load_seconds", "gauge",
             "How long each model version's last load, warm-up included, took.");
  for (const Row& r : rows) {
    if (r.info.load_seconds <= 0) continue;
    const std::array<std::string_view, 2> values = {r.model, VersionLabel(r.info.version, buffer)};
    out.Sample("lockstep_model_version_load_seconds", kVersionLabels, values, r.info.load_seconds);
  }
  static constexpr std::array<std::string_view, 1> kModelLabel = {"model"};
  out.Family("lockstep_model_stale_temporaries", "gauge",
             "Temporary directories in the model's base path that a bundle writer left when it died "
             "(unlocked, unchanged for a minute): model-train and model-cli remove them; the server never does.");
  for (const auto& [model, count] : manager.StaleTemporaryCounts()) {
    const std::array<std::string_view, 1> values = {model};
    out.Sample("lockstep_model_stale_temporaries", kModelLabel, values, static_cast<double>(count));
  }
  out.Family("lockstep_traffic_split_requests_total", "counter",
             "Requests routed to each arm of a model's traffic split since it joined the config.");
  for (const TrafficArmCount& arm : manager.TrafficCounts()) {
    const std::array<std::string_view, 2> values = {arm.model, arm.arm};
    out.Sample("lockstep_traffic_split_requests_total", kArmLabels, values,
               static_cast<double>(arm.requests));
  }
}

}  // namespace

ServingMetrics::ServingMetrics(const ModelManager& manager, std::chrono::steady_clock::duration gone_series_grace)
    : manager_(manager),
      gone_series_grace_(gone_series_grace),
      requests_(registry_.AddCounter("lockstep_requests_total", "Inference requests, by how they ended.",
                                     {"model", "version", "signature", "protocol", "api", "status"})),
      total_(registry_.AddHistogram("lockstep_request_seconds", "Inference request latency, whole.",
                                    {"model", "version", "protocol", "api"}, LatencyBounds(1))),
      queue_(registry_.AddHistogram(
          "lockstep_request_queue_seconds",
          "Time an inference request waited before its graph ran (the batching queue).",
          {"model", "version", "protocol", "api"}, LatencyBounds(1))),
      compute_(registry_.AddHistogram("lockstep_request_compute_seconds",
                                      "Time an inference request's graph ran.",
                                      {"model", "version", "protocol", "api"}, LatencyBounds(1))),
      tf_request_count_(registry_.AddCounter(":tensorflow:serving:request_count",
                                             "The number of requests (TensorFlow Serving's metric).",
                                             {"model_name", "status"})),
      tf_request_latency_(
          registry_.AddHistogram(":tensorflow:serving:request_latency",
                                 "Request latency in microseconds (TensorFlow Serving's metric).",
                                 {"model_name", "API", "entrypoint"}, LatencyBounds(1e6))),
      tf_runtime_latency_(
          registry_.AddHistogram(":tensorflow:serving:runtime_latency",
                                 "Runtime latency in microseconds (TensorFlow Serving's metric).",
                                 {"model_name", "API", "runtime"}, LatencyBounds(1e6))),
      shadow_requests_(registry_.AddCounter("lockstep_shadow_requests_total",
                                            "Shadow copies of requests run on a candidate version, by how its answer "
                                            "compared with the one the client got.",
                                            {"model", "version", "result"})),
      shadow_seconds_(registry_.AddHistogram("lockstep_shadow_seconds", "The candidate's run of a shadow copy.",
                                             {"model", "version"}, LatencyBounds(1))),
      batch_size_(registry_.AddHistogram("lockstep_batch_size",
                                         "Rows each batch ran (dynamic batching), padding included.",
                                         {"model", "version", "signature"}, metrics::ExponentialBounds(1, 2, 17))),
      batch_padding_(registry_.AddCounter("lockstep_batch_padding_rows_total",
                                          "Rows added to batches to reach an allowed batch size.",
                                          {"model", "version", "signature"})),
      request_log_records_(registry_.AddCounter(
          "lockstep_request_log_records_total",
          "Sampled requests' PredictionLog records (logging_config), by what became of them: written, dropped "
          "(the log queue was full) or failed (the write failed).",
          {"model", "result"})),
      request_log_truncated_(registry_.AddCounter(
          "lockstep_request_log_truncated_total",
          "PredictionLog records larger than --request_log_max_record_bytes, written without their values.",
          {"model"})) {
  registry_.AddCollector([&manager](metrics::Exposition& out) { CollectModels(manager, out); });
  registry_.AddCollector([](metrics::Exposition& out) {
    static constexpr std::array<std::string_view, 1> kNames = {"version"};
    const std::array<std::string_view, 1> values = {ServerVersion()};
    out.Family("lockstep_build_info", "gauge", "1, labelled with model-server's version.");
    out.Sample("lockstep_build_info", kNames, values, 1);
  });
  registry_.AddCollector(CollectProcess);
}

void ServingMetrics::Record(const RequestRecord& r, StatusCode code, double total_seconds) {
  std::array<char, 24> buffer;
  const std::string_view model = r.servable ? std::string_view(r.servable->model()) : std::string_view();
  const std::string_view version = VersionLabel(r.servable ? r.servable->version() : -1, buffer);
  const std::string_view status = StatusCodeName(code);
  requests_.With({model, version, r.signature, r.protocol, r.api, status})->Add();
  tf_request_count_.With({model, status})->Add();
  tf_request_latency_.With({model, r.api, r.protocol.starts_with("rest") ? "REST" : "GRPC"})
      ->Observe(total_seconds * 1e6);
  if (code != StatusCode::kOk) return;  // latencies of answers only: a refusal is not a latency
  const std::initializer_list<std::string_view> labels = {model, version, r.protocol, r.api};
  total_.With(labels)->Observe(total_seconds);
  queue_.With(labels)->Observe(r.queue_seconds);
  compute_.With(labels)->Observe(r.compute_seconds);
  tf_runtime_latency_.With({model, r.api, "Lockstep"})->Observe(r.compute_seconds * 1e6);
}

std::vector<VersionStatistics> ServingMetrics::Statistics(std::string_view model) const {
  std::map<int64_t, VersionStatistics> versions;
  // Children whose labels start with {model, version}; those without a version (requests that
  // never resolved) belong to no version.
  auto of = [&](std::span<const std::string> labels) -> VersionStatistics* {
    if (labels.size() < 2 || labels[0] != model || labels[1].empty()) return nullptr;
    int64_t version = 0;
    const auto [end, ec] = std::from_chars(labels[1].data(), labels[1].data() + labels[1].size(), version);
    if (ec != std::errc()) return nullptr;
    VersionStatistics& v = versions[version];
    v.version = version;
    return &v;
  };
  requests_.ForEach([&](std::span<const std::string> labels, const metrics::Counter& counter) {
    // {model, version, signature, protocol, api, status}
    if (VersionStatistics* v = of(labels); v != nullptr && labels[5] != StatusCodeName(StatusCode::kOk)) {
      v->fail_count += counter.value();
    }
  });
  total_.ForEach([&](std::span<const std::string> labels, const metrics::Histogram& h) {
    if (VersionStatistics* v = of(labels)) {
      v->success_count += h.count();
      v->success_seconds += h.sum();
    }
  });
  queue_.ForEach([&](std::span<const std::string> labels, const metrics::Histogram& h) {
    if (VersionStatistics* v = of(labels)) v->queue_seconds += h.sum();
  });
  compute_.ForEach([&](std::span<const std::string> labels, const metrics::Histogram& h) {
    if (VersionStatistics* v = of(labels)) v->compute_seconds += h.sum();
  });
  batch_size_.ForEach([&](std::span<const std::string> labels, const metrics::Histogram& h) {
    if (VersionStatistics* v = of(labels)) v->batches += h.count();
  });
  std::vector<VersionStatistics> out;
  for (auto& [version, stats] : versions) out.push_back(stats);
  return out;
}

std::string ServingMetrics::Render() {
  DropGoneSeries();
  return registry_.Render();
}

void ServingMetrics::DropGoneSeries() {
  std::lock_guard<std::mutex> lock(sweep_mu_);
  // The versions and models the series name; the empty model (requests that never resolved)
  // is no model's.
  std::set<std::pair<std::string, std::string>> versions;
  std::set<std::string> models;
  const auto by_version = [&](std::span<const std::string> labels, const auto&) {
    if (!labels[0].empty() && !labels[1].empty()) versions.emplace(labels[0], labels[1]);
  };
  const auto by_model = [&](std::span<const std::string> labels, const auto&) {
    if (!labels[0].empty()) models.insert(labels[0]);
  };
  requests_.ForEach(by_version);
  total_.ForEach(by_version);
  queue_.ForEach(by_version);
  compute_.ForEach(by_version);
  shadow_requests_.ForEach(by_version);
  shadow_seconds_.ForEach(by_version);
  batch_size_.ForEach(by_version);
  batch_padding_.ForEach(by_version);
  tf_request_count_.ForEach(by_model);
  tf_request_latency_.ForEach(by_model);
  tf_runtime_latency_.ForEach(by_model);
  request_log_records_.ForEach(by_model);
  request_log_truncated_.ForEach(by_model);

  // What is live: every model of the config, and their versions waiting to load, loading,
  // available or unloading.
  const std::shared_ptr<const ServingSnapshot> snapshot = manager_.Snapshot();
  std::map<std::string, std::set<std::string>, std::less<>> live;  // model -> version labels
  for (const auto& [model, unused] : versions) models.insert(model);
  for (const std::string& model : models) {
    if (snapshot->models.count(model) == 0) continue;
    std::set<std::string>& labels = live[model];
    StatusOr<std::vector<VersionStatusInfo>> status = manager_.GetModelStatus(model);
    if (!status.ok()) continue;  // configured, with no version it knows of
    for (const VersionStatusInfo& v : *status) {
      if (v.state == VersionState::kStart || v.state == VersionState::kLoading ||
          v.state == VersionState::kAvailable || v.state == VersionState::kUnloading) {
        labels.insert(std::to_string(v.version));
      }
    }
  }

  // Gone past the grace: their last counts have had the grace to be scraped.
  const auto now = std::chrono::steady_clock::now();
  std::set<std::pair<std::string, std::string>> drop_versions;
  std::set<std::string> drop_models;
  std::map<std::pair<std::string, std::string>, std::chrono::steady_clock::time_point> gone_versions;
  std::map<std::string, std::chrono::steady_clock::time_point> gone_models;
  // `key`, gone now: dropped once gone past the grace (and seen gone before), else remembered
  // with the time it was first seen gone.
  const auto sweep = [&](const auto& key, const auto& seen_before, auto& still_gone, auto& drop) {
    const auto seen = seen_before.find(key);
    if (seen != seen_before.end() && now - seen->second >= gone_series_grace_) {
      drop.insert(key);
    } else {
      still_gone.emplace(key, seen == seen_before.end() ? now : seen->second);
    }
  };
  for (const auto& key : versions) {
    const auto it = live.find(key.first);
    if (it == live.end() || it->second.count(key.second) == 0) sweep(key, gone_versions_, gone_versions, drop_versions);
  }
  for (const std::string& model : models) {
    if (live.count(model) == 0) sweep(model, gone_models_, gone_models, drop_models);
  }
  size_t dropped = 0;
  if (!drop_versions.empty()) {
    const auto of_version = [&](std::span<const std::string> labels) {
      return drop_versions.count({labels[0], labels[1]}) > 0;
    };
    dropped += requests_.EraseIf(of_version) + total_.EraseIf(of_version) + queue_.EraseIf(of_version) +
               compute_.EraseIf(of_version) + shadow_requests_.EraseIf(of_version) +
               shadow_seconds_.EraseIf(of_version) + batch_size_.EraseIf(of_version) +
               batch_padding_.EraseIf(of_version);
  }
  if (!drop_models.empty()) {
    const auto of_model = [&](std::span<const std::string> labels) { return drop_models.count(labels[0]) > 0; };
    dropped += tf_request_count_.EraseIf(of_model) + tf_request_latency_.EraseIf(of_model) +
               tf_runtime_latency_.EraseIf(of_model) + request_log_records_.EraseIf(of_model) +
               request_log_truncated_.EraseIf(of_model);
  }
  if (dropped > 0) {
    spdlog::info("event=metric_series_dropped versions={} models={} series={}", drop_versions.size(),
                 drop_models.size(), dropped);
  }
  gone_versions_ = std::move(gone_versions);
  gone_models_ = std::move(gone_models);
}

void ServingMetrics::RecordBatch(const BatchRun& batch) {
  std::array<char, 24> buffer;
  const std::initializer_list<std::string_view> labels = {
      std::string_view(batch.servable->model()), VersionLabel(batch.servable->version(), buffer), batch.signature};
  batch_size_.With(labels)->Observe(static_cast<double>(batch.padded_rows));
  if (batch.padded_rows > batch.rows) batch_padding_.With(labels)->Add(static_cast<uint64_t>(batch.padded_rows - batch.rows));
}

void ServingMetrics::AddBatchQueues(const BatchScheduler& batching) {
  registry_.AddCollector([&batching](metrics::Exposition& out) {
    static constexpr std::array<std::string_view, 3> kNames = {"model", "version", "signature"};
    out.Family("lockstep_batch_queue_requests", "gauge", "Requests waiting in each batch queue for a batch.");
    std::array<char, 24> buffer;
    for (const BatchQueueDepth& queue : batching.QueueDepths()) {
      const std::array<std::string_view, 3> values = {queue.model, VersionLabel(queue.version, buffer),
                                                      queue.signature};
      out.Sample("lockstep_batch_queue_requests", kNames, values, static_cast<double>(queue.requests));
    }
  });
}

void ServingMetrics::RecordShadow(const LoadedVersion& candidate, std::string_view result, double seconds) {
  std::array<char, 24> buffer;
  const std::string_view version = VersionLabel(candidate.version(), buffer);
  shadow_requests_.With({std::string_view(candidate.model()), version, result})->Add();
  if (result != "dropped") shadow_seconds_.With({std::string_view(candidate.model()), version})->Observe(seconds);
}

void ServingMetrics::RecordRequestLog(std::string_view model, std::string_view result, int64_t records) {
  request_log_records_.With({model, result})->Add(static_cast<uint64_t>(records));
}

void ServingMetrics::RecordRequestLogTruncated(std::string_view model) { request_log_truncated_.With({model})->Add(); }

}  // namespace lockstep
