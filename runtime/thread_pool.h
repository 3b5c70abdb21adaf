// ThreadPool: the runtime's intra-op parallelism. One pool is shared by every Session in a
// process (configurable size); kernels split work with ParallelFor. The calling thread always
// takes part, so a pool of size 1 runs everything inline with no synchronisation, and nested
// or concurrent ParallelFor calls cannot deadlock.
//
// An idle worker spins for kSpinMicros before it sleeps: waking a sleeping thread costs about
// 5 us on our machines, as much as a whole batch-1 layer, while the layers of one request
// follow each other within microseconds. OpenMP runtimes do the same.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace lockstep {

// A non-owning reference to a callable taking a range: unlike std::function it never
// allocates, so handing a lambda with many captures to ParallelFor costs nothing. The callable
// must outlive the call it is passed to (it always does: ParallelFor returns after it ran).
class RangeFn {
 public:
  template <typename F>
  RangeFn(const F& f)  // NOLINT: implicit, so that lambdas pass straight in
      : object_(&f), call_([](const void* o, int64_t b, int64_t e) { (*static_cast<const F*>(o))(b, e); }) {}
  void operator()(int64_t begin, int64_t end) const { call_(object_, begin, end); }

 private:
  const void* object_;
  void (*call_)(const void*, int64_t, int64_t);
};

class ThreadPool {
 public:
  static constexpr int kSpinMicros = 100;

  // `num_threads` counts the caller: a pool of N starts N-1 workers. 0 means hardware threads.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) over disjoint ranges covering [0, n), each at least `min_grain` long
  // (except possibly the last), and returns when all have finished. fn must not throw.
  void ParallelFor(int64_t n, int64_t min_grain, RangeFn fn);

  // The calling thread's index in the pool it works for: 1..num_threads()-1 for a worker, 0
  // for any other thread (a ParallelFor caller). Lets a kernel hand each thread the same share
  // of the work on every call, so that share's data stays in that core's cache.
  static int ThisThreadIndex();

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
  // Jobs waiting for workers, oldest first. A vector reserved up front rather than a deque:
  // it holds one entry per concurrent ParallelFor (a handful), and a deque allocates and
  // frees blocks as entries come and go, which a training step must not do.
  std::vector<Job*> queue_;
  // queue_.size(), readable without the lock by spinning workers.
  std::atomic<size_t> queued_{0};
  bool stopping_ = false;
};

}  // namespace lockstep
