// Version labels, rollbacks and transitions: the label rules TF Serving enforces, config flips
// and version transitions that must never make a request fail.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <thread>

#include "model_store/manager.h"
#include "tests/model_store/manager_test_util.h"

namespace lockstep {
namespace {

using namespace store_test;  // NOLINT: test helpers

constexpr char kUnavailable[] = "Request to assign label to version 2 of model m, which is not currently available for inference";

TEST(ModelManagerLabels, LabelMustPointAtAnAvailableVersion) {
  ScratchDir dir;
  WriteVersion(dir.path(), 1);
  ModelManager manager(ManualOptions());
  // Nothing is loaded before the first config, so a label in it is refused, and with it the
  // whole config.
  Status s = manager.ApplyConfig(Config({MakeModel("m", dir.path(), Specific({1, 2}), {{"stable", 1}})}));
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("version 1 of model m"), std::string::npos) << s.ToString();
  EXPECT_EQ(manager.GetModelStatus("m").status().code(), StatusCode::kNotFound);

  ASSERT_TRUE(manager.ApplyConfig(Config({MakeModel("m", dir.path(), Specific({1, 2}))})).ok());
  ASSERT_TRUE(Settle(manager));
  s = manager.ApplyConfig(Config({MakeModel("m", dir.path(), Specific({1, 2}), {{"stable", 1}})}));
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(Serve(manager, "m", std::nullopt, "stable"), 1.0f);

  // Version 2 is not on disk: a label on it is refused and the old labels stay.
  s = manager.ApplyConfig(Config({MakeModel("m", dir.path(), Specific({1, 2}), {{"stable", 1}, {"canary", 2}})}));
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), kUnavailable);
  EXPECT_EQ(Serve(manager, "m", std::nullopt, "stable"), 1.0f);
  EXPECT_EQ(manager.Resolve("m", std::nullopt, "canary").status().code(), StatusCode::kNotFound);

  // Once version 2 is available, the label may point at it.
  WriteVersion(dir.path(), 2);
  ASSERT_TRUE(Settle(manager));
  s = manager.ApplyConfig(Config({MakeModel("m", dir.path(), Specific({1, 2}), {{"stable", 1}, {"canary", 2}})}));
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(Serve(manager, "m", std::nullopt, "canary"), 2.0f);
  EXPECT_EQ(Serve(manager, "m", std::nullopt, "stable"), 1.0f);
  EXPECT_EQ(Serve(manager, "m"), 2.0f);

  // A label on a version the same config's policy drops would dangle at once: refused, and
  // the old config keeps serving.
  s = manager.ApplyConfig(Config({MakeModel("m", dir.path(), Specific({2}), {{"stable", 1}})}));
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("would unload"), std::string::npos) << s.ToString();
  ASSERT_TRUE(Settle(manager));
  EXPECT_EQ(Serve(manager, "m", std::nullopt, "stable"), 1.0f);
}

TEST(ModelManagerLabels, AllowFlagCoversOnlyNewLabels) {
  ScratchDir dir;
  WriteVersion(dir.path(), 1);
  ModelManager::Options options = ManualOptions();
  options.allow_version_labels_for_unavailable_models = true;
  ModelManager manager(options);
  // New labels may name versions that are not available (yet).
  Status s = manager.ApplyConfig(Config({MakeModel("m", dir.path(), Specific({1, 2}), {{"stable", 1}, {"canary", 2}})}));
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(Settle(manager));
  EXPECT_EQ(Serve(manager, "m", std::nullopt, "stable"), 1.0f);
  StatusOr<ServableHandle> r = manager.Resolve("m", std::nullopt, "canary");
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(r.status().message(), "Servable not found for request: Specific(m, 2)");

  // Moving an existing label still needs its target available.
  s = manager.ApplyConfig(Config({MakeModel("m", dir.path(), Specific({1, 2}), {{"stable", 2}, {"canary", 2}})}));
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), kUnavailable);
  EXPECT_EQ(Serve(manager, "m", std::nullopt, "stable"), 1.0f);

  WriteVersion(dir.path(), 2);
  ASSERT_TRUE(Settle(manager));
  EXPECT_EQ(Serve(manager, "m", std::nullopt, "canary"), 2.0f);
  s = manager.ApplyConfig(Config({MakeModel("m", dir.path(), Specific({1, 2}), {{"stable", 2}, {"canary", 2}})}));
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(Serve(manager, "m", std::nullopt, "stable"), 2.0f);
}

// Runs `flip(i)` every few milliseconds for about 1.5 s while 4 threads resolve and run
// requests with `request`; every request must succeed.
template <typename Flip, typename Request>
void HammerWhileFlipping(ModelManager& manager, Flip flip, Request request) {
  std::atomic<bool> done{false};
  std::atomic<int64_t> ok{0}, failed{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&] {
      while (!done.load()) {
        const float y = request();
        if (y == 1.0f || y == 2.0f) {
          ok.fetch_add(1);
        } else {
          failed.fetch_add(1);
        }
      }
    });
  }
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
  int flips = 0;
  while (std::chrono::steady_clock::now() < end) {
    flip(flips++);
    if (flips % 4 == 0) manager.PollNow();
    std::this_thread::sleep_for(std::chrono::milliseconds(15));
  }
  done.store(true);
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(failed.load(), 0) << ok.load() << " requests succeeded over " << flips << " flips";
  EXPECT_GT(ok.load(), 0);
  EXPECT_GT(flips, 10);
}

TEST(ModelManagerTransitions, SpecificPolicyRollbackNeverFailsARequest) {
  ScratchDir dir;
  WriteVersion(dir.path(), 1);
  WriteVersion(dir.path(), 2);
  ModelManager manager(ManualOptions());
  ASSERT_TRUE(manager.ApplyConfig(Config({MakeModel("m", dir.path(), Specific({1}))})).ok());
  ASSERT_TRUE(Settle(manager));
  std::atomic<int> bad_apply{0};
  HammerWhileFlipping(
      manager,
      [&](int i) {
        const int64_t v = i % 2 == 0 ? 2 : 1;
        if (!manager.ApplyConfig(Config({MakeModel("m", dir.path(), Specific({v}))})).ok()) bad_apply.fetch_add(1);
      },
      [&] { return Serve(manager, "m"); });
  EXPECT_EQ(bad_apply.load(), 0);
  ASSERT_TRUE(manager.ApplyConfig(Config({MakeModel("m", dir.path(), Specific({1}))})).ok());
  ASSERT_TRUE(Settle(manager));
  EXPECT_EQ(Serve(manager, "m"), 1.0f);  // rolled back
  EXPECT_EQ(StateOf(manager, "m", 2), VersionState::kEnd);
}

TEST(ModelManagerLabels, LabelFlipsNeverFailARequest) {
  ScratchDir dir;
  WriteVersion(dir.path(), 1);
  WriteVersion(dir.path(), 2);
  ModelManager manager(ManualOptions());
  ASSERT_TRUE(manager.ApplyConfig(Config({MakeModel("m", dir.path(), Specific({1, 2}))})).ok());
  ASSERT_TRUE(Settle(manager));
  ASSERT_TRUE(manager.ApplyConfig(Config({MakeModel("m", dir.path(), Specific({1, 2}), {{"stable", 1}})})).ok());
  std::atomic<int> bad_apply{0};
  HammerWhileFlipping(
      manager,
      [&](int i) {
        const int64_t v = i % 2 == 0 ? 2 : 1;
        if (!manager.ApplyConfig(Config({MakeModel("m", dir.path(), Specific({1, 2}), {{"stable", v}})})).ok()) {
          bad_apply.fetch_add(1);
        }
      },
      [&] { return Serve(manager, "m", std::nullopt, "stable"); });
  EXPECT_EQ(bad_apply.load(), 0);
}

TEST(ModelManagerTransitions, LatestOneUnloadsTheOldVersionOnlyOnceTheNewOneIsAvailable) {
  ScratchDir dir;
  WriteVersion(dir.path(), 1);
  ModelManager manager(ManualOptions());
  ASSERT_TRUE(manager.ApplyConfig(Config({MakeModel("m", dir.path())})).ok());
  ASSERT_TRUE(Settle(manager));
  // A long warm-up keeps version 2 loading for a while.
  std::string row = "[";
  for (int i = 0; i < 200; ++i) row += std::string(i ? "," : "") + "1.5";
  row += "]";
  std::string warmup = "[";
  for (size_t i = 0; i < kMaxWarmupRequests; ++i) warmup += std::string(i ? "," : "") + R"({"inputs": {"x": )" + row + "}}";
  warmup += "]";
  WriteVersion(dir.path(), 2, {{std::string(kWarmupRequestsAsset), warmup}});
  manager.PollNow();
  bool saw_loading = false;
  const bool done = WaitFor([&] {
    StatusOr<std::vector<VersionStatusInfo>> status = manager.GetModelStatus("m");  // one consistent view
    if (!status.ok()) {
      ADD_FAILURE() << status.status().ToString();
      return true;
    }
    std::map<int64_t, VersionState> states;
    for (const VersionStatusInfo& s : *status) states[s.version] = s.state;
    const bool any_available = states[1] == VersionState::kAvailable || states[2] == VersionState::kAvailable;
    EXPECT_TRUE(any_available);
    if (states[2] != VersionState::kAvailable) {
      EXPECT_EQ(states[1], VersionState::kAvailable);  // never unloaded before 2 is available
      saw_loading = true;
    }
    return states[1] == VersionState::kEnd;
  }, std::chrono::seconds(60));  // a slow warm-up on purpose; generous for loaded sanitizer runs
  EXPECT_TRUE(done);
  EXPECT_TRUE(saw_loading);
  EXPECT_EQ(Serve(manager, "m"), 2.0f);
}

TEST(ModelManagerTransitions, LatestTransitionNeverLeavesZeroVersions) {
  ScratchDir dir;
  WriteVersion(dir.path(), 1);
  ModelManager manager(ManualOptions());
  ASSERT_TRUE(manager.ApplyConfig(Config({MakeModel("m", dir.path())})).ok());
  ASSERT_TRUE(Settle(manager));
  std::atomic<bool> done{false};
  std::atomic<int64_t> failed{0};
  std::atomic<float> last{0.0f};
  std::atomic<bool> went_back{false};
  std::thread client([&] {
    while (!done.load()) {
      const float y = Serve(manager, "m");
      if (y < 0) failed.fetch_add(1);
      if (y < last.load()) went_back.store(true);
      last.store(y);
    }
  });
  WriteVersion(dir.path(), 2);
  manager.PollNow();
  EXPECT_TRUE(manager.WaitUntilIdle(kIdleTimeout));
  EXPECT_TRUE(WaitFor([&] { return last.load() == 2.0f; }));
  done.store(true);
  client.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_FALSE(went_back.load());
  EXPECT_EQ(StateOf(manager, "m", 1), VersionState::kEnd);  // unloaded once 2 was available
}

}  // namespace
}  // namespace lockstep
