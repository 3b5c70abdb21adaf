#include "server/shadow.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>

namespace lockstep {
namespace {

bool Close(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::fabs(a - b) <= 1e-5 * std::max(1.0, std::fabs(a));
}

bool SameTensor(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || !(a.shape() == b.shape())) return false;
  switch (a.dtype()) {
    case DType::kFloat32: {
      const auto x = a.data<float>(), y = b.data<float>();
      for (size_t i = 0; i < x.size(); ++i) {
        if (!Close(x[i], y[i])) return false;
      }
      return true;
    }
    case DType::kFloat64: {
      const auto x = a.data<double>(), y = b.data<double>();
      for (size_t i = 0; i < x.size(); ++i) {
        if (!Close(x[i], y[i])) return false;
      }
      return true;
    }
    default:
      return a.BitwiseEqual(b);
  }
}

// Copies, never shares, the request's tensors. They belong to its connection, which writes the
// next request into them in place once it sees no one else holding them (Tensor::Writable):
// a share held here and let go on a shadow thread would leave that write unordered after the
// shadow's reads (found by ThreadSanitizer in tests/e2e/reload_stress_test.cc).
std::vector<NamedTensor> Copies(std::span<const NamedTensor> tensors) {
  std::vector<NamedTensor> out;
  out.reserve(tensors.size());
  for (const NamedTensor& t : tensors) out.push_back({t.name, t.tensor.Clone()});
  return out;
}

}  // namespace

bool ShadowAgrees(std::span<const NamedTensor> primary, std::span<const NamedTensor> candidate) {
  for (const NamedTensor& p : primary) {
    bool found = false;
    for (const NamedTensor& c : candidate) {
      if (c.name != p.name) continue;
      found = true;
      if (!SameTensor(p.tensor, c.tensor)) return false;
    }
    if (!found) return false;
  }
  return true;
}

ShadowRunner::ShadowRunner(ServingMetrics& metrics, int threads, size_t max_queue)
    : metrics_(metrics), max_queue_(max_queue) {
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
}

ShadowRunner::~ShadowRunner() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    queue_.clear();
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void ShadowRunner::MaybeShadow(const ModelManager& manager, const LoadedVersion& served,
                               const Signature& signature, std::span<const NamedTensor> inputs,
                               std::span<const NamedTensor> primary) {
  ServableHandle candidate = manager.ShadowFor(served.model(), served.version());
  if (candidate == nullptr) return;
  const auto has_room = [this] { return !stopping_ && queue_.size() < max_queue_; };
  // A copy that would be dropped is not made: a candidate that cannot keep up costs the
  // primary nothing. (Checked again below: the copy is made outside the lock.)
  bool room = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    room = has_room();
  }
  if (!room) {
    metrics_.RecordShadow(*candidate, "dropped", 0);
    return;
  }
  Task task{std::move(candidate), signature.name, Copies(inputs), Copies(primary)};
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (has_room()) {
      queue_.push_back(std::move(task));
      cv_.notify_one();
      return;
    }
  }
  metrics_.RecordShadow(*task.candidate, "dropped", 0);
}

void ShadowRunner::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    Task task = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    Run(task);
    task = Task{};  // released outside the lock
    lock.lock();
  }
}

void ShadowRunner::Run(Task& task) {
  const auto start = std::chrono::steady_clock::now();
  const Session& session = task.candidate->session();
  std::vector<NamedTensor> outputs;
  Status status;
  if (const Signature* signature = session.FindSignature(task.signature); signature == nullptr) {
    status = NotFound("the candidate has no signature '" + task.signature + "'");
  } else {
    status = session.Run(task.signature, task.inputs, &outputs);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!status.ok()) {
    spdlog::debug("event=shadow_error model={} version={} error=\"{}\"", task.candidate->model(),
                  task.candidate->version(), status.message());
    metrics_.RecordShadow(*task.candidate, "error", seconds);
    return;
  }
  metrics_.RecordShadow(*task.candidate, ShadowAgrees(task.primary, outputs) ? "agree" : "disagree", seconds);
}

}  // namespace lockstep
