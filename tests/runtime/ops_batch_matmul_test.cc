// BatchMatMul: stacks of products with numpy's batch broadcasting and transpose flags, against
// a float64 reference; each product is the unbatched MatMul's, bit for bit, whatever the
// thread count; and the shape errors.
#include <gtest/gtest.h>

#include <cstring>

#include "op_test_util.h"
#include "runtime/op_registry.h"

namespace lockstep {
namespace {

using op_test::ExpectError;
using op_test::KernelStatus;
using op_test::RandomTensor;
using op_test::RunOk;

// Element (batch index bi in the result's batch shape, i, j) of the product, in float64.
double Reference(const Tensor& a, const Tensor& b, bool ta, bool tb, const Shape& out, int64_t flat) {
  const int r = out.rank();
  const int64_t m = out.dim(r - 2), n = out.dim(r - 1);
  const int64_t i = (flat / n) % m, j = flat % n;
  int64_t batch = flat / (m * n);
  // The batch index in each operand: right-aligned, broadcast dimensions pinned to 0.
  auto offset = [&](const Tensor& t, int64_t rows, int64_t cols) {
    const int rt = t.shape().rank();
    int64_t index = batch, off = 0, stride = rows * cols;
    for (int d = r - 3; d >= 0; --d) {
      const int64_t pos = index % out.dim(d);
      index /= out.dim(d);
      const int dt = d - (r - rt);
      if (dt < 0) continue;
      const int64_t size = t.shape().dim(dt);
      off += (size == 1 ? 0 : pos) * stride;
      stride *= size;
    }
    return off;
  };
  const int ra = a.shape().rank();
  const int64_t k = a.shape().dim(ta ? ra - 2 : ra - 1);
  const int64_t oa = offset(a, m, k), ob = offset(b, k, n);
  double sum = 0;
  for (int64_t p = 0; p < k; ++p) {
    const double x = a.data<float>()[oa + (ta ? p * m + i : i * k + p)];
    const double y = b.data<float>()[ob + (tb ? j * k + p : p * n + j)];
    sum += x * y;
  }
  return sum;
}

TEST(BatchMatMulTest, BroadcastBatchesAndTransposesMatchTheFloat64Reference) {
  struct Case {
    Shape a, b;
    bool ta, tb;
    Shape out;
  } cases[] = {
      {{2, 3, 5, 4}, {2, 3, 4, 6}, false, false, {2, 3, 5, 6}},  // attention's scores
      {{2, 3, 4, 5}, {2, 3, 4, 6}, true, false, {2, 3, 5, 6}},
      {{2, 3, 5, 4}, {2, 3, 6, 4}, false, true, {2, 3, 5, 6}},   // q k^T
      {{3, 1, 5, 4}, {1, 2, 4, 6}, false, false, {3, 2, 5, 6}},  // both sides broadcast
      {{7, 5, 4}, {4, 6}, false, false, {7, 5, 6}},               // a sequence by one matrix
      {{5, 4}, {3, 4, 6}, false, false, {3, 5, 6}},
      {{0, 5, 4}, {4, 6}, false, false, {0, 5, 6}},
  };
  for (const Case& c : cases) {
    const Tensor a = RandomTensor(c.a, 1), b = RandomTensor(c.b, 2);
    AttrMap attrs{{"transpose_a", c.ta}, {"transpose_b", c.tb}};
    std::vector<Tensor> out = RunOk("BatchMatMul", {a, b}, attrs);
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(out[0].shape(), c.out) << c.a.ToString() << " x " << c.b.ToString();
    const int64_t k = c.ta ? c.a.dim(c.a.rank() - 2) : c.a.dim(c.a.rank() - 1);
    for (int64_t e = 0; e < out[0].num_elements(); ++e) {
      // Each |a|, |b| <= 1: the float32 dot product is within (k + 1) u k of the exact one.
      EXPECT_NEAR(out[0].data<float>()[e], Reference(a, b, c.ta, c.tb, c.out, e), (k + 1) * k * op_test::kU)
          << c.a.ToString() << " x " << c.b.ToString() << " element " << e;
    }
  }
}

TEST(BatchMatMulTest, EachProductIsTheUnbatchedMatMulBitForBitOnAnyThreadCount) {
  const Tensor a = RandomTensor({6, 9, 33}, 3), b = RandomTensor({6, 33, 17}, 4);
  ThreadPool one(1), four(4);
  const Tensor batched1 = op_test::RunOn(one, "BatchMatMul", {a, b});
  const Tensor batched4 = op_test::RunOn(four, "BatchMatMul", {a, b});
  EXPECT_TRUE(batched1.BitwiseEqual(batched4));
  for (int64_t s = 0; s < 6; ++s) {
    const Tensor single = RunOk("MatMul", {a.Rows(s, 1).Reshaped({9, 33}), b.Rows(s, 1).Reshaped({33, 17})})[0];
    EXPECT_EQ(std::memcmp(single.data<float>().data(), batched4.data<float>().data() + s * 9 * 17, 9 * 17 * 4), 0) << s;
  }
}

// precision "bfloat16" (what matmul_precision "bfloat16" sets on attention's products): each
// product is MatMul's with that precision, bit for bit, and differs from the float32 one.
TEST(BatchMatMulTest, ABf16ProductIsTheUnbatchedBf16MatMul) {
  const Tensor a = RandomTensor({4, 9, 33}, 5), b = RandomTensor({4, 17, 33}, 6);
  const AttrMap bf16{{"precision", std::string("bfloat16")}, {"transpose_b", true}};
  const Tensor batched = RunOk("BatchMatMul", {a, b}, bf16)[0];
  EXPECT_FALSE(batched.BitwiseEqual(RunOk("BatchMatMul", {a, b}, {{"transpose_b", true}})[0]));
  for (int64_t s = 0; s < 4; ++s) {
    const Tensor single = RunOk("MatMul", {a.Rows(s, 1).Reshaped({9, 33}), b.Rows(s, 1).Reshaped({17, 33})}, bf16)[0];
    EXPECT_EQ(std::memcmp(single.data<float>().data(), batched.data<float>().data() + s * 9 * 17, 9 * 17 * 4), 0) << s;
  }
  ExpectError(RunOp("BatchMatMul", std::vector<Tensor>{a, b}, {{"precision", std::string("float16")}, {"transpose_b", true}}).status(),
              StatusCode::kInvalidArgument, "precision");
}

TEST(BatchMatMulTest, ShapesThatDoNotFitAreErrors) {
  ExpectError(KernelStatus("BatchMatMul", {RandomTensor({2, 5, 4}, 1), RandomTensor({2, 3, 6}, 2)}),
              StatusCode::kInvalidArgument, "inner dimensions differ");
  ExpectError(KernelStatus("BatchMatMul", {RandomTensor({2, 5, 4}, 1), RandomTensor({3, 4, 6}, 2)}),
              StatusCode::kInvalidArgument, "cannot be broadcast");
  ExpectError(KernelStatus("BatchMatMul", {RandomTensor({4}, 1), RandomTensor({4, 6}, 2)}),
              StatusCode::kInvalidArgument, "rank >= 2");
}

}  // namespace
}  // namespace lockstep
