// A warmed-up Session::Run of a model exported from PyTorch allocates nothing when the shape
// repeats, its run-time shape computations (the transformer's Shape -> Gather -> Concat ->
// Reshape head split) included; a new shape may allocate, and then that one is warm too. (Warm
// means settled: 40 runs allocate nothing once five rounds in a row have not.)
// Allocations are counted by counting_new.h.
#include <gtest/gtest.h>

#include <filesystem>

#include "runtime/onnx/onnx_model.h"
#include "runtime/session.h"
#include "runtime/thread_pool.h"
#include "tests/alloc/counting_new.h"

namespace lockstep {
namespace {

const std::filesystem::path kModels = std::filesystem::path(LOCKSTEP_SOURCE_DIR) / "tests/data/onnx/pytorch";

struct OnnxCase {
  const char* name;
  Shape small, large;  // two input shapes, alternated
};

class OnnxRunAllocTest : public ::testing::TestWithParam<OnnxCase> {};

TEST_P(OnnxRunAllocTest, AWarmedUpRunOfARepeatedShapeAllocatesNothing) {
  const OnnxCase& c = GetParam();
  StatusOr<Model> model = ReadOnnxModel(kModels / c.name);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  // One thread: the matmul core's per-thread scratch grows to the largest task a thread has
  // been handed, and with several threads which thread gets which task is the scheduler's
  // choice, so when the last worker has met its largest task is not a number of runs.
  ThreadPool pool(1);
  SessionOptions options;
  options.pool = &pool;
  StatusOr<std::unique_ptr<Session>> session = Session::Create(std::move(*model), options);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  const std::string signature = (*session)->signatures()[0].name;
  const std::string input = (*session)->signatures()[0].inputs[0].key;
  std::vector<NamedTensor> small{{input, Tensor(DType::kFloat32, c.small)}};
  std::vector<NamedTensor> large{{input, Tensor(DType::kFloat32, c.large)}};
  for (float& v : small[0].tensor.mutable_data<float>()) v = 0.25f;
  for (float& v : large[0].tensor.mutable_data<float>()) v = -0.5f;
  std::vector<NamedTensor> small_out, large_out;
  // Warm until five rounds in a row allocate nothing.
  for (int round = 0, quiet = 0; quiet < 5; ++round) {
    ASSERT_LT(round, 200) << c.name << " still allocates after 200 warm-up rounds";
    const int64_t start = alloc_test::Allocations();
    ASSERT_TRUE((*session)->Run(signature, small, &small_out).ok());
    ASSERT_TRUE((*session)->Run(signature, large, &large_out).ok());
    quiet = alloc_test::Allocations() == start ? quiet + 1 : 0;
  }
  const int64_t before = alloc_test::Allocations();
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE((*session)->Run(signature, small, &small_out).ok());
    ASSERT_TRUE((*session)->Run(signature, large, &large_out).ok());
  }
  EXPECT_EQ(alloc_test::Allocations() - before, 0) << "allocations in 40 warmed-up runs of " << c.name;
}

INSTANTIATE_TEST_SUITE_P(PyTorchExports, OnnxRunAllocTest,
                         ::testing::Values(OnnxCase{"mlp", Shape{1, 20}, Shape{16, 20}},
                                           OnnxCase{"cnn", Shape{1, 3, 16, 16}, Shape{8, 3, 16, 16}},
                                           OnnxCase{"residual_gelu", Shape{1, 16}, Shape{16, 16}},
                                           OnnxCase{"transformer", Shape{1, 7, 32}, Shape{4, 19, 32}}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace lockstep
