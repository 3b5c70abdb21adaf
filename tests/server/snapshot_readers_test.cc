// What reads the model manager's serving snapshot from the request path (the readiness probe,
// the /metrics scrape) stays valid while configs change underneath: each reader holds the
// snapshot it reads. (A range-for over `Snapshot()->models` freed it before the loop body ran,
// and a scrape during a reload crashed the server: found by ShadowTrafficTest under load.)
// Run under ASan, a reader of a freed snapshot fails here.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "server/health.h"
#include "server/serving_metrics.h"
#include "tests/model_store/manager_test_util.h"

namespace lockstep {
namespace {

using namespace store_test;  // NOLINT: test helpers

TEST(SnapshotReadersTest, ProbesAndScrapesWhileConfigsChange) {
  ScratchDir dir;
  WriteVersion(dir.path() / "a", 1);
  WriteVersion(dir.path() / "b", 1);
  ModelManager manager(ManualOptions());
  ASSERT_TRUE(manager.ApplyConfig(Config({MakeModel("a", dir.path() / "a")})).ok());
  ASSERT_TRUE(Settle(manager));
  ServerHealth health(manager);
  health.SetStarted();
  ServingMetrics metrics(manager);

  // Each config swaps the snapshot; model "b" comes and goes, so names in it are freed.
  std::atomic<bool> stop{false};
  std::thread reconfigure([&] {
    for (int i = 0; !stop.load(); ++i) {
      std::vector<ModelConfig> models = {MakeModel("a", dir.path() / "a")};
      if (i % 2 == 0) models.push_back(MakeModel("b", dir.path() / "b"));
      ASSERT_TRUE(manager.ApplyConfig(Config(std::move(models))).ok());
    }
  });
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
  int reads = 0;
  while (std::chrono::steady_clock::now() < until) {
    const Status ready = health.Ready();
    EXPECT_TRUE(ready.ok() || ready.code() == StatusCode::kUnavailable) << ready.ToString();
    EXPECT_NE(metrics.Render().find("lockstep_model_version_state"), std::string::npos);
    ++reads;
  }
  stop.store(true);
  reconfigure.join();
  EXPECT_GT(reads, 0);
}

}  // namespace
}  // namespace lockstep
