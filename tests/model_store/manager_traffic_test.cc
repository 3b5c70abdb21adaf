// Traffic splits in the manager: requests that name no version and no label are spread over
// the arms by weight, a routing key stays on its arm, an arm follows its label, an arm whose
// target is not available gets nothing, and requests that name a version or label ignore the
// split.
#include <gtest/gtest.h>

#include <string>

#include "model_store/manager.h"
#include "tests/model_store/manager_test_util.h"

namespace lockstep {
namespace {

using namespace store_test;  // NOLINT: test helpers

// The version that serves a request with no version and no label, given `key`.
int64_t Routed(const ModelManager& manager, const std::string& key = "") {
  StatusOr<ServableHandle> handle = manager.Resolve("m", std::nullopt, std::nullopt, key);
  return handle.ok() ? (*handle)->version() : -1;
}

ModelConfig Split(const fs::path& base, std::map<std::string, int64_t> labels, std::vector<TrafficArm> arms) {
  ModelConfig m = MakeModel("m", base, Specific({1, 2, 3}), std::move(labels));
  m.traffic = std::move(arms);
  return m;
}

TEST(ModelManagerTraffic, SplitsByWeightAndKeepsKeysOnTheirArm) {
  ScratchDir dir;
  WriteVersion(dir.path(), 1);
  WriteVersion(dir.path(), 2);
  ModelManager manager(ManualOptions());
  ASSERT_TRUE(manager.ApplyConfig(Config({MakeModel("m", dir.path(), Specific({1, 2, 3}))})).ok());
  ASSERT_TRUE(Settle(manager));
  EXPECT_EQ(Routed(manager), 2);  // no split: the highest version

  const std::map<std::string, int64_t> labels = {{"stable", 1}, {"canary", 2}};
  Status s = manager.ApplyConfig(Config({Split(dir.path(), labels, {{"stable", 0, 90}, {"canary", 0, 10}})}));
  ASSERT_TRUE(s.ok()) << s.ToString();
  int canary = 0;
  for (int i = 0; i < 10000; ++i) canary += Routed(manager) == 2;
  EXPECT_NEAR(canary, 1000, 200);  // +-2 points
  const std::vector<TrafficArmCount> counts = manager.TrafficCounts();
  ASSERT_EQ(counts.size(), 2u);
  EXPECT_EQ(counts[0].arm, "label:stable");
  EXPECT_EQ(counts[0].requests, static_cast<uint64_t>(10000 - canary));
  EXPECT_EQ(counts[1].arm, "label:canary");
  EXPECT_EQ(counts[1].requests, static_cast<uint64_t>(canary));
  std::map<std::string, int64_t> arm_of;
  for (int k = 0; k < 500; ++k)
    arm_of["user-" + std::to_string(k)] = Routed(manager, "user-" + std::to_string(k));
  for (int round = 0; round < 3; ++round) {
    for (const auto& [key, version] : arm_of) ASSERT_EQ(Routed(manager, key), version) << key;
  }
  // A request that names a version or a label is not split.
  EXPECT_EQ(Serve(manager, "m", 1), 1.0f);
  EXPECT_EQ(Serve(manager, "m", std::nullopt, "canary"), 2.0f);

  // The arm follows its label: canary moved to version 3, its keys go there.
  WriteVersion(dir.path(), 3);
  ASSERT_TRUE(Settle(manager));
  s = manager.ApplyConfig(
      Config({Split(dir.path(), {{"stable", 1}, {"canary", 3}}, {{"stable", 0, 90}, {"canary", 0, 10}})}));
  ASSERT_TRUE(s.ok()) << s.ToString();
  for (const auto& [key, version] : arm_of) EXPECT_EQ(Routed(manager, key), version == 2 ? 3 : 1) << key;
}

TEST(ModelManagerTraffic, AnArmWhoseTargetIsNotAvailableGetsNothing) {
  ScratchDir dir;
  WriteVersion(dir.path(), 1);
  ModelManager manager(ManualOptions());
  // Version 3 is not on disk: its arm is out of play, and everything goes to version 1.
  ASSERT_TRUE(manager.ApplyConfig(Config({Split(dir.path(), {}, {{"", 1, 50}, {"", 3, 50}})})).ok());
  ASSERT_TRUE(Settle(manager));
  for (int i = 0; i < 200; ++i) ASSERT_EQ(Routed(manager), 1);
  // Once it loads, it takes its share.
  WriteVersion(dir.path(), 3);
  ASSERT_TRUE(Settle(manager));
  int three = 0;
  for (int i = 0; i < 2000; ++i) three += Routed(manager) == 3;
  EXPECT_NEAR(three, 1000, 150);
  // With no arm available, the highest available version serves, as without a split.
  ASSERT_TRUE(manager.ApplyConfig(Config({Split(dir.path(), {}, {{"", 2, 1}})})).ok());
  ASSERT_TRUE(Settle(manager));
  EXPECT_EQ(Routed(manager, "k"), 3);
}

}  // namespace
}  // namespace lockstep
