// Weighted routing over a model's traffic split (model_config.h's TrafficArm): which arm serves
// a request that names no version and no label.
//
// With a routing key, the choice is weighted rendezvous hashing. Arm i scores -ln(u_i) / w_i,
// where u_i in (0, 1) is a hash of the key and the arm's name, and the lowest score wins. So:
//  - arm i wins with probability w_i / sum(w) over keys;
//  - a key wins the same arm for as long as the weights are unchanged;
//  - when one arm's weight changes, the only keys that move are those moving to or from that
//    arm: the fewest any scheme could move. (Cumulative ranges over [0, 1) would also move
//    keys between the arms after it.)
// The hash is fixed (FNV-1a, then SplitMix64's finaliser), so every server behind a load
// balancer, and every restart, routes a key the same way.
//
// Without a key, the arm is drawn at random with the same probabilities.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace lockstep {

struct WeightedArm {
  uint64_t name_hash = 0;  // RoutingHash of the arm's name
  double weight = 0;       // 0: out of play (no weight, or its target is not available)
};

uint64_t RoutingHash(std::string_view text);

// The index of the arm that serves: by `key_hash` (RoutingHash of the routing key) when given,
// at random otherwise. arms.size() when no arm is in play.
size_t PickArm(std::span<const WeightedArm> arms, std::optional<uint64_t> key_hash);

}  // namespace lockstep
