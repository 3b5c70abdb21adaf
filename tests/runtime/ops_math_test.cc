// Add, Sub, Mul, Div (numpy broadcasting; float32, int32, int64), BiasAdd and Normalize,
// against float64 references computed here. One float32 operation is correctly rounded, so
// its error is at most u * |exact| (u = 2^-24).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "runtime/op_registry.h"
#include "tests/runtime/op_test_util.h"

namespace lockstep {
namespace {

using op_test::BroadcastSource;
using op_test::ExpectError;
using op_test::ExpectNear;
using op_test::Infer;
using op_test::kU;
using op_test::RandomIntTensor;
using op_test::RandomTensor;
using op_test::RunOk;
using op_test::ToDouble;

struct BinaryCase {
  Shape a, b, out;
};

// Shapes chosen to hit every broadcasting path: equal shapes, scalar on either side, inner and
// outer broadcasting, both sides broadcasting, rank padding, size-1 and size-0 dimensions,
// and lengths that are not multiples of a vector width.
const std::vector<BinaryCase>& MathBroadcastCases() {
  static const std::vector<BinaryCase> cases = {
      {{7, 17}, {7, 17}, {7, 17}},
      {{33}, {}, {33}},
      {{}, {17}, {17}},
      {{}, {}, {}},
      {{5, 17}, {17}, {5, 17}},
      {{3, 7, 17}, {7, 1}, {3, 7, 17}},
      {{4, 1}, {1, 33}, {4, 33}},
      {{2, 1, 5}, {3, 1}, {2, 3, 5}},
      {{1}, {7}, {7}},
      {{1, 1, 1}, {15}, {1, 1, 15}},
      {{0, 4}, {4}, {0, 4}},
      {{0, 4}, {1, 1}, {0, 4}},
      {{1, 4}, {1, 4}, {1, 4}},
      {{2, 3, 1, 7}, {3, 5, 1}, {2, 3, 5, 7}},
      {{300, 129}, {129}, {300, 129}},  // large enough to be split over the pool
  };
  return cases;
}

const char* kOps[] = {"Add", "Sub", "Mul", "Div"};

double ApplyRef(int op, double x, double y) {
  switch (op) {
    case 0: return x + y;
    case 1: return x - y;
    case 2: return x * y;
    default: return x / y;
  }
}

TEST(OpsMathTest, FloatBroadcastingMatchesReference) {
  uint64_t seed = 1;
  for (const BinaryCase& c : MathBroadcastCases()) {
    for (int op = 0; op < 4; ++op) {
      Tensor a = RandomTensor(c.a, seed++, -4, 4);
      // Divisors away from zero: magnitude in [0.5, 4], either sign.
      Tensor b = RandomTensor(c.b, seed++, 0.5f, 4.0f);
      auto bs = b.mutable_data<float>();
      for (size_t i = 0; i < bs.size(); i += 2) bs[i] = -bs[i];
      auto out = RunOk(kOps[op], {a, b});
      ASSERT_EQ(out.size(), 1u);
      const auto av = ToDouble(a), bv = ToDouble(b);
      std::vector<double> want(static_cast<size_t>(c.out.num_elements()));
      for (size_t i = 0; i < want.size(); ++i) {
        want[i] =
            ApplyRef(op, av[BroadcastSource(c.out, c.a, i)], bv[BroadcastSource(c.out, c.b, i)]);
      }
      ExpectNear(out[0], c.out, want, 1.0001 * kU, 0.0,
                 std::string(kOps[op]) + " " + c.a.ToString() + " " + c.b.ToString());
    }
  }
}

template <typename T>
void CheckIntBroadcasting(uint64_t seed) {
  for (const BinaryCase& c : MathBroadcastCases()) {
    for (int op = 0; op < 4; ++op) {
      Tensor a = RandomIntTensor<T>(c.a, seed++, -1000, 1000);
      Tensor b = RandomIntTensor<T>(c.b, seed++, 1, 50);
      auto out = RunOk(kOps[op], {a, b});
      ASSERT_EQ(out.size(), 1u);
      ASSERT_EQ(out[0].dtype(), DTypeOf<T>::value);
      ASSERT_EQ(out[0].shape(), c.out);
      auto av = a.data<T>(), bv = b.data<T>();
      auto got = out[0].data<T>();
      for (size_t i = 0; i < got.size(); ++i) {
        const T x = av[BroadcastSource(c.out, c.a, i)], y = bv[BroadcastSource(c.out, c.b, i)];
        const T want = op == 0 ? x + y : op == 1 ? x - y : op == 2 ? x * y : x / y;
        ASSERT_EQ(got[i], want) << kOps[op] << " " << c.a.ToString() << " " << c.b.ToString()
                                << " at " << i;
      }
    }
  }
}

TEST(OpsMathTest, Int32BroadcastingIsExact) { CheckIntBroadcasting<int32_t>(100); }
TEST(OpsMathTest, Int64BroadcastingIsExact) { CheckIntBroadcasting<int64_t>(200); }

TEST(OpsMathTest, IntegerEdgeCases) {
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
  constexpr int32_t kMin = std::numeric_limits<int32_t>::min();
  auto i32 = [](std::vector<int32_t> v) {
    return Tensor::FromVector<int32_t>({int64_t(v.size())}, v);
  };
  // Overflow wraps (two's complement) rather than being undefined.
  EXPECT_EQ(RunOk("Add", {i32({kMax}), i32({1})}).at(0).data<int32_t>()[0], kMin);
  EXPECT_EQ(RunOk("Sub", {i32({kMin}), i32({1})}).at(0).data<int32_t>()[0], kMax);
  EXPECT_EQ(RunOk("Mul", {i32({65536}), i32({65536})}).at(0).data<int32_t>()[0], 0);
  // Division truncates toward zero; min / -1, which does not fit, is refused like x / 0.
  Tensor q = RunOk("Div", {i32({7, -7, 7, -7, kMin}), i32({2, 2, -2, -2, 1})}).at(0);
  EXPECT_EQ(std::vector<int32_t>(q.data<int32_t>().begin(), q.data<int32_t>().end()),
            (std::vector<int32_t>{3, -3, -3, 3, kMin}));
  ExpectError(RunOp("Div", std::vector<Tensor>{i32({1, kMin}), i32({-1, -1})}).status(),
              StatusCode::kInvalidArgument, "integer overflow");
  ExpectError(RunOp("Div", std::vector<Tensor>{i32({1, 2}), i32({1, 0})}).status(),
              StatusCode::kInvalidArgument, "division by zero");
  // Float division by zero is IEEE: inf and NaN, no error.
  Tensor f =
      RunOk("Div", {Tensor::FromVector<float>({2}, {1.0f, 0.0f}), Tensor::Scalar<float>(0.0f)})
          .at(0);
  EXPECT_TRUE(std::isinf(f.data<float>()[0]));
  EXPECT_TRUE(std::isnan(f.data<float>()[1]));
}

TEST(OpsMathTest, ShiftsAndNarrowIntegers) {
  auto u8 = [](std::vector<uint8_t> v) { return Tensor::FromVector<uint8_t>({int64_t(v.size())}, v); };
  Tensor left = RunOk("ShiftLeft", {u8({1, 3, 255, 1}), u8({2, 1, 1, 8})}).at(0);
  EXPECT_EQ(std::vector<uint8_t>(left.data<uint8_t>().begin(), left.data<uint8_t>().end()),
            (std::vector<uint8_t>{4, 6, 254, 0}));  // past the width: empty
  Tensor right = RunOk("ShiftRight", {Tensor::FromVector<uint64_t>({2}, {uint64_t{1} << 63, 16}),
                                      Tensor::Scalar<uint64_t>(4)}).at(0);
  EXPECT_EQ(right.data<uint64_t>()[0], uint64_t{1} << 59);
  EXPECT_EQ(right.data<uint64_t>()[1], 1u);
  ExpectError(RunOp("ShiftLeft", std::vector<Tensor>{Tensor::Scalar<int32_t>(1), Tensor::Scalar<int32_t>(1)}).status(),
              StatusCode::kInvalidArgument, "ShiftLeft: dtype int32");
  // Unsigned arithmetic wraps; uint16 products do not overflow through int promotion.
  Tensor sum = RunOk("Add", {u8({250}), u8({10})}).at(0);
  EXPECT_EQ(sum.data<uint8_t>()[0], 4);
  Tensor product = RunOk("Mul", {Tensor::Scalar<uint16_t>(65535), Tensor::Scalar<uint16_t>(65535)}).at(0);
  EXPECT_EQ(product.data<uint16_t>()[0], 1);
  Tensor q = RunOk("Div", {Tensor::Scalar<int8_t>(-7), Tensor::Scalar<int8_t>(2)}).at(0);
  EXPECT_EQ(q.data<int8_t>()[0], -3);
}

TEST(OpsMathTest, TypeAndShapeErrors) {
  Tensor f = RandomTensor({2, 3}, 1);
  Tensor i = RandomIntTensor<int32_t>({2, 3}, 2, 0, 5);
  ExpectError(RunOp("Add", std::vector<Tensor>{f, i}).status(), StatusCode::kInvalidArgument,
              "same dtype, got float32 and int32");
  Tensor b = Tensor::FromVector<bool>({1}, {true});
  ExpectError(RunOp("Mul", std::vector<Tensor>{b, b}).status(), StatusCode::kInvalidArgument,
              "bool");
  ExpectError(RunOp("Sub", std::vector<Tensor>{f, RandomTensor({4}, 3)}).status(),
              StatusCode::kInvalidArgument, "Sub: shapes [2,3] and [4] cannot be broadcast");
  ExpectError(RunOp("Add", std::vector<Tensor>{f}).status(), StatusCode::kInvalidArgument,
              "inputs");
}

TEST(OpsMathTest, InfersUnknownDimensions) {
  auto shape_of = [](const char* op, Shape a, Shape b) {
    auto out = Infer(op, {{DType::kFloat32, a}, {DType::kFloat32, b}});
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    return out.ok() ? (*out)[0].shape : Shape{-2};
  };
  EXPECT_EQ(shape_of("Add", {-1, 3}, {3}), (Shape{-1, 3}));
  EXPECT_EQ(shape_of("Mul", {-1}, {5}), (Shape{5}));
  EXPECT_EQ(shape_of("Mul", {-1}, {1}), (Shape{-1}));
  EXPECT_EQ(shape_of("Sub", {-1, 1}, {1, -1}), (Shape{-1, -1}));
  EXPECT_EQ(shape_of("Div", {2, -1, 4}, {7, 1}), (Shape{2, 7, 4}));
  auto bad = Infer("Add", {{DType::kFloat32, {-1, 3}}, {DType::kFloat32, {4}}});
  ExpectError(bad.status(), StatusCode::kInvalidArgument, "cannot be broadcast");
}

// ---- BiasAdd ----

TEST(OpsMathTest, BiasAddMatchesReference) {
  uint64_t seed = 300;
  for (Shape x_shape : {Shape{0, 5}, Shape{1, 5}, Shape{33}, Shape{7, 17}, Shape{3, 7, 17},
                        Shape{2, 3, 4, 1}, Shape{200, 129}}) {
    const int64_t c = x_shape[x_shape.rank() - 1];
    Tensor x = RandomTensor(x_shape, seed++, -10, 10), bias = RandomTensor({c}, seed++, -10, 10);
    Tensor out = RunOk("BiasAdd", {x, bias}).at(0);
    const auto xv = ToDouble(x), bv = ToDouble(bias);
    std::vector<double> want(xv.size());
    for (size_t i = 0; i < want.size(); ++i) want[i] = xv[i] + bv[i % c];
    ExpectNear(out, x_shape, want, 1.0001 * kU, 0.0, x_shape.ToString());
  }
}

TEST(OpsMathTest, BiasAddErrorsAndInference) {
  ExpectError(
      RunOp("BiasAdd", std::vector<Tensor>{RandomTensor({2, 3}, 1), RandomTensor({4}, 2)}).status(),
      StatusCode::kInvalidArgument, "bias length 4");
  ExpectError(
      RunOp("BiasAdd", std::vector<Tensor>{RandomTensor({2, 3}, 1), RandomTensor({1, 3}, 2)})
          .status(),
      StatusCode::kInvalidArgument, "rank 1");
  ExpectError(RunOp("BiasAdd", std::vector<Tensor>{Tensor::Scalar<float>(1), RandomTensor({1}, 2)})
                  .status(),
              StatusCode::kInvalidArgument, "rank >= 1");
  auto out = Infer("BiasAdd", {{DType::kFloat32, {-1, -1}}, {DType::kFloat32, {8}}});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{-1, 8}));
}

// ---- Normalize ----

TEST(OpsMathTest, NormalizeMatchesReference) {
  struct Case {
    Shape x, mean, std, out;
  };
  const Case cases[] = {
      {{4, 17}, {17}, {17}, {4, 17}},
      {{0, 17}, {17}, {17}, {0, 17}},
      {{1, 33}, {33}, {33}, {1, 33}},
      {{2, 3, 5}, {3, 1}, {}, {2, 3, 5}},
      {{7}, {}, {7}, {7}},
      {{5, 1}, {1, 7}, {7}, {5, 7}},
      {{300, 65}, {65}, {1}, {300, 65}},
  };
  uint64_t seed = 400;
  for (const Case& c : cases) {
    Tensor x = RandomTensor(c.x, seed++, -5, 5);
    Tensor mean = RandomTensor(c.mean, seed++, -1, 1);
    Tensor std = RandomTensor(c.std, seed++, 0.25f, 3.0f);
    Tensor out = RunOk("Normalize", {x, mean, std}).at(0);
    const auto xv = ToDouble(x), mv = ToDouble(mean), sv = ToDouble(std);
    std::vector<double> want(static_cast<size_t>(c.out.num_elements()));
    for (size_t i = 0; i < want.size(); ++i) {
      want[i] = (xv[BroadcastSource(c.out, c.x, i)] - mv[BroadcastSource(c.out, c.mean, i)]) /
                sv[BroadcastSource(c.out, c.std, i)];
    }
    // Two roundings (the subtraction, then the division), each relative to the result.
    ExpectNear(out, c.out, want, 2.0001 * kU, 0.0, c.x.ToString());
  }
  ExpectError(RunOp("Normalize", std::vector<Tensor>{RandomTensor({2, 3}, 1), RandomTensor({3}, 2),
                                                     RandomTensor({2}, 3)})
                  .status(),
              StatusCode::kInvalidArgument, "Normalize: shapes [2,3] and [2] cannot be broadcast");
}

}  // namespace
}  // namespace lockstep
