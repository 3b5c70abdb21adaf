// How a new version replaces an old one: resource preserving (the old one unloaded and freed
// before the new one loads, the model Unavailable in between) beside the default
// availability preserving, and the memory budget that bounds what the loaded versions hold.
#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "tests/model_store/manager_test_util.h"

namespace lockstep::store_test {
namespace {

ModelConfig ResourcePreserving(const fs::path& base) {
  ModelConfig m = MakeModel("m", base);
  m.transition = ModelConfig::Transition::kResourcePreserving;
  return m;
}

int64_t FilesBytes(const fs::path& dir) {
  int64_t bytes = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file()) bytes += static_cast<int64_t>(entry.file_size());
  }
  return bytes;
}

// The old version goes first, and the new one loads only once the last request holding the
// old one lets go; meanwhile the model answers Unavailable, and then serves the new version.
TEST(ModelManagerTransition, ResourcePreservingFreesTheOldVersionBeforeLoadingTheNew) {
  ScratchDir dir;
  WriteVersion(dir.path(), 1);
  ModelManager manager(ManualOptions());
  ASSERT_TRUE(manager.ApplyConfig(Config({ResourcePreserving(dir.path())})).ok());
  ASSERT_TRUE(Settle(manager));
  StatusOr<ServableHandle> in_flight = manager.Resolve("m");  // a request still running on version 1
  ASSERT_TRUE(in_flight.ok());
  std::weak_ptr<const LoadedVersion> old = *in_flight;

  WriteVersion(dir.path(), 2);
  manager.PollNow();
  EXPECT_EQ(StateOf(manager, "m", 1), VersionState::kEnd);
  ASSERT_TRUE(WaitFor([&] { return StateOf(manager, "m", 2) == VersionState::kLoading; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(StateOf(manager, "m", 2), VersionState::kLoading) << "loaded while version 1 was still held";
  const StatusOr<ServableHandle> between = manager.Resolve("m");
  ASSERT_FALSE(between.ok());
  EXPECT_EQ(between.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(between.status().message(),
            "model m is between versions (version_transition resource_preserving): retry shortly");
  EXPECT_TRUE(manager.Snapshot()->models.at("m").between_versions);

  StatusOr<float> y = RunOnce(**in_flight);  // the request in flight finishes on version 1
  ASSERT_TRUE(y.ok());
  EXPECT_EQ(*y, 1.0f);
  *in_flight = nullptr;
  EXPECT_TRUE(old.expired());
  ASSERT_TRUE(Settle(manager));
  EXPECT_EQ(Serve(manager, "m"), 2.0f);
  EXPECT_FALSE(manager.Snapshot()->models.at("m").between_versions);
}

// The price of one copy: a new version that fails to load leaves the model with none (the
// default keeps the old one serving, manager_test.cc).
TEST(ModelManagerTransition, ResourcePreservingWithABrokenNewVersionServesNothing) {
  ScratchDir dir;
  WriteVersion(dir.path(), 1);
  ModelManager manager(ManualOptions());
  ASSERT_TRUE(manager.ApplyConfig(Config({ResourcePreserving(dir.path())})).ok());
  ASSERT_TRUE(Settle(manager));
  WriteVersion(dir.path(), 2);
  FlipByte(dir / "2" / std::string(kBundleWeightsFile), 0);
  ASSERT_TRUE(Settle(manager));
  EXPECT_EQ(StateOf(manager, "m", 1), VersionState::kEnd);
  EXPECT_EQ(StateOf(manager, "m", 2), VersionState::kEnd);
  EXPECT_EQ(manager.Resolve("m").status().code(), StatusCode::kNotFound);
  // Removing the broken version rolls back to version 1.
  fs::remove_all(dir / "2");
  ASSERT_TRUE(Settle(manager));
  EXPECT_EQ(Serve(manager, "m"), 1.0f);
}

// A budget for one version: availability preserving cannot hold two, so the new version is
// refused and the old one keeps serving; resource preserving fits the swap in the budget.
TEST(ModelManagerTransition, AMemoryBudgetRefusesASecondCopyAndNotASwap) {
  ScratchDir dir;
  WriteVersion(dir.path(), 1);
  ModelManager::Options options = ManualOptions();
  options.max_model_memory_bytes = FilesBytes(dir / "1") * 3 / 2;
  {
    ModelManager manager(options);
    ASSERT_TRUE(manager.ApplyConfig(Config({MakeModel("m", dir.path())})).ok());
    ASSERT_TRUE(Settle(manager));
    EXPECT_EQ(Serve(manager, "m"), 1.0f);
    WriteVersion(dir.path(), 2);
    ASSERT_TRUE(Settle(manager));
    EXPECT_EQ(Serve(manager, "m"), 1.0f);
    StatusOr<std::vector<VersionStatusInfo>> s = manager.GetModelStatus("m", 2);
    ASSERT_TRUE(s.ok());
    EXPECT_EQ((*s)[0].state, VersionState::kEnd);
    EXPECT_EQ((*s)[0].status.code(), StatusCode::kResourceExhausted);
    EXPECT_NE((*s)[0].status.message().find("loading version 2 of model m needs"), std::string::npos)
        << (*s)[0].status.ToString();
    EXPECT_NE((*s)[0].status.message().find("--max_model_memory_bytes budget"), std::string::npos);
  }
  fs::remove_all(dir / "2");
  ModelManager manager(options);
  ASSERT_TRUE(manager.ApplyConfig(Config({ResourcePreserving(dir.path())})).ok());
  ASSERT_TRUE(Settle(manager));
  WriteVersion(dir.path(), 2);
  ASSERT_TRUE(Settle(manager));
  EXPECT_EQ(Serve(manager, "m"), 2.0f);
  EXPECT_EQ(StateOf(manager, "m", 1), VersionState::kEnd);
}

}  // namespace
}  // namespace lockstep::store_test
