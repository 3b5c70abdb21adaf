// The routing behind traffic splits: shares follow the weights, keys are sticky, and a weight
// change moves only the keys that must move.
#include "model_store/traffic_split.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace lockstep {
namespace {

std::vector<WeightedArm> Arms(const std::vector<std::string>& names, const std::vector<double>& weights) {
  std::vector<WeightedArm> arms;
  for (size_t i = 0; i < names.size(); ++i) arms.push_back({RoutingHash(names[i]), weights[i]});
  return arms;
}

std::vector<size_t> RouteKeys(const std::vector<WeightedArm>& arms, int keys) {
  std::vector<size_t> picks;
  for (int k = 0; k < keys; ++k) picks.push_back(PickArm(arms, RoutingHash("user-" + std::to_string(k))));
  return picks;
}

// The hash is part of the contract (servers behind one balancer must agree): pinned.
TEST(TrafficSplitTest, TheHashIsFixed) {
  EXPECT_EQ(RoutingHash(""), 0xf52a15e9a9b5e89bULL);
  EXPECT_EQ(RoutingHash("user-1"), 0xc499b5f8a721df58ULL);
  EXPECT_EQ(RoutingHash("user-1"), RoutingHash(std::string("user-") + "1"));
  EXPECT_NE(RoutingHash("user-1"), RoutingHash("user-2"));
}

TEST(TrafficSplitTest, SharesFollowTheWeightsWithAndWithoutKeys) {
  const auto arms = Arms({"label:stable", "label:canary"}, {90, 10});
  const int n = 100000;
  int canary_random = 0;
  for (int i = 0; i < n; ++i) canary_random += PickArm(arms, std::nullopt) == 1;
  int canary_keyed = 0;
  for (size_t pick : RouteKeys(arms, n)) canary_keyed += pick == 1;
  // 10 % of 100,000: a standard deviation of 95; 600 is over six of them.
  EXPECT_NEAR(canary_random, n / 10, 600);
  EXPECT_NEAR(canary_keyed, n / 10, 600);

  const auto three = Arms({"version:1", "version:2", "version:3"}, {1, 2, 5});
  std::vector<int> counts(3);
  for (size_t pick : RouteKeys(three, n)) ++counts[pick];
  EXPECT_NEAR(counts[0], n / 8, 700);
  EXPECT_NEAR(counts[1], n / 4, 700);
  EXPECT_NEAR(counts[2], n * 5 / 8, 700);
}

TEST(TrafficSplitTest, ArmsOutOfPlayGetNothing) {
  const auto arms = Arms({"a", "b", "c"}, {0, 3, 0});
  for (size_t pick : RouteKeys(arms, 1000)) EXPECT_EQ(pick, 1u);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(PickArm(arms, std::nullopt), 1u);
  const auto none = Arms({"a", "b"}, {0, 0});
  EXPECT_EQ(PickArm(none, RoutingHash("k")), 2u);
  EXPECT_EQ(PickArm(none, std::nullopt), 2u);
  EXPECT_EQ(PickArm({}, std::nullopt), 0u);
}

TEST(TrafficSplitTest, KeysStayWhileTheWeightsDoNot) {
  const auto arms = Arms({"label:stable", "label:canary"}, {90, 10});
  EXPECT_EQ(RouteKeys(arms, 5000), RouteKeys(arms, 5000));
  // The same weights scaled are the same split.
  EXPECT_EQ(RouteKeys(arms, 5000), RouteKeys(Arms({"label:stable", "label:canary"}, {9, 1}), 5000));
}

// 90/10 -> 50/50: only stable's keys move, to canary, and about 40 % of all keys do (the share
// that must). With three arms, raising one arm's weight moves keys only onto it.
TEST(TrafficSplitTest, AWeightChangeMovesOnlyTheKeysThatMust) {
  const int n = 20000;
  const auto before = RouteKeys(Arms({"label:stable", "label:canary"}, {90, 10}), n);
  const auto after = RouteKeys(Arms({"label:stable", "label:canary"}, {50, 50}), n);
  int moved = 0;
  for (int k = 0; k < n; ++k) {
    if (before[k] == after[k]) continue;
    ++moved;
    EXPECT_EQ(before[k], 0u) << "a canary key left the canary";
  }
  EXPECT_NEAR(moved, n * 4 / 10, 400);

  const auto three_before = RouteKeys(Arms({"a", "b", "c"}, {50, 30, 20}), n);
  const auto three_after = RouteKeys(Arms({"a", "b", "c"}, {50, 30, 40}), n);
  for (int k = 0; k < n; ++k) {
    if (three_before[k] == three_after[k]) continue;
    EXPECT_EQ(three_after[k], 2u) << "key " << k << " moved between a and b";
  }
}

}  // namespace
}  // namespace lockstep
