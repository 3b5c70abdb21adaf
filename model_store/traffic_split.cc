#include "model_store/traffic_split.h"

#include <cmath>
#include <limits>
#include <random>

namespace lockstep {
namespace {

uint64_t Mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

// A double in (0, 1) from the top 53 bits: never 0, so its logarithm is finite.
double Unit(uint64_t bits) {
  return (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53;
}

}  // namespace

uint64_t RoutingHash(std::string_view text) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a 64
  for (char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return Mix(h);
}

size_t PickArm(std::span<const WeightedArm> arms, std::optional<uint64_t> key_hash) {
  if (key_hash) {
    size_t best = arms.size();
    double best_score = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < arms.size(); ++i) {
      if (!(arms[i].weight > 0)) continue;
      const double score = -std::log(Unit(Mix(*key_hash ^ arms[i].name_hash))) / arms[i].weight;
      if (score < best_score) {
        best_score = score;
        best = i;
      }
    }
    return best;
  }
  double total = 0;
  for (const WeightedArm& a : arms) total += a.weight > 0 ? a.weight : 0;
  if (!(total > 0)) return arms.size();
  // One generator per thread: no lock, no shared state on the request path.
  thread_local std::mt19937_64 generator{std::random_device{}()};
  double point = Unit(generator()) * total;
  size_t last = arms.size();
  for (size_t i = 0; i < arms.size(); ++i) {
    if (!(arms[i].weight > 0)) continue;
    last = i;
    if (point < arms[i].weight) return i;
    point -= arms[i].weight;
  }
  return last;  // rounding left the point past the end: the last arm in play
}

}  // namespace lockstep
