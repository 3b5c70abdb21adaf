// Identity, Reshape, Flatten, Concat, Cast, ArgMax and Gather. These move or convert values
// without arithmetic, so results are compared exactly against references built here.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "runtime/bfloat16.h"
#include "runtime/op_registry.h"
#include "tests/runtime/op_test_util.h"

namespace lockstep {
namespace {

using op_test::ExpectError;
using op_test::ExpectNear;
using op_test::Infer;
using op_test::RandomIntTensor;
using op_test::RandomTensor;
using op_test::RunOk;
using op_test::ToDouble;

using op_test::kNaN;
using op_test::kInf;

using op_test::Values;

Shape InferredShape(const char* op, std::vector<TensorSpec> in, const AttrMap& attrs = {}) {
  auto out = Infer(op, in, attrs);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return out.ok() ? (*out)[0].shape : Shape{-2};
}

// ---- Identity / Reshape / Flatten ----

TEST(OpsArrayTest, IdentityAliasesAnyDType) {
  Tensor f = RandomTensor({3, 5}, 1);
  Tensor out = RunOk("Identity", {f}).at(0);
  EXPECT_EQ(out.raw_data(), f.raw_data());
  EXPECT_TRUE(out.BitwiseEqual(f));
  Tensor s = Tensor::FromVector<std::string>({2}, {"a", std::string("\0b", 2)});
  EXPECT_TRUE(RunOk("Identity", {s}).at(0).BitwiseEqual(s));
  EXPECT_TRUE(OpRegistry::Global().Find("Identity")->aliases_input);
}

TEST(OpsArrayTest, ReshapeInfersAndAliases) {
  Tensor x = RandomTensor({2, 3, 4}, 1);
  Tensor out = RunOk("Reshape", {x}, {{"shape", std::vector<int64_t>{4, -1}}}).at(0);
  EXPECT_EQ(out.shape(), (Shape{4, 6}));
  EXPECT_EQ(out.raw_data(), x.raw_data());
  EXPECT_EQ(RunOk("Reshape", {x}, {{"shape", std::vector<int64_t>{24}}}).at(0).shape(),
            (Shape{24}));
  EXPECT_EQ(RunOk("Reshape", {x}, {{"shape", Shape{-1, 2, 3}}}).at(0).shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(RunOk("Reshape", {Tensor::Scalar<float>(1)}, {{"shape", std::vector<int64_t>{1, 1}}})
                .at(0)
                .shape(),
            (Shape{1, 1}));
  // Batch 0.
  EXPECT_EQ(RunOk("Reshape", {RandomTensor({0, 6}, 2)}, {{"shape", std::vector<int64_t>{-1, 3}}})
                .at(0)
                .shape(),
            (Shape{0, 3}));

  auto reshape_error = [&](std::vector<int64_t> target, const char* fragment) {
    ExpectError(RunOp("Reshape", std::vector<Tensor>{x}, {{"shape", target}}).status(),
                StatusCode::kInvalidArgument, fragment);
  };
  reshape_error({5, -1}, "cannot reshape [2,3,4] (24 elements) into [5,-1]");
  reshape_error({5, 5}, "(25 elements)");
  reshape_error({-1, -1}, "more than one -1");
  reshape_error({-2, 12}, "negative");
  ExpectError(RunOp("Reshape", std::vector<Tensor>{RandomTensor({0, 6}, 2)},
                    {{"shape", std::vector<int64_t>{-1, 0}}})
                  .status(),
              StatusCode::kInvalidArgument, "cannot reshape");
  ExpectError(RunOp("Reshape", std::vector<Tensor>{x}).status(), StatusCode::kInvalidArgument,
              "shape");

  EXPECT_EQ(InferredShape("Reshape", {{DType::kFloat32, {-1, 6}}},
                          {{"shape", std::vector<int64_t>{-1, 2, 3}}}),
            (Shape{-1, 2, 3}));
  EXPECT_EQ(InferredShape("Reshape", {{DType::kFloat32, {-1, 6}}},
                          {{"shape", std::vector<int64_t>{3, 4}}}),
            (Shape{3, 4}));
  EXPECT_EQ(
      InferredShape("Reshape", {{DType::kInt64, {4, 6}}}, {{"shape", std::vector<int64_t>{-1, 8}}}),
      (Shape{3, 8}));
}

TEST(OpsArrayTest, FlattenKeepsBatch) {
  Tensor x = RandomTensor({2, 3, 4}, 1);
  Tensor out = RunOk("Flatten", {x}).at(0);
  EXPECT_EQ(out.shape(), (Shape{2, 12}));
  EXPECT_EQ(out.raw_data(), x.raw_data());
  EXPECT_EQ(RunOk("Flatten", {RandomTensor({0, 3, 4}, 2)}).at(0).shape(), (Shape{0, 12}));
  EXPECT_EQ(RunOk("Flatten", {RandomTensor({5}, 2)}).at(0).shape(), (Shape{5, 1}));
  EXPECT_EQ(InferredShape("Flatten", {{DType::kFloat32, {-1, 3, 4}}}), (Shape{-1, 12}));
  EXPECT_EQ(InferredShape("Flatten", {{DType::kFloat32, {2, 3, -1}}}), (Shape{2, -1}));
  ExpectError(RunOp("Flatten", std::vector<Tensor>{Tensor::Scalar<float>(1)}).status(),
              StatusCode::kInvalidArgument, "axis 1 is out of range for []");
}

TEST(OpsArrayTest, FlattenAtAnAxisMultipliesEachSideAtRunTime) {
  Tensor x = RandomTensor({2, 3, 4, 5}, 3);
  EXPECT_EQ(RunOk("Flatten", {x}, {{"axis", int64_t{2}}}).at(0).shape(), (Shape{6, 20}));
  EXPECT_EQ(RunOk("Flatten", {x}, {{"axis", int64_t{0}}}).at(0).shape(), (Shape{1, 120}));
  EXPECT_EQ(RunOk("Flatten", {x}, {{"axis", int64_t{4}}}).at(0).shape(), (Shape{120, 1}));
  EXPECT_EQ(RunOk("Flatten", {x}, {{"axis", int64_t{-1}}}).at(0).shape(), (Shape{24, 5}));
  EXPECT_EQ(InferredShape("Flatten", {{DType::kFloat32, {-1, 3, -1, 5}}}, {{"axis", int64_t{2}}}), (Shape{-1, -1}));
  EXPECT_EQ(InferredShape("Flatten", {{DType::kFloat32, {2, 3, -1, 5}}}, {{"axis", int64_t{2}}}), (Shape{6, -1}));
  ExpectError(RunOp("Flatten", std::vector<Tensor>{x}, AttrMap{{"axis", int64_t{5}}}).status(),
              StatusCode::kInvalidArgument, "axis 5 is out of range for [2,3,4,5]");
}

// ---- Concat ----

// Reference concatenation by coordinates: element (..., a, ...) of the output comes from the
// input whose slice along `axis` covers a.
template <typename T>
std::vector<T> ConcatRef(const std::vector<Tensor>& ins, int axis, const Shape& out) {
  std::vector<T> result;
  for (int64_t flat = 0; flat < out.num_elements(); ++flat) {
    std::vector<int64_t> coord(out.rank());
    int64_t rest = flat;
    for (int d = out.rank() - 1; d >= 0; --d) {
      coord[d] = rest % out[d];
      rest /= out[d];
    }
    for (const Tensor& t : ins) {
      if (coord[axis] < t.shape()[axis]) {
        int64_t src = 0;
        for (int d = 0; d < out.rank(); ++d) src = src * t.shape()[d] + coord[d];
        result.push_back(t.data<T>()[src]);
        break;
      }
      coord[axis] -= t.shape()[axis];
    }
  }
  return result;
}

TEST(OpsArrayTest, ConcatMatchesReference) {
  struct Case {
    std::vector<Shape> shapes;
    int64_t axis;
    Shape out;
  };
  const Case cases[] = {
      {{{2, 3}, {5, 3}}, 0, {7, 3}},
      {{{2, 3}, {2, 17}, {2, 1}}, 1, {2, 21}},
      {{{2, 3, 4}, {2, 7, 4}}, -2, {2, 10, 4}},
      {{{2, 3, 4}, {2, 3, 33}}, -1, {2, 3, 37}},
      {{{0, 3}, {4, 3}, {0, 3}}, 0, {4, 3}},
      {{{0, 3}, {0, 5}}, 1, {0, 8}},
      {{{7}}, 0, {7}},
      {{{300, 40}, {300, 33}}, 1, {300, 73}},
  };
  uint64_t seed = 1;
  for (const Case& c : cases) {
    std::vector<Tensor> ins;
    for (const Shape& s : c.shapes) ins.push_back(RandomTensor(s, seed++));
    Tensor out = RunOk("Concat", ins, {{"axis", c.axis}}).at(0);
    ASSERT_EQ(out.shape(), c.out);
    const int axis = static_cast<int>(c.axis < 0 ? c.axis + c.out.rank() : c.axis);
    EXPECT_EQ(Values<float>(out), ConcatRef<float>(ins, axis, c.out)) << c.out.ToString();
  }
  // Other dtypes, strings included.
  std::vector<Tensor> ints{RandomIntTensor<int64_t>({2, 3}, 9, -100, 100),
                           RandomIntTensor<int64_t>({2, 2}, 10, -5, 5)};
  EXPECT_EQ(Values<int64_t>(RunOk("Concat", ints, {{"axis", int64_t{1}}}).at(0)),
            ConcatRef<int64_t>(ints, 1, {2, 5}));
  std::vector<Tensor> strs{Tensor::FromVector<std::string>({1, 2}, {"a", "b"}),
                           Tensor::FromVector<std::string>({1, 1}, {"c"})};
  EXPECT_EQ(Values<std::string>(RunOk("Concat", strs, {{"axis", int64_t{1}}}).at(0)),
            (std::vector<std::string>{"a", "b", "c"}));
}

TEST(OpsArrayTest, ConcatErrorsAndInference) {
  Tensor a = RandomTensor({2, 3}, 1);
  ExpectError(
      RunOp("Concat", std::vector<Tensor>{a, RandomTensor({3, 3}, 2)}, {{"axis", int64_t{1}}})
          .status(),
      StatusCode::kInvalidArgument, "input 1 shape [3,3] does not match input 0 shape [2,3]");
  ExpectError(RunOp("Concat", std::vector<Tensor>{a, RandomIntTensor<int32_t>({2, 3}, 2, 0, 1)},
                    {{"axis", int64_t{0}}})
                  .status(),
              StatusCode::kInvalidArgument, "int32");
  ExpectError(RunOp("Concat", std::vector<Tensor>{a, a}, {{"axis", int64_t{2}}}).status(),
              StatusCode::kInvalidArgument, "axis 2 is out of range");
  ExpectError(RunOp("Concat", std::vector<Tensor>{a, a}).status(), StatusCode::kInvalidArgument,
              "axis");
  EXPECT_EQ(InferredShape("Concat", {{DType::kFloat32, {-1, 3}}, {DType::kFloat32, {2, -1}}},
                          {{"axis", int64_t{0}}}),
            (Shape{-1, 3}));
  EXPECT_EQ(InferredShape("Concat", {{DType::kFloat32, {-1, 3}}, {DType::kFloat32, {-1, 5}}},
                          {{"axis", int64_t{1}}}),
            (Shape{-1, 8}));
}

// ---- Cast ----

TEST(OpsArrayTest, CastFloatToInt) {
  Tensor x = Tensor::FromVector<float>(
      {10}, {2.7f, -2.7f, 0.5f, -0.5f, kNaN, kInf, -kInf, 3e9f, -3e9f, 1e20f});
  EXPECT_EQ(Values<int32_t>(RunOk("Cast", {x}, {{"dtype", DType::kInt32}}).at(0)),
            (std::vector<int32_t>{2, -2, 0, 0, 0, INT32_MAX, INT32_MIN, INT32_MAX, INT32_MIN,
                                  INT32_MAX}));
  EXPECT_EQ(Values<int64_t>(RunOk("Cast", {x}, {{"dtype", DType::kInt64}}).at(0)),
            (std::vector<int64_t>{2, -2, 0, 0, 0, INT64_MAX, INT64_MIN, 3000000000, -3000000000,
                                  INT64_MAX}));
  EXPECT_EQ(Values<bool>(RunOk("Cast", {x}, {{"dtype", DType::kBool}}).at(0)),
            (std::vector<bool>{true, true, true, true, true, true, true, true, true, true}));
  Tensor edge = Tensor::FromVector<float>({3}, {2147483520.0f, 2147483648.0f, -2147483648.0f});
  EXPECT_EQ(Values<int32_t>(RunOk("Cast", {edge}, {{"dtype", DType::kInt32}}).at(0)),
            (std::vector<int32_t>{2147483520, INT32_MAX, INT32_MIN}));
}

TEST(OpsArrayTest, CastIntsAndBools) {
  Tensor big = Tensor::FromVector<int64_t>({3}, {(int64_t{1} << 32) + 5, -1, int64_t{1} << 31});
  EXPECT_EQ(Values<int32_t>(RunOk("Cast", {big}, {{"dtype", DType::kInt32}}).at(0)),
            (std::vector<int32_t>{5, -1, INT32_MIN}));
  Tensor i = Tensor::FromVector<int32_t>({4}, {16777217, -3, 0, 1});
  EXPECT_EQ(Values<float>(RunOk("Cast", {i}, {{"dtype", DType::kFloat32}}).at(0)),
            (std::vector<float>{16777216.0f, -3.0f, 0.0f, 1.0f}));
  EXPECT_EQ(Values<bool>(RunOk("Cast", {i}, {{"dtype", DType::kBool}}).at(0)),
            (std::vector<bool>{true, true, false, true}));
  Tensor b = Tensor::FromVector<bool>({2}, {true, false});
  EXPECT_EQ(Values<int64_t>(RunOk("Cast", {b}, {{"dtype", DType::kInt64}}).at(0)),
            (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(Values<float>(RunOk("Cast", {b}, {{"dtype", DType::kFloat32}}).at(0)),
            (std::vector<float>{1, 0}));
}

TEST(OpsArrayTest, CastBfloat16) {
  // Enough elements for several parallel chunks, plus the special values.
  Tensor x = RandomTensor({70001}, 5, -1e4f, 1e4f);
  x.mutable_data<float>()[0] = kNaN;
  x.mutable_data<float>()[1] = -kInf;
  x.mutable_data<float>()[2] = 1e-40f;  // subnormal, kept
  Tensor bf = RunOk("Cast", {x}, {{"dtype", DType::kBFloat16}}).at(0);
  ASSERT_EQ(bf.dtype(), DType::kBFloat16);
  for (int64_t k = 0; k < x.num_elements(); ++k) {
    ASSERT_EQ(bf.data<bfloat16>()[k], FloatToBfloat16(x.data<float>()[k])) << k;
  }
  Tensor back = RunOk("Cast", {bf}, {{"dtype", DType::kFloat32}}).at(0);
  for (int64_t k = 1; k < x.num_elements(); ++k) {
    ASSERT_EQ(back.data<float>()[k], Bfloat16ToFloat(bf.data<bfloat16>()[k])) << k;
  }
  EXPECT_TRUE(std::isnan(back.data<float>()[0]));
  Tensor ints = RunOk("Cast", {bf}, {{"dtype", DType::kInt32}}).at(0);
  for (int64_t k = 3; k < 100; ++k) {
    ASSERT_EQ(ints.data<int32_t>()[k],
              static_cast<int32_t>(Bfloat16ToFloat(bf.data<bfloat16>()[k])));
  }
  Tensor from_int =
      RunOk("Cast", {Tensor::FromVector<int32_t>({2}, {257, -3})}, {{"dtype", DType::kBFloat16}})
          .at(0);
  EXPECT_EQ(Bfloat16ToFloat(from_int.data<bfloat16>()[0]), 256.0f);  // 257 rounds to even
  EXPECT_EQ(Bfloat16ToFloat(from_int.data<bfloat16>()[1]), -3.0f);
}

TEST(OpsArrayTest, CastSameDTypeStringsAndErrors) {
  Tensor s = Tensor::FromVector<std::string>({2}, {"x", "y"});
  Tensor copy = RunOk("Cast", {s}, {{"dtype", DType::kString}}).at(0);
  EXPECT_TRUE(copy.BitwiseEqual(s));
  Tensor f = RandomTensor({0, 3}, 1);
  EXPECT_EQ(RunOk("Cast", {f}, {{"dtype", DType::kInt64}}).at(0).shape(), (Shape{0, 3}));
  Tensor g = RandomTensor({4}, 2);
  Tensor same = RunOk("Cast", {g}, {{"dtype", DType::kFloat32}}).at(0);
  EXPECT_TRUE(same.BitwiseEqual(g));
  ExpectError(RunOp("Cast", std::vector<Tensor>{s}, {{"dtype", DType::kFloat32}}).status(),
              StatusCode::kInvalidArgument, "'x' is not a number");
  ExpectError(RunOp("Cast", std::vector<Tensor>{g}).status(), StatusCode::kInvalidArgument,
              "dtype");
}

TEST(OpsArrayTest, CastBetweenNumbersAndStrings) {
  Tensor f = Tensor::FromVector<float>({6}, {0.1f, -2.5f, 1e-5f, 3e20f, kNaN, -kInf});
  Tensor text = RunOk("Cast", {f}, {{"dtype", DType::kString}}).at(0);
  EXPECT_EQ(std::vector<std::string>(text.data<std::string>().begin(), text.data<std::string>().end()),
            (std::vector<std::string>{"0.1", "-2.5", "1e-05", "3e+20", "nan", "-inf"}));
  // Every float reads back as itself, in its shortest form.
  Tensor back = RunOk("Cast", {text}, {{"dtype", DType::kFloat32}}).at(0);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(back.data<float>()[i], f.data<float>()[i]) << i;
  EXPECT_TRUE(std::isnan(back.data<float>()[4]));
  EXPECT_EQ(back.data<float>()[5], -kInf);
  Tensor words = Tensor::FromVector<std::string>({5}, {"+INF", "NaN", "42", "-7.9", "9007199254740993"});
  Tensor ints = RunOk("Cast", {words}, {{"dtype", DType::kInt64}}).at(0);
  EXPECT_EQ(ints.data<int64_t>()[0], std::numeric_limits<int64_t>::max());  // saturated, as floats cast
  EXPECT_EQ(ints.data<int64_t>()[1], 0);                                     // NaN, as floats cast
  EXPECT_EQ(ints.data<int64_t>()[2], 42);
  EXPECT_EQ(ints.data<int64_t>()[3], -7);                                    // truncated
  EXPECT_EQ(ints.data<int64_t>()[4], 9007199254740993);                      // exact, not through double
  Tensor flags = Tensor::FromVector<bool>({2}, {true, false});
  Tensor flag_text = RunOk("Cast", {flags}, {{"dtype", DType::kString}}).at(0);
  EXPECT_EQ(flag_text.data<std::string>()[0], "True");
  Tensor back_flags = RunOk("Cast", {flag_text}, {{"dtype", DType::kBool}}).at(0);
  EXPECT_TRUE(back_flags.data<bool>()[0]);
  EXPECT_FALSE(back_flags.data<bool>()[1]);
  ExpectError(RunOp("Cast", std::vector<Tensor>{Tensor::FromVector<std::string>({1}, {"+-5"})},
                    {{"dtype", DType::kInt32}})
                  .status(),
              StatusCode::kInvalidArgument, "'+-5' is not a number");
  ExpectError(RunOp("Cast", std::vector<Tensor>{Tensor::FromVector<std::string>({1}, {"1.5x"})},
                    {{"dtype", DType::kFloat64}})
                  .status(),
              StatusCode::kInvalidArgument, "'1.5x' is not a number");
}

// ---- ArgMax ----

std::vector<int64_t> ArgMaxRef(const Tensor& t, int axis) {
  const auto v = ToDouble(t);
  const Shape& s = t.shape();
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= s[d];
  for (int d = axis + 1; d < s.rank(); ++d) inner *= s[d];
  std::vector<int64_t> out;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t r = 0; r < inner; ++r) {
      int64_t best = 0;
      for (int64_t a = 0; a < s[axis]; ++a) {
        const double x = v[(o * s[axis] + a) * inner + r], b = v[(o * s[axis] + best) * inner + r];
        if (std::isnan(b)) break;
        if (std::isnan(x) || x > b) best = a;
      }
      out.push_back(best);
    }
  }
  return out;
}

TEST(OpsArrayTest, ArgMaxMatchesReference) {
  struct Case {
    Shape shape;
    int64_t axis;
  };
  const Case cases[] = {{{7, 33}, -1}, {{7, 33}, 0}, {{2, 3, 17}, 1}, {{17}, 0},
                        {{0, 5}, 1},   {{1, 1}, -1}, {{3, 4, 5}, -3}, {{500, 100}, -1}};
  uint64_t seed = 1;
  for (const Case& c : cases) {
    const int axis = static_cast<int>(c.axis < 0 ? c.axis + c.shape.rank() : c.axis);
    Shape out_shape;
    for (int d = 0; d < c.shape.rank(); ++d) {
      if (d != axis) out_shape.AddDim(c.shape[d]);
    }
    // Small integer ranges make ties common, checking that the first maximum wins.
    Tensor f = RandomIntTensor<int32_t>(c.shape, seed++, -3, 3);
    std::vector<Tensor> inputs{f, RunOk("Cast", {f}, {{"dtype", DType::kFloat32}}).at(0),
                               RunOk("Cast", {f}, {{"dtype", DType::kInt64}}).at(0),
                               RunOk("Cast", {f}, {{"dtype", DType::kBFloat16}}).at(0)};
    for (const Tensor& in : inputs) {
      Tensor out = RunOk("ArgMax", {in}, {{"axis", c.axis}}).at(0);
      ASSERT_EQ(out.dtype(), DType::kInt64);
      ASSERT_EQ(out.shape(), out_shape);
      EXPECT_EQ(Values<int64_t>(out), ArgMaxRef(in, axis))
          << c.shape.ToString() << " " << DTypeName(in.dtype());
    }
  }
}

TEST(OpsArrayTest, ArgMaxNaNAndErrors) {
  Tensor x = Tensor::FromVector<float>(
      {3, 4}, {1, kNaN, 5, kNaN, kNaN, 1, 2, 3, -kInf, -kInf, -kInf, -kInf});
  EXPECT_EQ(Values<int64_t>(RunOk("ArgMax", {x}).at(0)), (std::vector<int64_t>{1, 0, 0}));
  ExpectError(RunOp("ArgMax", std::vector<Tensor>{RandomTensor({3, 0}, 1)}).status(),
              StatusCode::kInvalidArgument, "is empty");
  ExpectError(RunOp("ArgMax", std::vector<Tensor>{Tensor::Scalar<float>(1)}).status(),
              StatusCode::kInvalidArgument, "rank >= 1");
  ExpectError(RunOp("ArgMax", std::vector<Tensor>{Tensor::FromVector<bool>({1}, {true})}).status(),
              StatusCode::kInvalidArgument, "bool");
  EXPECT_EQ(InferredShape("ArgMax", {{DType::kFloat32, {-1, 10}}}), (Shape{-1}));
}

// ---- Gather ----

TEST(OpsArrayTest, GatherMatchesReference) {
  uint64_t seed = 1;
  for (Shape params_shape : {Shape{10, 7}, Shape{33}, Shape{5, 2, 3}, Shape{1000, 17}}) {
    for (Shape idx_shape : {Shape{3, 5}, Shape{}, Shape{0}, Shape{1}, Shape{2, 1, 4}, Shape{200}}) {
      Tensor params = RandomTensor(params_shape, seed++);
      const int64_t vocab = params_shape[0], row = params.num_elements() / vocab;
      Tensor idx32 = RandomIntTensor<int32_t>(idx_shape, seed++, 0, vocab - 1);
      Tensor idx64 = RunOk("Cast", {idx32}, {{"dtype", DType::kInt64}}).at(0);
      Shape out_shape = idx_shape;
      for (int d = 1; d < params_shape.rank(); ++d) out_shape.AddDim(params_shape[d]);
      std::vector<float> want;
      for (int32_t i : idx32.data<int32_t>()) {
        for (int64_t k = 0; k < row; ++k) want.push_back(params.data<float>()[i * row + k]);
      }
      for (const Tensor& idx : {idx32, idx64}) {
        Tensor out = RunOk("Gather", {params, idx}).at(0);
        ASSERT_EQ(out.shape(), out_shape);
        EXPECT_EQ(Values<float>(out), want) << params_shape.ToString() << idx_shape.ToString();
      }
    }
  }
  Tensor words = Tensor::FromVector<std::string>({3}, {"zero", "one", "two"});
  Tensor out = RunOk("Gather", {words, Tensor::FromVector<int64_t>({2, 2}, {2, 0, 1, 1})}).at(0);
  EXPECT_EQ(Values<std::string>(out), (std::vector<std::string>{"two", "zero", "one", "one"}));
}

TEST(OpsArrayTest, GatherBadIndicesAreErrorsNotCrashes) {
  Tensor params = RandomTensor({10, 4}, 1);
  ExpectError(RunOp("Gather",
                    std::vector<Tensor>{params, Tensor::FromVector<int32_t>({2, 2}, {0, 1, 12, 3})})
                  .status(),
              StatusCode::kInvalidArgument, "indices[1,0] = 12 is out of range [0, 10)");
  ExpectError(
      RunOp("Gather", std::vector<Tensor>{params, Tensor::FromVector<int64_t>({1}, {-1})}).status(),
      StatusCode::kInvalidArgument, "= -1 is out of range [0, 10)");
  ExpectError(RunOp("Gather", std::vector<Tensor>{params, Tensor::FromVector<int64_t>({1}, {-11})},
                    AttrMap{{"negative_indices", true}})
                  .status(),
              StatusCode::kInvalidArgument, "= -11 is out of range [-10, 10)");
  ExpectError(RunOp("Gather", std::vector<Tensor>{RandomTensor({0, 4}, 1),
                                                  Tensor::FromVector<int64_t>({1}, {0})})
                  .status(),
              StatusCode::kInvalidArgument, "out of range [0, 0)");
  ExpectError(RunOp("Gather", std::vector<Tensor>{params, RandomTensor({2}, 1)}).status(),
              StatusCode::kInvalidArgument, "int32 or int64");
  EXPECT_EQ(InferredShape("Gather", {{DType::kFloat32, {-1, 64}}, {DType::kInt32, {-1, 20}}}),
            (Shape{-1, 20, 64}));
  auto too_deep =
      Infer("Gather", {{DType::kFloat32, {2, 2, 2, 2, 2}}, {DType::kInt32, {1, 1, 1, 1, 1}}});
  ExpectError(too_deep.status(), StatusCode::kInvalidArgument, "maximum rank");
}

TEST(OpsArrayTest, EveryStandardOpIsRegistered) {
  for (const char* op :
       {"Add",     "Sub",         "Mul",     "Div",       "BiasAdd",   "Normalize",
        "Relu",    "Gelu",        "Sigmoid", "Tanh",      "Softmax",   "LogSoftmax",
        "MatMul",  "FusedMatMul", "Conv2D",  "MaxPool2D", "AvgPool2D", "Identity",
        "Reshape", "Flatten",     "Concat",  "Cast",      "ArgMax",    "Gather"}) {
    const OpDef* def = OpRegistry::Global().Find(op);
    ASSERT_NE(def, nullptr) << op;
    EXPECT_NE(def->compute, nullptr) << op;
  }
}

TEST(OpsArrayTest, StringNormalizerDropsStopwordsThenChangesCase) {
  auto strings = [](Shape shape, std::vector<std::string> v) { return Tensor::FromVector<std::string>(shape, std::move(v)); };
  auto values = [](const Tensor& t) { return std::vector<std::string>(t.data<std::string>().begin(), t.data<std::string>().end()); };
  const Tensor x = strings(Shape{1, 4}, {"Monday", "tuesday", "Grüße", "MONDAY"});
  const Tensor stop = strings(Shape{1}, {"monday"});
  Tensor upper = RunOk("StringNormalizer", {x, stop}, {{"case_change_action", std::string("UPPER")}}).at(0);
  EXPECT_EQ(upper.shape(), (Shape{1, 2}));
  // Case-insensitive stopwords by default; ASCII letters change case, other bytes stay.
  EXPECT_EQ(values(upper), (std::vector<std::string>{"TUESDAY", "GRüßE"}));
  Tensor sensitive = RunOk("StringNormalizer", {x, stop}, {{"is_case_sensitive", true}}).at(0);
  EXPECT_EQ(values(sensitive), (std::vector<std::string>{"Monday", "tuesday", "Grüße", "MONDAY"}));
  // Every string a stopword: one empty string.
  Tensor none = RunOk("StringNormalizer", {strings(Shape{2}, {"a", "A"}), strings(Shape{1}, {"a"})}).at(0);
  EXPECT_EQ(none.shape(), (Shape{1}));
  EXPECT_EQ(values(none), (std::vector<std::string>{""}));
  ExpectError(RunOp("StringNormalizer", std::vector<Tensor>{x, stop}, {{"case_change_action", std::string("TITLE")}}).status(),
              StatusCode::kInvalidArgument, "case_change_action must be NONE, LOWER or UPPER");
  ExpectError(RunOp("StringNormalizer", std::vector<Tensor>{strings(Shape{2, 2}, {"a", "b", "c", "d"}), stop}).status(),
              StatusCode::kInvalidArgument, "x must be [C] or [1, C]");
}

}  // namespace
}  // namespace lockstep
