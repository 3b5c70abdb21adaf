// float64 through the ops that gradient checks run: element-wise arithmetic, BiasAdd, the
// activations, Softmax, MatMul and Cast. Each result is compared with the same formula
// evaluated here in double, exactly where the op's order of operations is the formula's.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>

#include "runtime/graph_builder.h"
#include "runtime/op_registry.h"
#include "runtime/session.h"
#include "tests/runtime/op_test_util.h"

namespace lockstep {
namespace {

Tensor F64(const Shape& shape, std::vector<double> values) {
  return Tensor::FromVector<double>(shape, values);
}

using op_test::Run1;

TEST(OpsFloat64Test, ArithmeticBroadcastsInDouble) {
  const Tensor a = F64(Shape{2, 3}, {0.1, 0.2, 0.3, -1e300, 1e-300, 7});
  const Tensor b = F64(Shape{3}, {0.7, 3, -2});
  const Tensor sum = Run1("Add", {a, b});
  ASSERT_EQ(sum.dtype(), DType::kFloat64);
  EXPECT_EQ(sum.data<double>()[0], 0.1 + 0.7);
  EXPECT_EQ(sum.data<double>()[3], -1e300 + 0.7);
  EXPECT_EQ(Run1("Sub", {a, b}).data<double>()[1], 0.2 - 3.0);
  EXPECT_EQ(Run1("Mul", {a, b}).data<double>()[4], 1e-300 * 3.0);
  EXPECT_EQ(Run1("Div", {a, b}).data<double>()[5], 7.0 / -2.0);
  const Tensor biased = Run1("BiasAdd", {a, b});
  ASSERT_EQ(biased.dtype(), DType::kFloat64);
  EXPECT_EQ(biased.data<double>()[2], 0.3 + -2.0);
  EXPECT_FALSE(RunOp("Add", std::vector<Tensor>{a, Tensor::Scalar<float>(1)}).ok())
      << "no mixing float64 and float32";
}

TEST(OpsFloat64Test, ActivationsAndSoftmax) {
  const std::vector<double> x = {-3.5, -0.25, 0.0, 0.1, 2.0, 40.0};
  const Tensor t = F64(Shape{2, 3}, x);
  const Tensor relu = Run1("Relu", {t}), sig = Run1("Sigmoid", {t}), tanh = Run1("Tanh", {t}),
               gelu = Run1("Gelu", {t});
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(relu.data<double>()[i], x[i] < 0 ? 0.0 : x[i]);
    EXPECT_EQ(sig.data<double>()[i], 1.0 / (1.0 + std::exp(-x[i])));
    EXPECT_EQ(tanh.data<double>()[i], std::tanh(x[i]));
    EXPECT_EQ(gelu.data<double>()[i], 0.5 * x[i] * (1.0 + std::erf(x[i] * 0.70710678118654752440)));
  }
  // Sigmoid(0.1) in double differs from float's: the op really runs in double.
  EXPECT_NE(sig.data<double>()[3], static_cast<double>(1.0f / (1.0f + std::exp(-0.1f))));

  const Tensor soft = Run1("Softmax", {t});
  const Tensor log_soft = Run1("LogSoftmax", {t});
  ASSERT_EQ(soft.dtype(), DType::kFloat64);
  for (int r = 0; r < 2; ++r) {
    double sum = 0;
    for (int j = 0; j < 3; ++j) {
      const double p = soft.data<double>()[static_cast<size_t>(3 * r + j)];
      sum += p;
      EXPECT_NEAR(std::log(p), log_soft.data<double>()[static_cast<size_t>(3 * r + j)], 1e-14);
    }
    EXPECT_NEAR(sum, 1.0, 1e-15);
  }
  EXPECT_FALSE(RunOp("Relu", std::vector<Tensor>{Tensor::Scalar<int32_t>(1)}).ok());
}

TEST(OpsFloat64Test, MatMulEveryTransposeSumsInKOrder) {
  const Tensor a = F64(Shape{2, 3}, {1e-3, 2, 3, 4, 5, 6e10});
  const Tensor b = F64(Shape{3, 2}, {7, 8, 9, 1e-7, 11, 12});
  const double expected[2][2] = {{1e-3 * 7 + 2 * 9 + 3 * 11, 1e-3 * 8 + 2 * 1e-7 + 3 * 12},
                                 {4 * 7 + 5 * 9 + 6e10 * 11, 4 * 8 + 5 * 1e-7 + 6e10 * 12}};
  auto transposed = [](const Tensor& m) {
    const int64_t r = m.shape().dim(0), c = m.shape().dim(1);
    std::vector<double> v(static_cast<size_t>(r * c));
    for (int64_t i = 0; i < r; ++i) {
      for (int64_t j = 0; j < c; ++j)
        v[static_cast<size_t>(j * r + i)] = m.data<double>()[static_cast<size_t>(i * c + j)];
    }
    return Tensor::FromVector<double>(Shape{c, r}, v);
  };
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      AttrMap attrs;
      attrs.Set("transpose_a", ta);
      attrs.Set("transpose_b", tb);
      const Tensor c = Run1("MatMul", {ta ? transposed(a) : a, tb ? transposed(b) : b}, attrs);
      ASSERT_EQ(c.dtype(), DType::kFloat64);
      ASSERT_EQ(c.shape(), (Shape{2, 2}));
      for (int i = 0; i < 2; ++i) {
        for (int j = 0; j < 2; ++j)
          EXPECT_EQ(c.data<double>()[static_cast<size_t>(2 * i + j)], expected[i][j]) << ta << tb;
      }
    }
  }
  EXPECT_FALSE(RunOp("MatMul", std::vector<Tensor>{a, Tensor(DType::kFloat32, Shape{3, 2})}).ok());
}

// A float64 weight in a session is not packed for the matmul core (which has no float64).
TEST(OpsFloat64Test, MatMulWithAConstantFloat64WeightInASession) {
  GraphBuilder g;
  const std::string x = g.Input("x", DType::kFloat64, Shape{-1, 2});
  const std::string y = g.Op("MatMul", {x, g.Const("w", F64(Shape{2, 1}, {0.5, 0.25}))}, {}, "y");
  Signature sig;
  sig.name = std::string(kDefaultSignature);
  sig.inputs = {{"x", x, DType::kFloat64, Shape{-1, 2}}};
  sig.outputs = {{"y", y, DType::kFloat64, Shape{-1, 1}}};
  g.AddSignature(sig);
  StatusOr<std::unique_ptr<Session>> session = Session::Create(std::move(g).Build(), {});
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  std::vector<NamedTensor> in = {{"x", F64(Shape{1, 2}, {0.1, 0.2})}}, out;
  ASSERT_TRUE(session.value()->Run(std::string(kDefaultSignature), in, &out).ok());
  EXPECT_EQ(out[0].tensor.data<double>()[0], 0.1 * 0.5 + 0.2 * 0.25);
}

TEST(OpsFloat64Test, CastToAndFromFloat64) {
  AttrMap to64, to32, to_i32, to_i64;
  to64.Set("dtype", DType::kFloat64);
  to32.Set("dtype", DType::kFloat32);
  to_i32.Set("dtype", DType::kInt32);
  to_i64.Set("dtype", DType::kInt64);
  const Tensor widened = Run1("Cast", {Tensor::FromVector<float>(Shape{2}, {0.1f, -3.0f})}, to64);
  EXPECT_EQ(widened.data<double>()[0], static_cast<double>(0.1f));
  const double big = std::numeric_limits<double>::max();
  const Tensor narrowed =
      Run1("Cast", {F64(Shape{5}, {0.1, 1e300, -big, 0x1p128 - 0x1p104, 0x1p128 - 0x1p103})}, to32);
  EXPECT_EQ(narrowed.data<float>()[0], 0.1f);
  EXPECT_EQ(narrowed.data<float>()[1], std::numeric_limits<float>::infinity());
  EXPECT_EQ(narrowed.data<float>()[2], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(narrowed.data<float>()[3], std::numeric_limits<float>::max()) << "the largest float itself";
  EXPECT_EQ(narrowed.data<float>()[4], std::numeric_limits<float>::infinity())
      << "half an ulp above it, ties to even";
  const Tensor ints = Run1("Cast", {F64(Shape{5}, {-3.7, 1e10, -1e10, std::nan(""), 2147483647.0})}, to_i32);
  EXPECT_EQ(ints.data<int32_t>()[0], -3);
  EXPECT_EQ(ints.data<int32_t>()[1], std::numeric_limits<int32_t>::max());
  EXPECT_EQ(ints.data<int32_t>()[2], std::numeric_limits<int32_t>::min());
  EXPECT_EQ(ints.data<int32_t>()[3], 0);
  EXPECT_EQ(ints.data<int32_t>()[4], 2147483647) << "exact in double, and in range";
  const Tensor longs = Run1("Cast", {F64(Shape{2}, {0x1p63, -0x1p63})}, to_i64);
  EXPECT_EQ(longs.data<int64_t>()[0], std::numeric_limits<int64_t>::max());
  EXPECT_EQ(longs.data<int64_t>()[1], std::numeric_limits<int64_t>::min());
}

}  // namespace
}  // namespace lockstep
