#include <gtest/gtest.h>

#include <thread>

#include "model_store/manager.h"
#include "tests/model_store/manager_test_util.h"

namespace lockstep {
namespace {

using namespace store_test;  // NOLINT: test helpers

TEST(ModelManager, NewVersionIsServedAfterAPoll) {
  ScratchDir dir;
  WriteVersion(dir.path(), 1);
  ModelManager manager(ManualOptions());
  ASSERT_TRUE(manager.ApplyConfig(Config({MakeModel("m", dir.path())})).ok());
  ASSERT_TRUE(Settle(manager));
  EXPECT_EQ(Serve(manager, "m"), 1.0f);
  EXPECT_EQ(StateOf(manager, "m", 1), VersionState::kAvailable);

  WriteVersion(dir.path(), 2);
  EXPECT_EQ(Serve(manager, "m"), 1.0f);  // poll interval 0: nothing happens until a poll
  ASSERT_TRUE(Settle(manager));
  EXPECT_EQ(Serve(manager, "m"), 2.0f);
  EXPECT_EQ(StateOf(manager, "m", 1), VersionState::kEnd);
  EXPECT_EQ(StateOf(manager, "m", 2), VersionState::kAvailable);
  StatusOr<ServableHandle> h = manager.Resolve("m", 2);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ((*h)->model(), "m");
  EXPECT_EQ((*h)->version(), 2);
}

TEST(ModelManager, BackgroundPollFindsNewVersions) {
  ScratchDir dir;
  WriteVersion(dir.path(), 1);
  ModelManager::Options options;
  options.file_system_poll_wait_seconds = 1;
  ModelManager manager(options);
  ASSERT_TRUE(manager.ApplyConfig(Config({MakeModel("m", dir.path())})).ok());
  EXPECT_TRUE(WaitFor([&] { return Serve(manager, "m") == 1.0f; }));
  WriteVersion(dir.path(), 2);
  EXPECT_TRUE(WaitFor([&] { return Serve(manager, "m") == 2.0f; }));
}

TEST(ModelManager, PollIntervalZeroPollsOnlyWhenAConfigIsApplied) {
  ScratchDir dir;
  WriteVersion(dir.path(), 1);
  ModelManager manager(ManualOptions());
  ASSERT_TRUE(manager.ApplyConfig(Config({MakeModel("m", dir.path())})).ok());
  ASSERT_TRUE(manager.WaitUntilIdle(kIdleTimeout));
  EXPECT_EQ(Serve(manager, "m"), 1.0f);
  WriteVersion(dir.path(), 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_TRUE(manager.WaitUntilIdle(kIdleTimeout));
  EXPECT_EQ(Serve(manager, "m"), 1.0f);
  EXPECT_FALSE(manager.GetModelStatus("m", 2).ok());
  // Applying a config (even the same one) polls again.
  ASSERT_TRUE(manager.ApplyConfig(Config({MakeModel("m", dir.path())})).ok());
  ASSERT_TRUE(manager.WaitUntilIdle(kIdleTimeout));
  EXPECT_EQ(Serve(manager, "m"), 2.0f);
}

TEST(ModelManager, LatestTwoServesBothAndDefaultsToTheHighest) {
  ScratchDir dir;
  for (int64_t v : {1, 2, 3}) WriteVersion(dir.path(), v);
  ModelManager manager(ManualOptions());
  ASSERT_TRUE(manager.ApplyConfig(Config({MakeModel("m", dir.path(), {VersionPolicy::kLatest, 2, {}})})).ok());
  ASSERT_TRUE(Settle(manager));
  EXPECT_EQ(Serve(manager, "m"), 3.0f);
  EXPECT_EQ(Serve(manager, "m", 2), 2.0f);
  EXPECT_EQ(Serve(manager, "m", 1), -1.0f);
  StatusOr<std::vector<VersionStatusInfo>> status = manager.GetModelStatus("m");
  ASSERT_TRUE(status.ok());
  ASSERT_EQ(status->size(), 2u);  // version 1 was never aspired, so it has no status
  EXPECT_EQ((*status)[0].version, 2);
  EXPECT_EQ((*status)[1].version, 3);
}

TEST(ModelManager, AllPolicyServesEveryVersionAndDropsDeletedOnes) {
  ScratchDir dir;
  for (int64_t v : {1, 2, 3}) WriteVersion(dir.path(), v);
  ModelManager manager(ManualOptions());
  ASSERT_TRUE(manager.ApplyConfig(Config({MakeModel("m", dir.path(), {VersionPolicy::kAll, 1, {}})})).ok());
  ASSERT_TRUE(Settle(manager));
  for (int64_t v : {1, 2, 3}) EXPECT_EQ(Serve(manager, "m", v), static_cast<float>(v));
  std::filesystem::remove_all(dir / "2");
  ASSERT_TRUE(Settle(manager));
  EXPECT_EQ(manager.Resolve("m", 2).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Serve(manager, "m", 1), 1.0f);
  EXPECT_EQ(Serve(manager, "m"), 3.0f);
  EXPECT_EQ(manager.Snapshot()->models.at("m").versions.size(), 2u);
}

TEST(ModelManager, ResolveErrorsFollowTfServing) {
  ScratchDir dir;
  WriteVersion(dir.path(), 1);
  ModelManager manager(ManualOptions());
  ASSERT_TRUE(manager.ApplyConfig(Config({MakeModel("m", dir.path(), {}, {})})).ok());
  ASSERT_TRUE(Settle(manager));

  StatusOr<ServableHandle> r = manager.Resolve("half");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(r.status().message(), "Servable not found for request: Latest(half)");
  r = manager.Resolve("m", 3);
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(r.status().message(), "Servable not found for request: Specific(m, 3)");
  r = manager.Resolve("m", std::nullopt, "canary");
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(r.status().message(), "Unrecognized servable version label: canary");
  r = manager.Resolve("m", 1, "canary");
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);

  StatusOr<std::vector<VersionStatusInfo>> s = manager.GetModelStatus("half");
  EXPECT_EQ(s.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(s.status().message(), "Could not find any versions of model half");
  s = manager.GetModelStatus("m", 9);
  EXPECT_EQ(s.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(s.status().message(), "Could not find version 9 of model m");
}

TEST(ModelManager, BrokenVersionLeavesTheOldOneServingAndIsNotRetriedEveryPoll) {
  ScratchDir dir;
  WriteVersion(dir.path(), 1);
  ModelManager manager(ManualOptions());
  ASSERT_TRUE(manager.ApplyConfig(Config({MakeModel("m", dir.path())})).ok());
  ASSERT_TRUE(Settle(manager));

  WriteVersion(dir.path(), 2);
  FlipByte(dir / "2" / std::string(kBundleWeightsFile), 0);
  ASSERT_TRUE(Settle(manager));
  EXPECT_EQ(Serve(manager, "m"), 1.0f);
  EXPECT_EQ(StateOf(manager, "m", 1), VersionState::kAvailable);
  StatusOr<std::vector<VersionStatusInfo>> s = manager.GetModelStatus("m", 2);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)[0].state, VersionState::kEnd);
  EXPECT_FALSE((*s)[0].status.ok());
  EXPECT_NE((*s)[0].status.message().find("weights.bin"), std::string::npos) << (*s)[0].status.ToString();
  EXPECT_NE((*s)[0].status.message().find("model 'm' version 2"), std::string::npos);

  // Polls leave it as it is (FailedVersionIsRetriedOnlyAfterAChangedConfig proves no retry).
  ASSERT_TRUE(Settle(manager));
  EXPECT_EQ(StateOf(manager, "m", 2), VersionState::kEnd);
  EXPECT_EQ(Serve(manager, "m"), 1.0f);

  // A fixed directory is retried.
  WriteVersion(dir.path(), 2);
  ASSERT_TRUE(Settle(manager));
  EXPECT_EQ(Serve(manager, "m"), 2.0f);
  EXPECT_EQ(StateOf(manager, "m", 1), VersionState::kEnd);
}

TEST(ModelManager, FailedVersionIsRetriedOnlyAfterAChangedConfig) {
  ScratchDir dir;
  WriteVersion(dir.path(), 1);
  const fs::path weights = dir / "1" / std::string(kBundleWeightsFile);
  FlipByte(weights, 0);
  ModelManager manager(ManualOptions());
  ASSERT_TRUE(manager.ApplyConfig(Config({MakeModel("m", dir.path())})).ok());
  ASSERT_TRUE(Settle(manager));
  EXPECT_EQ(StateOf(manager, "m", 1), VersionState::kEnd);
  EXPECT_EQ(manager.Resolve("m").status().message(), "Servable not found for request: Latest(m)");

  // Repair the file in place, keeping its size and mtime: the directory looks unchanged, so
  // polls must not retry it (it would load now, so a retry would show).
  const auto mtime = fs::last_write_time(weights);
  FlipByte(weights, 0);
  fs::last_write_time(weights, mtime);
  ASSERT_TRUE(Settle(manager));
  EXPECT_EQ(StateOf(manager, "m", 1), VersionState::kEnd);

  // The same config again (a server re-reading an unchanged file) retries nothing either.
  ASSERT_TRUE(manager.ApplyConfig(Config({MakeModel("m", dir.path())})).ok());
  ASSERT_TRUE(Settle(manager));
  EXPECT_EQ(StateOf(manager, "m", 1), VersionState::kEnd);

  // A config that changes the model's entry retries its failed versions.
  ModelConfig changed = MakeModel("m", dir.path());
  changed.platform = "tensorflow";
  ASSERT_TRUE(manager.ApplyConfig(Config({changed})).ok());
  ASSERT_TRUE(Settle(manager));
  EXPECT_EQ(StateOf(manager, "m", 1), VersionState::kAvailable);
  EXPECT_EQ(Serve(manager, "m"), 1.0f);
}

TEST(ModelManager, InFlightHandleKeepsAnUnloadedVersionAliveAndUsable) {
  ScratchDir dir;
  WriteVersion(dir.path(), 1);
  ModelManager manager(ManualOptions());
  ASSERT_TRUE(manager.ApplyConfig(Config({MakeModel("m", dir.path())})).ok());
  ASSERT_TRUE(Settle(manager));
  StatusOr<ServableHandle> handle = manager.Resolve("m");
  ASSERT_TRUE(handle.ok());
  std::weak_ptr<const LoadedVersion> weak = *handle;

  WriteVersion(dir.path(), 2);
  ASSERT_TRUE(Settle(manager));
  EXPECT_EQ(StateOf(manager, "m", 1), VersionState::kEnd);
  EXPECT_EQ(manager.Resolve("m", 1).status().message(), "Servable not found for request: Specific(m, 1)");
  StatusOr<float> y = RunOnce(**handle);  // the request in flight finishes on version 1
  ASSERT_TRUE(y.ok()) << y.status().ToString();
  EXPECT_EQ(*y, 1.0f);
  EXPECT_FALSE(weak.expired());
  *handle = nullptr;
  EXPECT_TRUE(weak.expired());  // the last handle freed it
}

TEST(ModelManager, InvalidConfigIsRejectedAndTheOldOneKeepsServing) {
  ScratchDir dir;
  WriteVersion(dir.path(), 1);
  ModelManager manager(ManualOptions());
  ASSERT_TRUE(manager.ApplyConfig(Config({MakeModel("m", dir.path())})).ok());
  ASSERT_TRUE(Settle(manager));

  StoreConfig bad = Config({MakeModel("m", "relative/path"), MakeModel("other", dir.path())});
  Status s = manager.ApplyConfig(bad);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("model 'm'"), std::string::npos);
  ASSERT_TRUE(Settle(manager));
  EXPECT_EQ(Serve(manager, "m"), 1.0f);
  EXPECT_EQ(manager.Resolve("other").status().code(), StatusCode::kNotFound);
}

TEST(ModelManager, ModelRemovedFromTheConfigIsUnloaded) {
  ScratchDir a, b;
  WriteVersion(a.path(), 1);
  WriteVersion(b.path(), 5);
  ModelManager manager(ManualOptions());
  ASSERT_TRUE(manager.ApplyConfig(Config({MakeModel("a", a.path()), MakeModel("b", b.path())})).ok());
  ASSERT_TRUE(Settle(manager));
  EXPECT_EQ(Serve(manager, "b"), 5.0f);
  std::weak_ptr<const LoadedVersion> weak = *manager.Resolve("b");

  ASSERT_TRUE(manager.ApplyConfig(Config({MakeModel("a", a.path())})).ok());
  EXPECT_EQ(manager.Resolve("b").status().message(), "Servable not found for request: Latest(b)");
  EXPECT_EQ(manager.GetModelStatus("b").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(weak.expired());
  EXPECT_EQ(Serve(manager, "a"), 1.0f);
  EXPECT_EQ(manager.Snapshot()->models.count("b"), 0u);
}

TEST(ModelManager, MissingBasePathServesNothingUntilItAppears) {
  ScratchDir dir;
  ModelManager manager(ManualOptions());
  ASSERT_TRUE(manager.ApplyConfig(Config({MakeModel("m", dir / "later")})).ok());
  ASSERT_TRUE(Settle(manager));
  EXPECT_EQ(manager.Resolve("m").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(manager.GetModelStatus("m").status().code(), StatusCode::kNotFound);
  WriteVersion(dir / "later", 4);
  ASSERT_TRUE(Settle(manager));
  EXPECT_EQ(Serve(manager, "m"), 4.0f);
}

TEST(ModelManager, VersionsGoneFromDiskKeepTheNewestServing) {
  ScratchDir dir;
  WriteVersion(dir.path(), 1);
  ModelManager manager(ManualOptions());
  ASSERT_TRUE(manager.ApplyConfig(Config({MakeModel("m", dir.path())})).ok());
  ASSERT_TRUE(Settle(manager));
  std::filesystem::remove_all(dir / "1");  // the weights stay mapped
  ASSERT_TRUE(Settle(manager));
  EXPECT_EQ(Serve(manager, "m"), 1.0f);
}

TEST(ModelManager, StopIsIdempotentAndRefusesNewConfigs) {
  ScratchDir dir;
  WriteVersion(dir.path(), 1);
  ModelManager manager(ManualOptions());
  ASSERT_TRUE(manager.ApplyConfig(Config({MakeModel("m", dir.path())})).ok());
  manager.Stop();
  manager.Stop();
  EXPECT_EQ(manager.ApplyConfig(Config({})).code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(manager.WaitUntilIdle(std::chrono::milliseconds(10)));
}

}  // namespace
}  // namespace lockstep
