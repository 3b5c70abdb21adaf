// SpinBarrier: where a step's replica threads meet between its phases. Waiters spin briefly
// before they block: the phases are short, and waking a blocked thread costs tens of
// microseconds. A barrier can be cancelled (a replica failed and will not come): every wait,
// pending or later, returns false until Reset.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace lockstep::training {

class SpinBarrier {
 public:
  explicit SpinBarrier(int parties) : parties_(parties) {}

  // How many threads meet here from now on; only while none waits.
  void set_parties(int parties) { parties_ = parties; }

  // Returns once every party has arrived (true), or once the barrier is cancelled (false).
  bool Wait() {
    if (cancelled_.load(std::memory_order_acquire)) return false;
    const uint64_t generation = generation_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == parties_) {
      arrived_.store(0, std::memory_order_relaxed);
      Advance(generation);
      return !cancelled_.load(std::memory_order_acquire);
    }
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
    while (generation_.load(std::memory_order_acquire) == generation &&
           std::chrono::steady_clock::now() < until) {
      std::this_thread::yield();
    }
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != generation; });
    return !cancelled_.load(std::memory_order_acquire);
  }

  // Releases every waiter, and every later one, with false.
  void Cancel() {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_.store(true, std::memory_order_release);
    arrived_.store(0, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_acq_rel);
    cv_.notify_all();
  }

  // Ready for use again after a Cancel; only while none waits.
  void Reset() {
    cancelled_.store(false, std::memory_order_release);
    arrived_.store(0, std::memory_order_relaxed);
  }

 private:
  void Advance(uint64_t generation) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      generation_.store(generation + 1, std::memory_order_release);
    }
    cv_.notify_all();
  }

  int parties_;
  std::atomic<int> arrived_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> cancelled_{false};
  std::mutex mu_;
  std::condition_variable cv_;
};

}  // namespace lockstep::training
