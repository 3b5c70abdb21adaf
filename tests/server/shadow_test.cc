// Shadow answers are compared with the primary's: equal within 1e-5 relative for floats, equal
// for the rest, every output the primary returned present with its dtype and shape.
#include "server/shadow.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <thread>
#include <vector>

#include "tests/model_store/manager_test_util.h"

namespace lockstep {
namespace {

NamedTensor Floats(const std::string& name, std::vector<float> v) {
  return {name, Tensor::FromVector<float>(Shape{static_cast<int64_t>(v.size())}, v)};
}

bool Agrees(const std::vector<NamedTensor>& primary, const std::vector<NamedTensor>& candidate) {
  return ShadowAgrees(primary, candidate);
}

TEST(ShadowAgreesTest, ComparesEveryOutputTheClientGot) {
  const std::vector<NamedTensor> primary = {Floats("y", {1.0f, 100.0f, NAN}),
                                            {"k", Tensor::FromVector<int64_t>(Shape{2}, {3, 4})}};
  std::vector<NamedTensor> same = {{"k", Tensor::FromVector<int64_t>(Shape{2}, {3, 4})},
                                   Floats("y", {1.000001f, 100.0005f, NAN}),
                                   Floats("extra", {5.0f})};
  EXPECT_TRUE(Agrees(primary, same));
  EXPECT_FALSE(Agrees(primary, {Floats("y", {1.0f, 100.1f, NAN}), same[0]}));
  EXPECT_FALSE(Agrees(primary, {Floats("y", {1.0f, 100.0f, 0.0f}), same[0]}));
  EXPECT_FALSE(Agrees(primary, {Floats("y", {1.0f, 100.0f, NAN})}));  // "k" missing
  EXPECT_FALSE(Agrees(primary, {Floats("y", {1.0f, 100.0f}), same[0]}));
  EXPECT_FALSE(Agrees(
      primary, {Floats("y", {1.0f, 100.0f, NAN}), {"k", Tensor::FromVector<int64_t>(Shape{2}, {3, 5})}}));
  EXPECT_FALSE(Agrees(primary, {Floats("y", {1.0f, 100.0f, NAN}), Floats("k", {3.0f, 4.0f})}));
  EXPECT_TRUE(Agrees({}, same));
}

// The copy the shadow runs is its own: the request's tensors, which their connection reuses in
// place for its next request once no one else holds them, are not held by the queued copy (a
// share let go on the shadow's thread raced with that reuse under ThreadSanitizer). And the
// copy is the request's: the candidate runs on the values the request had.
TEST(ShadowRunnerTest, TheShadowRunsOnCopiesOfTheRequest) {
  using namespace store_test;  // NOLINT: test helpers
  ScratchDir dir;
  WriteVersion(dir.path() / "m", 1);  // y = x
  WriteVersion(dir.path() / "m", 2);  // y = 2x
  ModelManager manager(ManualOptions());
  // Labels name loaded versions only (as TensorFlow Serving's do): load, then label.
  ModelConfig m = MakeModel("m", dir.path() / "m", Specific({1, 2}));
  ASSERT_TRUE(manager.ApplyConfig(Config({m})).ok());
  ASSERT_TRUE(Settle(manager));
  m.labels = {{"stable", 1}, {"canary", 2}};
  m.shadow = ShadowTraffic{"canary", 0, 100};
  const Status applied = manager.ApplyConfig(Config({m}));
  ASSERT_TRUE(applied.ok()) << applied.ToString();
  ASSERT_TRUE(Settle(manager));
  StatusOr<ServableHandle> served = manager.Resolve("m", 1, std::nullopt);
  ASSERT_TRUE(served.ok()) << served.status().ToString();
  const Session& session = (*served)->session();
  const Signature* signature = session.FindSignature("serving_default");
  ASSERT_NE(signature, nullptr);
  std::vector<NamedTensor> inputs = {{signature->inputs[0].key, Tensor::FromVector<float>(Shape{1}, {1.0f})}};
  std::vector<NamedTensor> outputs;
  ASSERT_TRUE(session.Run("serving_default", inputs, &outputs).ok());
  ServingMetrics metrics(manager);

  {
    // No threads: the copy stays queued, and the request's tensors are still its own.
    ShadowRunner queued(metrics, /*threads=*/0);
    queued.MaybeShadow(manager, **served, *signature, inputs, outputs);
    EXPECT_TRUE(inputs[0].tensor.Writable(DType::kFloat32, Shape{1}));
    EXPECT_TRUE(outputs[0].tensor.Writable(outputs[0].tensor.dtype(), outputs[0].tensor.shape()));
  }
  // A full queue drops the copy, counted.
  {
    ShadowRunner full(metrics, /*threads=*/0, /*max_queue=*/0);
    full.MaybeShadow(manager, **served, *signature, inputs, outputs);
    EXPECT_NE(metrics.Render().find(R"(lockstep_shadow_requests_total{model="m",version="2",result="dropped"} 1)"),
              std::string::npos)
        << metrics.Render();
  }
  // Run: version 2 on the request's x = 1 says 2 where version 1 said 1.
  ShadowRunner shadow(metrics);
  shadow.MaybeShadow(manager, **served, *signature, inputs, outputs);
  const auto counted = [&] {
    return metrics.Render().find(R"(lockstep_shadow_requests_total{model="m",version="2",result="disagree"} 1)") !=
           std::string::npos;
  };
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!counted() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(counted()) << metrics.Render();
}

}  // namespace
}  // namespace lockstep
