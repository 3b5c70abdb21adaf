#include "server/request_log/request_logger.h"

#include <spdlog/spdlog.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <set>

#include "server/request_id.h"
#include "server/request_log/prediction_logs.h"

namespace lockstep {

namespace tfs = tensorflow::serving;

namespace {

// How often the writer, while a file is open, writes what is queued and looks at the files' ages.
constexpr auto kWritePeriod = std::chrono::milliseconds(10);
// Buffered records are written at the latest when this many bytes are waiting.
constexpr size_t kFlushBytes = size_t{1} << 20;

// A uniform draw in [0, 1) from a per-thread generator (splitmix64): no lock, no allocation.
double UniformDraw() {
  thread_local uint64_t state = std::random_device{}() ^ (uint64_t{std::random_device{}()} << 32);
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

}  // namespace

StatusOr<ModelLoggingMap> ModelLoggingFromConfig(const tfs::ModelServerConfig& proto) {
  ModelLoggingMap models;
  const auto& list = proto.model_config_list().config();
  for (int i = 0; i < list.size(); ++i) {
    const tfs::ModelConfig& m = list[i];
    if (!m.has_logging_config()) continue;
    const std::string where =
        "model_config_list.config[" + std::to_string(i) + "] (model '" + m.name() + "'): logging_config.";
    const tfs::LoggingConfig& config = m.logging_config();
    const double rate = config.sampling_config().sampling_rate();
    if (!(rate >= 0 && rate <= 1)) {
      return InvalidArgument(where + "sampling_config.sampling_rate " + std::to_string(rate) +
                             " is not a probability in [0, 1]");
    }
    const tfs::LogCollectorConfig& collector = config.log_collector_config();
    if (rate == 0) continue;  // logs nothing: its collector is never asked for
    if (collector.type() != "file") {
      return InvalidArgument(where + "log_collector_config.type '" + collector.type() +
                             "' is not a collector of Lockstep's (it has \"file\")");
    }
    if (collector.filename_prefix().empty()) {
      return InvalidArgument(where + "log_collector_config.filename_prefix is empty");
    }
    if (collector.filename_prefix().back() == '/') {
      return InvalidArgument(where + "log_collector_config.filename_prefix '" + collector.filename_prefix() +
                             "' names a directory: end it with a file name prefix (e.g. logs/" + m.name() + ")");
    }
    models[m.name()] = {collector.filename_prefix(), rate, config.sampling_config().attributes()};
  }
  return models;
}

RequestLogger::RequestLogger(ServingMetrics& metrics, RequestLogOptions options)
    : metrics_(metrics), options_(options), writer_([this] { Loop(); }) {}

RequestLogger::~RequestLogger() { Stop(); }

void RequestLogger::SetModels(const ModelLoggingMap& models) {
  std::map<std::string, Ticket, std::less<>> next;
  std::map<std::string, std::shared_ptr<RotatingLogFile>> files;
  std::lock_guard<std::mutex> lock(models_mu_);
  for (const auto& [name, logging] : models) {
    std::shared_ptr<RotatingLogFile>& file = files[logging.filename_prefix];
    if (!file) {
      const auto old = files_.find(logging.filename_prefix);
      file = old != files_.end() ? old->second
                                 : std::make_shared<RotatingLogFile>(logging.filename_prefix, options_.file);
    }
    const auto kept = models_.find(name);
    if (kept != models_.end() && kept->second->logging == logging) {
      next[name] = kept->second;
    } else {
      next[name] = std::make_shared<Sink>(Sink{name, logging, file});
      spdlog::info("event=request_logging model={} filename_prefix={} sampling_rate={}", name,
                   logging.filename_prefix, logging.sampling_rate);
    }
  }
  for (const auto& [name, sink] : models_) {
    if (!next.contains(name)) spdlog::info("event=request_logging_off model={}", name);
  }
  // A file no model names closes once the last record queued for it is written (the writer
  // then holds the last reference).
  models_ = std::move(next);
  files_ = std::move(files);
  any_.store(!models_.empty());
}

RequestLogger::Ticket RequestLogger::Draw(std::string_view model) const {
  if (!any_.load(std::memory_order_relaxed)) return nullptr;
  std::lock_guard<std::mutex> lock(models_mu_);
  const auto it = models_.find(model);
  if (it == models_.end()) return nullptr;
  const double rate = it->second->logging.sampling_rate;
  if (rate < 1 && UniformDraw() >= rate) return nullptr;
  return it->second;
}

void RequestLogger::Submit(const Ticket& ticket, tfs::PredictionLog log, std::string_view request_id) {
  tfs::LogMetadata* metadata = log.mutable_log_metadata();
  metadata->mutable_sampling_config()->set_sampling_rate(ticket->logging.sampling_rate);
  metadata->mutable_sampling_config()->set_attributes(ticket->logging.sampling_attributes);
  metadata->set_request_id(IsUsableRequestId(request_id) ? std::string(request_id) : NewRequestId());
  size_t bytes = log.ByteSizeLong();
  const bool truncated = bytes > options_.max_record_bytes;
  if (truncated) {
    TruncatePredictionLog(&log);
    bytes = log.ByteSizeLong();
  }
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    const bool room = queue_.size() < options_.max_queue_records && queued_bytes_ + bytes <= options_.max_queue_bytes;
    if (room && !stopping_) {
      queue_.push_back({ticket, std::move(log), bytes});
      queued_bytes_ += bytes;
      if (truncated) metrics_.RecordRequestLogTruncated(ticket->model);
      // Woken only when asleep, or when the queue is half full (it wakes by itself otherwise).
      if (writer_asleep_ || 2 * queue_.size() >= options_.max_queue_records ||
          2 * queued_bytes_ >= options_.max_queue_bytes) {
        queue_cv_.notify_one();
      }
      return;
    }
  }
  metrics_.RecordRequestLog(ticket->model, "dropped", 1);
}

bool RequestLogger::Write(Entry& entry, std::string* scratch, int64_t* lost) {
  *lost = 0;
  scratch->clear();
  if (!entry.log.AppendToString(scratch)) return false;
  return entry.sink->file->Append(*scratch, std::chrono::steady_clock::now(), lost).ok();
}

void RequestLogger::Loop() {
  std::deque<Entry> batch;
  std::string scratch;
  // Per file with records buffered: the records each model has in its buffer, counted written
  // or failed when the buffer is written; and every file open, to close when it is old.
  std::map<std::shared_ptr<RotatingLogFile>, std::map<std::string, int64_t>> pending;
  std::set<std::shared_ptr<RotatingLogFile>> open_files;
  auto count = [&](std::map<std::string, int64_t>& models, bool lost) {
    for (const auto& [model, n] : models) metrics_.RecordRequestLog(model, lost ? "failed" : "written", n);
    models.clear();
  };
  auto flush_all = [&] {
    for (auto& [file, models] : pending) {
      int64_t lost = 0;
      (void)file->Flush(&lost);
      count(models, lost > 0);
    }
    pending.clear();
  };
  for (;;) {
    bool stopping = false;
    {
      std::unique_lock<std::mutex> lock(queue_mu_);
      // With a file open the writer wakes by itself every kWritePeriod (to write what came,
      // and to look at the file's age), so that requests need not wake it: a wake-up per
      // record cost a tenth of a small request. With none open it sleeps until woken.
      if (open_files.empty() && queue_.empty() && !stopping_) {
        writer_asleep_ = true;
        queue_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        writer_asleep_ = false;
      } else if (!stopping_) {
        queue_cv_.wait_for(lock, kWritePeriod, [&] {
          return stopping_ || 2 * queue_.size() >= options_.max_queue_records ||
                 2 * queued_bytes_ >= options_.max_queue_bytes;
        });
      }
      batch.swap(queue_);
      queued_bytes_ = 0;
      stopping = stopping_;
    }
    size_t buffered = 0;
    for (Entry& entry : batch) {
      const std::shared_ptr<RotatingLogFile>& file = entry.sink->file;
      const int64_t before = file->buffered_records();
      int64_t lost = 0;
      bool appended = false;
      try {
        appended = Write(entry, &scratch, &lost);
      } catch (const std::exception& e) {  // out of memory for a large record: that record fails
        spdlog::warn("event=request_log_failed model={} error=\"{}\"", entry.sink->model, e.what());
      }
      if (file->buffered_records() < before + (appended ? 1 : 0)) {
        // The file rotated: its buffer went out with the old file (all of it lost, or none).
        auto it = pending.find(file);
        if (it != pending.end()) count(it->second, lost > 0);
      }
      if (!appended) {
        metrics_.RecordRequestLog(entry.sink->model, "failed", 1);
        continue;
      }
      ++pending[file][entry.sink->model];
      open_files.insert(file);
      buffered += scratch.size();
      if (buffered >= kFlushBytes) {
        flush_all();
        buffered = 0;
      }
    }
    batch.clear();
    flush_all();
    // Old files close so that readers see them; a file no model names any more closes for good.
    const auto now = std::chrono::steady_clock::now();
    for (auto it = open_files.begin(); it != open_files.end();) {
      int64_t lost = 0;
      if (stopping || it->use_count() == 1) {
        (void)(*it)->Close(&lost);
      } else {
        (void)(*it)->CloseIfOld(now, &lost);
      }
      it = (*it)->open_path().empty() ? open_files.erase(it) : std::next(it);
    }
    if (stopping) {
      std::lock_guard<std::mutex> lock(queue_mu_);
      if (queue_.empty()) return;
    }
  }
}

void RequestLogger::Stop() {
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    stopping_ = true;
  }
  queue_cv_.notify_all();
  if (writer_.joinable()) writer_.join();
  std::lock_guard<std::mutex> lock(models_mu_);
  any_.store(false);
  models_.clear();
  files_.clear();
}

}  // namespace lockstep
