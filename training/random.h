// Random: the seeded generator behind everything random in training (shuffling, splits,
// initialisers, dropout). Its output depends only on the seed, the same on every platform and
// standard library (std's distributions and std::shuffle are implementation-defined), so a
// run is reproducible anywhere. xoshiro256** seeded through SplitMix64.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <utility>

namespace lockstep::training {

class Random {
 public:
  explicit Random(uint64_t seed);

  uint64_t Next();
  // Uniform in [0, n) without bias (Lemire's multiply-and-reject); n > 0.
  uint64_t Below(uint64_t n);
  // Uniform in [0, 1), 24 random bits.
  float UniformFloat();

  // The whole state, for checkpoints: Random(0).Restore(r.state()) continues as r would.
  using State = std::array<uint64_t, 4>;
  State state() const { return s_; }
  void Restore(const State& state) { s_ = state; }

 private:
  State s_;
};

// Fisher-Yates, driven by `rng`.
template <typename T>
void Shuffle(std::span<T> items, Random& rng) {
  for (size_t i = items.size(); i > 1; --i) {
    const size_t j = static_cast<size_t>(rng.Below(i));
    std::swap(items[i - 1], items[j]);
  }
}

}  // namespace lockstep::training
