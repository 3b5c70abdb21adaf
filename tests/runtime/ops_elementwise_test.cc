// The element-wise ops the ONNX importer translates onto (elementwise_ops.cc) and the integer
// side of Add, Sub, Mul, Div: values against the std:: functions or hand-worked answers, numpy
// broadcasting (against BroadcastSource, which follows the definition), scalars, empty
// tensors, NaN handling and dtype errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
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
using op_test::KernelStatus;
using op_test::RunOk;

constexpr double kNaN64 = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf64 = std::numeric_limits<double>::infinity();

template <typename T>
Tensor Vec(std::vector<T> v) {
  return Tensor::FromVector<T>({static_cast<int64_t>(v.size())}, v);
}

using op_test::Values;

using op_test::Run1;

Status RunStatus(const char* op, const std::vector<Tensor>& inputs, const AttrMap& attrs = {}) {
  return RunOp(op, inputs, attrs).status();
}


// Both shape inference (through RunOp) and the kernel on its own refuse the inputs.
void ExpectRefused(const char* op, const std::vector<Tensor>& inputs, std::string_view fragment,
                   const AttrMap& attrs = {}) {
  SCOPED_TRACE(op);
  ExpectError(RunStatus(op, inputs, attrs), StatusCode::kInvalidArgument, fragment);
  ExpectError(KernelStatus(op, inputs, attrs), StatusCode::kInvalidArgument, fragment);
}

// Same bits, so that NaN == NaN and -0 != +0.
template <typename T>
void ExpectSameValues(const std::vector<T>& got, const std::vector<T>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool same = std::isnan(got[i]) ? std::isnan(want[i])
                                         : got[i] == want[i] && std::signbit(got[i]) == std::signbit(want[i]);
    EXPECT_TRUE(same) << what << " element " << i << ": got " << got[i] << ", want " << want[i];
  }
}

// ---- Unary maths ----

struct UnaryMath {
  const char* op;
  double (*ref)(double);
  bool positive_domain;  // Sqrt, Log: also checked below on negatives and zero
};

const std::vector<UnaryMath>& UnaryMaths() {
  static const std::vector<UnaryMath> ops = {
      {"Sqrt", [](double x) { return std::sqrt(x); }, true},
      {"Exp", [](double x) { return std::exp(x); }, false},
      {"Log", [](double x) { return std::log(x); }, true},
      {"Reciprocal", [](double x) { return 1.0 / x; }, false},
      {"Floor", [](double x) { return std::floor(x); }, false},
      {"Ceil", [](double x) { return std::ceil(x); }, false},
      {"Erf", [](double x) { return std::erf(x); }, false},
      {"Sin", [](double x) { return std::sin(x); }, false},
      {"Cos", [](double x) { return std::cos(x); }, false},
  };
  return ops;
}

TEST(OpsElementwiseTest, BitwiseOpsOnIntegersBroadcastAndRefuseFloats) {
  const Tensor a = Tensor::FromVector<int32_t>(Shape{2, 2}, {0x0f0f, -1, 6, -8});
  const Tensor b = Tensor::FromVector<int32_t>(Shape{2}, {0x00ff, 3});
  EXPECT_EQ(Values<int32_t>(Run1("BitwiseAnd", {a, b})), (std::vector<int32_t>{0x000f, 3, 6, 0}));
  EXPECT_EQ(Values<int32_t>(Run1("BitwiseOr", {a, b})), (std::vector<int32_t>{0x0fff, -1, 0xff | 6, -5}));
  EXPECT_EQ(Values<int32_t>(Run1("BitwiseXor", {a, b})), (std::vector<int32_t>{0x0ff0, -4, 0xff ^ 6, -5}));
  const Tensor u = Tensor::FromVector<uint8_t>(Shape{3}, {0, 0x5a, 255});
  EXPECT_EQ(Values<uint8_t>(Run1("BitwiseXor", {u, Tensor::FromVector<uint8_t>(Shape{}, {255})})),
            (std::vector<uint8_t>{255, 0xa5, 0}));
  ExpectError(KernelStatus("BitwiseAnd", {RandomTensor({2}, 1), RandomTensor({2}, 2)}), StatusCode::kInvalidArgument,
              "BitwiseAnd: dtype float32 is not supported (int8 to int64, uint8 to uint64)");
}

TEST(OpsElementwiseTest, UnaryMathMatchesStd) {
  uint64_t seed = 1;
  for (const UnaryMath& m : UnaryMaths()) {
    for (Shape shape : {Shape{}, Shape{0, 3}, Shape{7}, Shape{3, 50, 41}}) {
      Tensor x = m.positive_domain ? RandomTensor(shape, seed++, 0.01f, 20.0f) : RandomTensor(shape, seed++, -6, 6);
      // float32: against the float64 function, within the libm's error plus one rounding.
      std::vector<double> want;
      for (double v : op_test::ToDouble(x)) want.push_back(m.ref(v));
      ExpectNear(Run1(m.op, {x}), shape, want, 4 * kU, 0.0, std::string(m.op) + " " + shape.ToString());
      // float64: the very same std:: call, so the very same bits.
      std::vector<double> xd(want.size());
      for (size_t i = 0; i < xd.size(); ++i) xd[i] = x.data<float>()[i];
      std::vector<double> want64;
      for (double v : xd) want64.push_back(m.ref(v));
      Tensor out64 = Run1(m.op, {Tensor::FromVector<double>(shape, xd)});
      ExpectSameValues(Values<double>(out64), want64, std::string(m.op) + " float64");
    }
  }
}

TEST(OpsElementwiseTest, UnaryMathSpecialValues) {
  auto f = [](const char* op, std::vector<float> in) { return Values<float>(Run1(op, {Vec<float>(in)})); };
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  ExpectSameValues(f("Sqrt", {-1.0f, 0.0f, -0.0f, inf}), {nan, 0.0f, -0.0f, inf}, "Sqrt");
  ExpectSameValues(f("Log", {0.0f, -1.0f, 1.0f, inf}), {-inf, nan, 0.0f, inf}, "Log");
  ExpectSameValues(f("Reciprocal", {0.0f, -0.0f, 4.0f, inf}), {inf, -inf, 0.25f, 0.0f}, "Reciprocal");
  ExpectSameValues(f("Floor", {-2.5f, 2.5f, -0.0f, nan}), {-3.0f, 2.0f, -0.0f, nan}, "Floor");
  ExpectSameValues(f("Ceil", {-2.5f, 2.5f, -0.5f, inf}), {-2.0f, 3.0f, -0.0f, inf}, "Ceil");
  ExpectSameValues(f("Exp", {-inf, 0.0f, 100.0f, nan}), {0.0f, 1.0f, inf, nan}, "Exp");
  ExpectSameValues(f("Erf", {-inf, 0.0f, inf}), {-1.0f, 0.0f, 1.0f}, "Erf");
}

TEST(OpsElementwiseTest, SoftplusIsStable) {
  const std::vector<double> xs = {-1000, -80, -20, -1, 0, 1e-3, 1, 20, 80, 1000};
  std::vector<double> want;  // naive log(1 + e^x) in long double, where nothing overflows here
  for (double x : xs) want.push_back(static_cast<double>(std::log1p(std::exp(static_cast<long double>(x)))));
  std::vector<float> xf(xs.begin(), xs.end());
  ExpectNear(Run1("Softplus", {Vec<float>(xf)}), {10}, want, 4 * kU, 0.0, "Softplus float32");
  Tensor out64 = Run1("Softplus", {Vec<double>(xs)});
  std::vector<double> got = Values<double>(out64);
  for (size_t i = 0; i < xs.size(); ++i) EXPECT_NEAR(got[i], want[i], 2e-15 * std::fabs(want[i])) << xs[i];
  EXPECT_TRUE(std::isnan(Values<float>(Run1("Softplus", {Vec<float>({NAN})}))[0]));
}

// ---- Neg, Abs, Sign ----

template <typename T>
void CheckIntegerSigns() {
  constexpr T kMin = std::numeric_limits<T>::min(), kMax = std::numeric_limits<T>::max();
  Tensor x = Vec<T>({-7, 0, 5, kMin, kMax});
  // -min wraps to min, as in numpy and onnxruntime (two's complement).
  EXPECT_EQ(Values<T>(Run1("Neg", {x})), (std::vector<T>{7, 0, -5, kMin, -kMax}));
  EXPECT_EQ(Values<T>(Run1("Abs", {x})), (std::vector<T>{7, 0, 5, kMin, kMax}));
  EXPECT_EQ(Values<T>(Run1("Sign", {x})), (std::vector<T>{-1, 0, 1, -1, 1}));
}

TEST(OpsElementwiseTest, NegAbsSignOnIntegers) {
  CheckIntegerSigns<int32_t>();
  CheckIntegerSigns<int64_t>();
  EXPECT_EQ(Values<int64_t>(Run1("Neg", {Tensor::Scalar<int64_t>(3)})), (std::vector<int64_t>{-3}));
}

TEST(OpsElementwiseTest, NegAbsSignOnFloats) {
  const double nan = kNaN64;
  Tensor x = Vec<double>({-2.5, -0.0, 0.0, 3.0, nan, -kInf64});
  ExpectSameValues(Values<double>(Run1("Neg", {x})), {2.5, 0.0, -0.0, -3.0, nan, kInf64}, "Neg");
  ExpectSameValues(Values<double>(Run1("Abs", {x})), {2.5, 0.0, 0.0, 3.0, nan, kInf64}, "Abs");
  ExpectSameValues(Values<double>(Run1("Sign", {x})), {-1.0, -0.0, 0.0, 1.0, nan, -1.0}, "Sign");
  Tensor xf = Vec<float>({-2.5f, 4.0f});
  EXPECT_EQ(Values<float>(Run1("Abs", {xf})), (std::vector<float>{2.5f, 4.0f}));
}

// ---- Parametric activations and Clip ----

TEST(OpsElementwiseTest, LeakyReluHardSigmoidHardSwishThresholdedRelu) {
  Tensor x = Vec<float>({-4, -3, -1, 0, 1, 2, 3, 4});
  EXPECT_EQ(Values<float>(Run1("LeakyRelu", {x})),
            (std::vector<float>{-4 * 0.01f, -3 * 0.01f, -0.01f, 0, 1, 2, 3, 4}));
  EXPECT_EQ(Values<float>(Run1("LeakyRelu", {x}, {{"alpha", 0.5}})), (std::vector<float>{-2, -1.5f, -0.5f, 0, 1, 2, 3, 4}));
  // Defaults alpha 0.2, beta 0.5: 0 from -2.5 down, 1 from 2.5 up.
  std::vector<double> hs;
  for (double v : {-4, -3, -1, 0, 1, 2, 3, 4}) hs.push_back(std::max(0.0, std::min(1.0, 0.2 * v + 0.5)));
  ExpectNear(Run1("HardSigmoid", {x}), {8}, hs, 2 * kU, 0.0, "HardSigmoid");
  EXPECT_EQ(Values<float>(Run1("HardSigmoid", {x}, {{"alpha", 0.25}, {"beta", 0.25}})),
            (std::vector<float>{0, 0, 0, 0.25f, 0.5f, 0.75f, 1, 1}));
  // x * clamp(x / 6 + 1/2): 0 up to -3, x from 3.
  ExpectNear(Run1("HardSwish", {x}), {8}, {0, 0, -1.0 / 3, 0, 2.0 / 3, 2 * 5.0 / 6, 3, 4}, 3 * kU, 0.0, "HardSwish");
  EXPECT_EQ(Values<float>(Run1("ThresholdedRelu", {x})), (std::vector<float>{0, 0, 0, 0, 0, 2, 3, 4}));
  EXPECT_EQ(Values<float>(Run1("ThresholdedRelu", {x}, {{"alpha", -1.5}})), (std::vector<float>{0, 0, -1, 0, 1, 2, 3, 4}));
  // NaN stays NaN through the clamps.
  for (const char* op : {"LeakyRelu", "HardSigmoid", "HardSwish"}) {
    EXPECT_TRUE(std::isnan(Values<double>(Run1(op, {Vec<double>({kNaN64})}))[0])) << op;
  }
  ExpectRefused("LeakyRelu", {x}, "attr 'alpha'", {{"alpha", int64_t{1}}});
}

TEST(OpsElementwiseTest, ClipFloatAndInteger) {
  Tensor x = Vec<float>({-3, -0.5f, 0.5f, 2, NAN});
  ExpectSameValues(Values<float>(Run1("Clip", {x}, {{"min", -1.0}, {"max", 1.0}})), {-1, -0.5f, 0.5f, 1, NAN}, "Clip");
  ExpectSameValues(Values<float>(Run1("Clip", {x}, {{"min", 0.0}})), {0, 0, 0.5f, 2, NAN}, "Clip min");
  ExpectSameValues(Values<float>(Run1("Clip", {x}, {{"max", 0.0}})), {-3, -0.5f, 0, 0, NAN}, "Clip max");
  ExpectSameValues(Values<float>(Run1("Clip", {x})), {-3, -0.5f, 0.5f, 2, NAN}, "Clip unbounded");
  // min > max: every element becomes max, as numpy.clip.
  EXPECT_EQ(Values<float>(Run1("Clip", {Vec<float>({-5, 5})}, {{"min", 2.0}, {"max", 1.0}})), (std::vector<float>{1, 1}));
  // Huge double bounds become infinities in float32.
  EXPECT_EQ(Values<float>(Run1("Clip", {Vec<float>({-5, 5})}, {{"min", -1e300}})), (std::vector<float>{-5, 5}));

  // Integers keep exactly the integers inside [min, max]; bounds saturate at the dtype's range.
  Tensor i32 = Vec<int32_t>({-5, 1, 2, 3, 9});
  EXPECT_EQ(Values<int32_t>(Run1("Clip", {i32}, {{"min", 1.5}, {"max", 3.0}})), (std::vector<int32_t>{2, 2, 2, 3, 3}));
  EXPECT_EQ(Values<int32_t>(Run1("Clip", {i32}, {{"min", -1e30}, {"max", 1e30}})), (std::vector<int32_t>{-5, 1, 2, 3, 9}));
  constexpr int64_t kMax64 = std::numeric_limits<int64_t>::max();
  Tensor i64 = Vec<int64_t>({std::numeric_limits<int64_t>::min(), -1, kMax64});
  EXPECT_EQ(Values<int64_t>(Run1("Clip", {i64}, {{"min", -1.0}})), (std::vector<int64_t>{-1, -1, kMax64}));
  EXPECT_EQ(Values<int64_t>(Run1("Clip", {i64}, {{"max", 1e300}})), Values<int64_t>(i64));

  ExpectRefused("Clip", {x}, "NaN", {{"min", kNaN64}});
  ExpectRefused("Clip", {x}, "attr 'max' is not of type float", {{"max", int64_t{3}}});
  ExpectRefused("Clip", {Vec<bool>({true})}, "Clip: dtype bool");
  EXPECT_FALSE(Infer("Clip", {{DType::kFloat32, {2}}}, {{"min", kNaN64}}).ok());
}

// ---- Every op on scalars and on empty tensors ----

TEST(OpsElementwiseTest, ScalarsAndEmptyTensors) {
  for (const char* op : {"Sqrt", "Exp", "Log", "Reciprocal", "Floor", "Ceil", "Erf", "Softplus", "Sin", "Cos", "Neg",
                         "Abs", "Sign", "LeakyRelu", "HardSigmoid", "HardSwish", "ThresholdedRelu", "Clip"}) {
    for (Shape shape : {Shape{}, Shape{0}, Shape{3, 0, 2}}) {
      Tensor out = Run1(op, {RandomTensor(shape, 5, 0.5f, 2.0f)});
      EXPECT_EQ(out.shape(), shape) << op;
      EXPECT_EQ(out.dtype(), DType::kFloat32) << op;
    }
  }
  for (const char* op : {"Pow", "Minimum", "Maximum", "Less", "Equal", "Add", "Div"}) {
    EXPECT_EQ(Run1(op, {Tensor::Scalar(2.0f), Tensor::Scalar(3.0f)}).shape(), Shape{}) << op;
    EXPECT_EQ(Run1(op, {RandomTensor({0, 3}, 1), RandomTensor({3}, 2)}).shape(), (Shape{0, 3})) << op;
    EXPECT_EQ(Run1(op, {RandomTensor({}, 1), RandomTensor({2, 0}, 2)}).shape(), (Shape{2, 0})) << op;
  }
  EXPECT_EQ(Values<float>(Run1("Pow", {Tensor::Scalar(2.0f), Tensor::Scalar(10.0f)})), (std::vector<float>{1024}));
  EXPECT_EQ(Run1("Not", {Tensor::FromVector<bool>({0, 2}, {})}).shape(), (Shape{0, 2}));
  EXPECT_EQ(Values<bool>(Run1("Not", {Tensor::Scalar(true)})), (std::vector<bool>{false}));
  EXPECT_EQ(Run1("Where", {Tensor::Scalar(true), RandomTensor({0}, 1), Tensor::Scalar(1.0f)}).shape(), (Shape{0}));
}

// ---- Binary ops with broadcasting ----

struct ShapeTriple {
  Shape a, b, out;
};

const std::vector<ShapeTriple>& BroadcastCases() {
  static const std::vector<ShapeTriple> cases = {
      {{7, 17}, {7, 17}, {7, 17}}, {{33}, {}, {33}},           {{}, {17}, {17}},
      {{3, 7, 17}, {7, 1}, {3, 7, 17}}, {{4, 1}, {1, 33}, {4, 33}}, {{2, 1, 5}, {3, 1}, {2, 3, 5}},
      {{300, 129}, {129}, {300, 129}},  // split over the pool
  };
  return cases;
}

TEST(OpsElementwiseTest, PowMinimumMaximumBroadcast) {
  uint64_t seed = 100;
  for (const ShapeTriple& c : BroadcastCases()) {
    Tensor a = RandomTensor(c.a, seed++, 0.1f, 3.0f), b = RandomTensor(c.b, seed++, -3.0f, 3.0f);
    const auto av = a.data<float>(), bv = b.data<float>();
    std::vector<double> pow, mn, mx;
    for (int64_t i = 0; i < c.out.num_elements(); ++i) {
      const float x = av[BroadcastSource(c.out, c.a, i)], y = bv[BroadcastSource(c.out, c.b, i)];
      pow.push_back(std::pow(static_cast<double>(x), static_cast<double>(y)));
      mn.push_back(std::min(x, y));
      mx.push_back(std::max(x, y));
    }
    const std::string what = c.a.ToString() + " " + c.b.ToString();
    ExpectNear(Run1("Pow", {a, b}), c.out, pow, 4 * kU, 0.0, "Pow " + what);
    ExpectNear(Run1("Minimum", {a, b}), c.out, mn, 0.0, 0.0, "Minimum " + what);
    ExpectNear(Run1("Maximum", {a, b}), c.out, mx, 0.0, 0.0, "Maximum " + what);
  }
  Tensor p64 = Run1("Pow", {Vec<double>({2, 9, -2, 0}), Vec<double>({0.5, 0.5, 3, -1})});
  EXPECT_EQ(Values<double>(p64), (std::vector<double>{std::pow(2.0, 0.5), 3, -8, kInf64}));
  Tensor ints = Run1("Maximum", {RandomIntTensor<int64_t>({4, 1}, 1, -100, 100), Vec<int64_t>({-5, 0, 50})});
  EXPECT_EQ(ints.shape(), (Shape{4, 3}));
  EXPECT_EQ(Values<int32_t>(Run1("Minimum", {Vec<int32_t>({-1, 7}), Tensor::Scalar<int32_t>(3)})),
            (std::vector<int32_t>{-1, 3}));
}

TEST(OpsElementwiseTest, MinimumMaximumPropagateNaN) {
  Tensor a = Vec<double>({kNaN64, 1.0, kNaN64, -kInf64});
  Tensor b = Vec<double>({1.0, kNaN64, kNaN64, 2.0});
  ExpectSameValues(Values<double>(Run1("Minimum", {a, b})), {kNaN64, kNaN64, kNaN64, -kInf64}, "Minimum");
  ExpectSameValues(Values<double>(Run1("Maximum", {a, b})), {kNaN64, kNaN64, kNaN64, 2.0}, "Maximum");
  // A NaN scalar broadcast on either side.
  Tensor x = Vec<float>({-1, 0, 1});
  for (const char* op : {"Minimum", "Maximum"}) {
    for (const Tensor& t : {Run1(op, {x, Tensor::Scalar<float>(NAN)}), Run1(op, {Tensor::Scalar<float>(NAN), x})}) {
      for (float v : Values<float>(t)) EXPECT_TRUE(std::isnan(v)) << op;
    }
  }
}

TEST(OpsElementwiseTest, ComparisonsOnInt64AndFloat) {
  // [3, 1] against [4]: every pair of {-1, 0, 5} and {-1, 0, 5, 6}.
  Tensor a = Tensor::FromVector<int64_t>({3, 1}, {-1, 0, 5});
  Tensor b = Vec<int64_t>({-1, 0, 5, 6});
  const std::vector<int64_t> av = {-1, 0, 5}, bv = {-1, 0, 5, 6};
  struct Cmp {
    const char* op;
    bool (*f)(int64_t, int64_t);
  };
  const Cmp cmps[] = {{"Equal", [](int64_t x, int64_t y) { return x == y; }},
                      {"Less", [](int64_t x, int64_t y) { return x < y; }},
                      {"Greater", [](int64_t x, int64_t y) { return x > y; }},
                      {"LessEqual", [](int64_t x, int64_t y) { return x <= y; }},
                      {"GreaterEqual", [](int64_t x, int64_t y) { return x >= y; }}};
  for (const Cmp& c : cmps) {
    Tensor out = Run1(c.op, {a, b});
    ASSERT_EQ(out.shape(), (Shape{3, 4})) << c.op;
    std::vector<bool> want;
    for (int64_t x : av) {
      for (int64_t y : bv) want.push_back(c.f(x, y));
    }
    EXPECT_EQ(Values<bool>(out), want) << c.op;
  }
  // Large int64s that a float64 comparison would call equal.
  constexpr int64_t kBig = int64_t{1} << 60;
  EXPECT_EQ(Values<bool>(Run1("Equal", {Vec<int64_t>({kBig}), Vec<int64_t>({kBig + 1})})), (std::vector<bool>{false}));
  EXPECT_EQ(Values<bool>(Run1("Less", {Vec<int64_t>({kBig}), Vec<int64_t>({kBig + 1})})), (std::vector<bool>{true}));
  // Floats: NaN is unordered and unequal to everything, itself included.
  Tensor f = Vec<float>({NAN, 1.0f, 2.0f, -0.0f});
  Tensor g = Vec<float>({NAN, 1.0f, 1.0f, 0.0f});
  EXPECT_EQ(Values<bool>(Run1("Equal", {f, g})), (std::vector<bool>{false, true, false, true}));
  EXPECT_EQ(Values<bool>(Run1("Less", {f, g})), (std::vector<bool>{false, false, false, false}));
  EXPECT_EQ(Values<bool>(Run1("GreaterEqual", {f, g})), (std::vector<bool>{false, true, true, true}));
  EXPECT_EQ(Values<bool>(Run1("Greater", {Vec<double>({0.5, 3}), Tensor::Scalar(1.0)})), (std::vector<bool>{false, true}));
  EXPECT_EQ(Values<bool>(Run1("LessEqual", {Tensor::Scalar<int32_t>(2), Vec<int32_t>({1, 2, 3})})),
            (std::vector<bool>{false, true, true}));
  EXPECT_EQ(Values<bool>(Run1("Equal", {Vec<bool>({true, false}), Tensor::Scalar(false)})), (std::vector<bool>{false, true}));
}

TEST(OpsElementwiseTest, LogicalOps) {
  Tensor a = Tensor::FromVector<bool>({2, 1}, {false, true});
  Tensor b = Vec<bool>({false, true});
  // Rows: a = false, then a = true; columns: b = false, true.
  EXPECT_EQ(Values<bool>(Run1("And", {a, b})), (std::vector<bool>{false, false, false, true}));
  EXPECT_EQ(Values<bool>(Run1("Or", {a, b})), (std::vector<bool>{false, true, true, true}));
  EXPECT_EQ(Values<bool>(Run1("Xor", {a, b})), (std::vector<bool>{false, true, true, false}));
  EXPECT_EQ(Run1("Xor", {a, b}).shape(), (Shape{2, 2}));
  EXPECT_EQ(Values<bool>(Run1("Not", {b})), (std::vector<bool>{true, false}));
  EXPECT_EQ(Values<bool>(Run1("Or", {Tensor::Scalar(false), Tensor::Scalar(true)})), (std::vector<bool>{true}));
}

// ---- Where ----

TEST(OpsElementwiseTest, WhereBroadcastsThreeWays) {
  struct Case {
    Shape c, x, y, out;
  };
  const Case cases[] = {
      {{2, 1, 1}, {1, 3, 1}, {4}, {2, 3, 4}}, {{}, {5}, {}, {5}},          {{6}, {}, {}, {6}},
      {{3, 1}, {3, 4}, {1, 4}, {3, 4}},       {{200, 1}, {1, 130}, {130}, {200, 130}},
  };
  uint64_t seed = 500;
  for (const Case& c : cases) {
    Tensor cond = RandomIntTensor<int32_t>(c.c, seed++, 0, 1);
    std::vector<bool> bits;
    for (int32_t v : cond.data<int32_t>()) bits.push_back(v != 0);
    Tensor cb = Tensor::FromVector<bool>(c.c, bits);
    Tensor x = RandomIntTensor<int64_t>(c.x, seed++, 0, 1000), y = RandomIntTensor<int64_t>(c.y, seed++, -1000, -1);
    Tensor out = Run1("Where", {cb, x, y});
    ASSERT_EQ(out.shape(), c.out);
    const auto got = out.data<int64_t>();
    for (int64_t i = 0; i < c.out.num_elements(); ++i) {
      const int64_t want = bits[BroadcastSource(c.out, c.c, i)] ? x.data<int64_t>()[BroadcastSource(c.out, c.x, i)]
                                                                  : y.data<int64_t>()[BroadcastSource(c.out, c.y, i)];
      ASSERT_EQ(got[i], want) << c.c.ToString() << " " << c.x.ToString() << " " << c.y.ToString() << " at " << i;
    }
  }
  // Every non-string dtype, bit for bit.
  Tensor cond = Vec<bool>({true, false});
  EXPECT_EQ(Values<float>(Run1("Where", {cond, Vec<float>({1, 2}), Tensor::Scalar(-1.0f)})), (std::vector<float>{1, -1}));
  EXPECT_EQ(Values<bool>(Run1("Where", {cond, Tensor::Scalar(false), Tensor::Scalar(true)})), (std::vector<bool>{false, true}));
  EXPECT_EQ(Values<int32_t>(Run1("Where", {cond, Vec<int32_t>({1, 2}), Vec<int32_t>({3, 4})})), (std::vector<int32_t>{1, 4}));
  Tensor bf = Run1("Where", {cond, Tensor::Scalar(FloatToBfloat16(1.5f)), Tensor::Scalar(FloatToBfloat16(-2.0f))});
  ASSERT_EQ(bf.dtype(), DType::kBFloat16);
  EXPECT_EQ(op_test::ToDouble(bf), (std::vector<double>{1.5, -2.0}));
  ExpectSameValues(Values<double>(Run1("Where", {cond, Tensor::Scalar(kNaN64), Tensor::Scalar(-0.0)})), {kNaN64, -0.0}, "Where");
}

// ---- Integer Add, Sub, Mul, Div ----

TEST(OpsElementwiseTest, IntegerArithmeticTruncatesAndRefusesBadDivisions) {
  Tensor a = Vec<int64_t>({7, -7, 7, -7, 0, -1});
  Tensor b = Vec<int64_t>({2, 2, -2, -2, 3, 2});
  EXPECT_EQ(Values<int64_t>(Run1("Div", {a, b})), (std::vector<int64_t>{3, -3, -3, 3, 0, 0}));
  EXPECT_EQ(Values<int64_t>(Run1("Add", {a, Tensor::Scalar<int64_t>(10)})), (std::vector<int64_t>{17, 3, 17, 3, 10, 9}));
  EXPECT_EQ(Values<int64_t>(Run1("Sub", {Tensor::Scalar<int64_t>(1), a})), (std::vector<int64_t>{-6, 8, -6, 8, 1, 2}));
  EXPECT_EQ(Values<int64_t>(Run1("Mul", {a, b})), (std::vector<int64_t>{14, -14, -14, 14, 0, -2}));
  // Shape arithmetic as exported models do it: [N, C] sizes divided by a broadcast scalar.
  Tensor dims = Tensor::FromVector<int32_t>({2, 2}, {-9, 9, 10, -10});
  EXPECT_EQ(Values<int32_t>(Run1("Div", {dims, Tensor::Scalar<int32_t>(4)})), (std::vector<int32_t>{-2, 2, 2, -2}));
  EXPECT_EQ(Values<int32_t>(Run1("Div", {dims, Vec<int32_t>({-4, 3})})), (std::vector<int32_t>{2, 3, -2, -3}));

  ExpectRefused("Div", {a, Tensor::Scalar<int64_t>(0)}, "division by zero");
  ExpectRefused("Div", {Vec<int32_t>({1, 2}), Vec<int32_t>({1, 0})}, "division by zero");
  // min / -1 does not fit; refused, not wrapped or trapped. Only where the two elements meet.
  constexpr int32_t kMin32 = std::numeric_limits<int32_t>::min();
  constexpr int64_t kMin64 = std::numeric_limits<int64_t>::min();
  ExpectRefused("Div", {Vec<int32_t>({5, kMin32}), Tensor::Scalar<int32_t>(-1)}, "overflow");
  ExpectRefused("Div", {Tensor::Scalar<int64_t>(kMin64), Vec<int64_t>({2, -1})}, "overflow");
  EXPECT_EQ(Values<int32_t>(Run1("Div", {Vec<int32_t>({kMin32, 6}), Vec<int32_t>({1, -1})})),
            (std::vector<int32_t>{kMin32, -6}));
  EXPECT_EQ(Values<int64_t>(Run1("Div", {Vec<int64_t>({kMin64}), Vec<int64_t>({2})})), (std::vector<int64_t>{kMin64 / 2}));
  // An empty output computes nothing, but a zero divisor is still refused.
  ExpectError(RunStatus("Div", {Tensor::FromVector<int32_t>({0, 2}, {}), Vec<int32_t>({1, 0})}),
              StatusCode::kInvalidArgument, "division by zero");
}

// ---- Errors and inference ----

TEST(OpsElementwiseTest, DTypeErrorsNameTheOp) {
  Tensor f = Vec<float>({1, 2});
  Tensor i = Vec<int32_t>({1, 2});
  Tensor b = Vec<bool>({true, false});
  ExpectRefused("Sqrt", {i}, "Sqrt: dtype int32 is not supported");
  ExpectRefused("HardSwish", {b}, "HardSwish: dtype bool");
  ExpectRefused("Neg", {b}, "Neg: dtype bool");
  ExpectRefused("Not", {f}, "Not: dtype float32 is not supported (bool)");
  ExpectRefused("Pow", {b, b}, "Pow: dtype bool");
  ExpectRefused("Pow", {f, Vec<double>({2, 2})}, "Pow: inputs must have the same dtype, got float32 and float64");
  ExpectRefused("Maximum", {f, i}, "Maximum: inputs must have the same dtype");
  ExpectRefused("Minimum", {b, b}, "Minimum: dtype bool");
  ExpectRefused("Less", {b, b}, "Less: dtype bool");
  ExpectRefused("And", {f, f}, "And: dtype float32");
  ExpectRefused("Equal", {i, Vec<int64_t>({1, 2})}, "Equal: inputs");
  ExpectRefused("Where", {f, f, f}, "Where: condition must be bool");
  ExpectRefused("Where", {b, f, i}, "Where: x and y must have the same dtype");
  Tensor s = Tensor::FromVector<std::string>({2}, {"a", "b"});
  ExpectRefused("Where", {b, s, s}, "Where: dtype string");
  ExpectRefused("Xor", {b, Vec<bool>({true, false, true})}, "Xor: shapes [2] and [3] cannot be broadcast");
  ExpectRefused("Where", {b, Vec<float>({1, 2, 3}), f}, "Where: shapes");
  ExpectError(RunStatus("Exp", {f, f}), StatusCode::kInvalidArgument, "inputs");
}

TEST(OpsElementwiseTest, InfersShapesAndDTypes) {
  auto infer = [](const char* op, std::vector<TensorSpec> in) {
    auto out = Infer(op, in);
    EXPECT_TRUE(out.ok()) << op << ": " << out.status().ToString();
    return out.ok() ? (*out)[0] : TensorSpec{};
  };
  EXPECT_EQ(infer("Less", {{DType::kInt64, {-1, 3}}, {DType::kInt64, {3}}}), (TensorSpec{DType::kBool, {-1, 3}}));
  EXPECT_EQ(infer("Pow", {{DType::kFloat64, {-1}}, {DType::kFloat64, {}}}), (TensorSpec{DType::kFloat64, {-1}}));
  EXPECT_EQ(infer("Maximum", {{DType::kInt32, {-1, 1}}, {DType::kInt32, {1, 5}}}), (TensorSpec{DType::kInt32, {-1, 5}}));
  EXPECT_EQ(infer("Where", {{DType::kBool, {-1, 1}}, {DType::kFloat32, {3}}, {DType::kFloat32, {1}}}),
            (TensorSpec{DType::kFloat32, {-1, 3}}));
  EXPECT_EQ(infer("Where", {{DType::kBool, {2, 1, 1}}, {DType::kInt64, {-1, 1}}, {DType::kInt64, {4}}}),
            (TensorSpec{DType::kInt64, {2, -1, 4}}));
  EXPECT_EQ(infer("Sign", {{DType::kInt64, {-1, 2}}}), (TensorSpec{DType::kInt64, {-1, 2}}));
  EXPECT_EQ(infer("Not", {{DType::kBool, {}}}), (TensorSpec{DType::kBool, {}}));
  ExpectError(Infer("Where", {{DType::kBool, {2}}, {DType::kFloat32, {3}}, {DType::kFloat32, {-1}}}).status(),
              StatusCode::kInvalidArgument, "cannot be broadcast");
  ExpectError(Infer("Equal", {{DType::kString, {2}}, {DType::kString, {2}}}).status(), StatusCode::kInvalidArgument,
              "Equal: dtype string");
}

// Serving-only ops have no gradient; the activations model-train's layers use do (checked
// against finite differences in gradient_check_test.cc).
TEST(OpsElementwiseTest, EveryOpIsRegisteredDeterministicAndOnlyTrainedActivationsHaveGradients) {
  for (const char* op : {"Sqrt",      "Exp",       "Log",          "Reciprocal", "Floor",   "Ceil",    "Erf",
                         "Softplus",  "Sin",       "Cos",          "Neg",        "Abs",     "Sign",    "LeakyRelu",
                         "HardSigmoid", "HardSwish", "ThresholdedRelu", "Clip",   "Not",     "Pow",     "Minimum",
                         "Maximum",   "Equal",     "Less",         "Greater",    "LessEqual", "GreaterEqual", "And",
                         "Or",        "Xor",       "Where"}) {
    const OpDef* def = OpRegistry::Global().Find(op);
    ASSERT_NE(def, nullptr) << op;
    EXPECT_NE(def->compute, nullptr) << op;
    EXPECT_TRUE(def->deterministic) << op;
    const bool trained = std::string_view(op) == "LeakyRelu" || std::string_view(op) == "HardSwish";
    EXPECT_EQ(def->gradient != nullptr, trained) << op;
  }
}

}  // namespace
}  // namespace lockstep
