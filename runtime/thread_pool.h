// ThreadPool: the runtime's intra-op parallelism. One pool is shared by every Session in a
// process (configurable size); kernels split work with ParallelFor. The calling thread always
// takes part, so a pool of size 1 runs everything inline with no synchronisation, and nested
// or concurrent ParallelFor calls cannot deadlock.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace lockstep {

class ThreadPool {
 public:
  // `num_threads` counts the caller: a pool of N starts N-1 workers. 0 means hardware threads.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) over disjoint ranges covering [0, n), each at least `min_grain` long
  // (except possibly the last), and returns when all have finished. fn must not throw.
  void ParallelFor(int64_t n, int64_t min_grain, const std::function<void(int64_t, int64_t)>& fn);

  // The process-wide pool. Its size is fixed by the first call to SetDefaultThreads, or by
  // hardware concurrency if none came first.
  static ThreadPool& Default();
  // Returns false when the default pool already exists with another size.
  static bool SetDefaultThreads(int num_threads);

 private:
  struct Job;
  void WorkerLoop();
  bool RunOneQueued(std::unique_lock<std::mutex>& lock);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job*> queue_;
  bool stopping_ = false;
};

}  // namespace lockstep
