#include "runtime/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>

namespace lockstep {

// One ParallelFor call, living on the caller's stack. Threads claim chunks by bumping `next`.
// `active` counts workers inside RunChunks; the caller returns only once every chunk is done
// and no worker still holds the job. Both counters change under the pool's mutex where a
// waiter could otherwise miss a wake-up.
struct ThreadPool::Job {
  const RangeFn* fn;
  int64_t n;
  int64_t chunk;
  int64_t num_chunks;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
  // Workers inside RunChunks. Changed only under the pool's mu_; atomic so that the caller
  // can watch it while spinning.
  std::atomic<int> active{0};
  std::condition_variable finished;

  // Runs chunks until none is left; returns true if this thread finished the last chunk.
  bool RunChunks() {
    bool finished_last = false;
    for (;;) {
      int64_t c = next.fetch_add(1, std::memory_order_relaxed);
      if (c >= num_chunks) return finished_last;
      int64_t begin = c * chunk;
      int64_t end = std::min(n, begin + chunk);
      (*fn)(begin, end);
      if (done.fetch_add(1, std::memory_order_acq_rel) + 1 == num_chunks) finished_last = true;
    }
  }
};

namespace {
thread_local int this_thread_index = 0;
}  // namespace

int ThreadPool::ThisThreadIndex() { return this_thread_index; }

ThreadPool::ThreadPool(int num_threads) {
  queue_.reserve(64);
  if (num_threads <= 0) num_threads = std::max(1u, std::thread::hardware_concurrency());
  for (int i = 1; i < num_threads; ++i) {
    workers_.emplace_back([this, i] {
      this_thread_index = i;
      WorkerLoop();
    });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::WorkerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (queue_.empty() && !stopping_) {
      lock.unlock();
      const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(kSpinMicros);
      // Yield rather than pause: a thread woken onto this core (the caller of the next
      // ParallelFor, often) would otherwise wait out our time slice, ~50 us measured.
      while (queued_.load(std::memory_order_relaxed) == 0 && std::chrono::steady_clock::now() < until) {
        std::this_thread::yield();
      }
      lock.lock();
    }
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_ && queue_.empty()) return;
    RunOneQueued(lock);
  }
}

bool ThreadPool::RunOneQueued(std::unique_lock<std::mutex>& lock) {
  if (queue_.empty()) return false;
  Job* job = queue_.front();
  if (job->next.load(std::memory_order_relaxed) >= job->num_chunks) {
    // Fully claimed: nothing left for us. The caller still owns it until it is done.
    queue_.erase(queue_.begin());
    queued_.store(queue_.size(), std::memory_order_relaxed);
    return true;
  }
  ++job->active;
  lock.unlock();
  job->RunChunks();
  lock.lock();
  --job->active;
  if (job->active == 0 && job->done.load(std::memory_order_acquire) == job->num_chunks) {
    job->finished.notify_all();
  }
  return true;
}

void ThreadPool::ParallelFor(int64_t n, int64_t min_grain, RangeFn fn) {
  if (n <= 0) return;
  min_grain = std::max<int64_t>(1, min_grain);
  const int64_t threads = num_threads();
  if (threads == 1 || n <= min_grain) {
    fn(0, n);
    return;
  }
  // Four chunks per thread balance uneven chunks without much claiming overhead.
  int64_t chunk = std::max(min_grain, (n + threads * 4 - 1) / (threads * 4));
  Job job;
  job.fn = &fn;
  job.n = n;
  job.chunk = chunk;
  job.num_chunks = (n + chunk - 1) / chunk;
  if (job.num_chunks == 1) {
    fn(0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(&job);
    queued_.store(queue_.size(), std::memory_order_relaxed);
  }
  cv_.notify_all();
  job.RunChunks();
  // A worker still running a chunk usually finishes within microseconds: watch for that
  // before sleeping, since being woken costs more. The lock below then orders our return
  // after the worker's last touch of `job` (it decrements `active` and notifies under mu_).
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(kSpinMicros);
  while (!(job.done.load(std::memory_order_acquire) == job.num_chunks &&
           job.active.load(std::memory_order_acquire) == 0) &&
         std::chrono::steady_clock::now() < until) {
    std::this_thread::yield();
  }
  std::unique_lock<std::mutex> lock(mu_);
  auto it = std::find(queue_.begin(), queue_.end(), &job);
  if (it != queue_.end()) queue_.erase(it);
  queued_.store(queue_.size(), std::memory_order_relaxed);
  job.finished.wait(lock, [&] {
    return job.active == 0 && job.done.load(std::memory_order_acquire) == job.num_chunks;
  });
}

namespace {
std::mutex default_mu;
int default_threads = 0;
std::unique_ptr<ThreadPool> default_pool;
}  // namespace

ThreadPool& ThreadPool::Default() {
  std::lock_guard<std::mutex> lock(default_mu);
  if (!default_pool) default_pool = std::make_unique<ThreadPool>(default_threads);
  return *default_pool;
}

bool ThreadPool::SetDefaultThreads(int num_threads) {
  std::lock_guard<std::mutex> lock(default_mu);
  if (default_pool) return default_pool->num_threads() == num_threads;
  default_threads = num_threads;
  return true;
}

}  // namespace lockstep
