// Relu, Gelu, Sigmoid, Tanh, Softmax and LogSoftmax against float64 references.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "runtime/activation.h"
#include "runtime/matmul/gemm_path.h"
#include "runtime/op_registry.h"
#include "tests/runtime/op_test_util.h"

namespace lockstep {
namespace {

using op_test::ExpectError;
using op_test::ExpectNear;
using op_test::kU;
using op_test::RandomTensor;
using op_test::RunOk;
using op_test::ToDouble;

using op_test::kNaN;

struct ActivationCase {
  const char* op;
  Activation act;
  double (*ref)(double);
};

const ActivationCase kActivations[] = {
    {"Relu", Activation::kRelu, [](double x) { return x < 0 ? 0.0 : x; }},
    {"Gelu", Activation::kGelu,
     [](double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }},
    {"Sigmoid", Activation::kSigmoid, [](double x) { return 1.0 / (1.0 + std::exp(-x)); }},
    {"Tanh", Activation::kTanh, [](double x) { return std::tanh(x); }},
    {"Relu6", Activation::kRelu6, [](double x) { return x < 0 ? 0.0 : (x > 6 ? 6.0 : x); }},
    {"Elu", Activation::kElu, [](double x) { return x > 0 ? x : std::expm1(x); }},
    {"Selu", Activation::kSelu,
     [](double x) { return 1.0507009873554804934193349852946 * (x > 0 ? x : 1.6732632423543772848170429916717 * std::expm1(x)); }},
    {"Silu", Activation::kSilu, [](double x) { return x / (1.0 + std::exp(-x)); }},
};

const Shape kShapes[] = {{0, 5}, {1}, {7}, {7, 17}, {3, 33}, {2, 1, 15}, {300, 333}};

TEST(OpsActivationTest, ElementwiseMatchesReference) {
  uint64_t seed = 1;
  for (const ActivationCase& c : kActivations) {
    for (const Shape& shape : kShapes) {
      Tensor x = RandomTensor(shape, seed++, -8, 8);
      Tensor out = RunOk(c.op, {x}).at(0);
      std::vector<double> want, tol;
      for (double v : ToDouble(x)) {
        want.push_back(c.ref(v));
        // libm's float functions are within a few ulps; gelu's 1 + erf(x) cancels for negative
        // x, so its error is absolute, a few u times |x|.
        tol.push_back(4 * kU * std::max({1.0, std::fabs(v), std::fabs(c.ref(v))}));
      }
      ExpectNear(out, shape, want, tol, std::string(c.op) + " " + shape.ToString());
    }
  }
}

TEST(OpsActivationTest, ExtremeValuesAndNaN) {
  const std::vector<float> values = {-100.0f, -20.0f, -1e-30f, -0.0f, 0.0f,
                                     1e-30f,  20.0f,  100.0f,  kNaN};
  Tensor x = Tensor::FromVector<float>({int64_t(values.size())}, values);
  for (const ActivationCase& c : kActivations) {
    Tensor out = RunOk(c.op, {x}).at(0);
    std::vector<double> want, tol;
    for (float v : values) {
      want.push_back(c.ref(v));
      tol.push_back(4 * kU * std::max(1e-30, std::fabs(c.ref(v))) + 1e-37);
    }
    ExpectNear(out, x.shape(), want, tol, c.op);
  }
  // Relu keeps the sign of zero and passes NaN through.
  Tensor relu = RunOk("Relu", {x}).at(0);
  EXPECT_TRUE(std::signbit(relu.data<float>()[3]));
  EXPECT_TRUE(std::isnan(relu.data<float>()[8]));
}

TEST(OpsActivationTest, Infinities) {
  const float inf = std::numeric_limits<float>::infinity();
  Tensor x = Tensor::FromVector<float>({2}, {-inf, inf});
  auto expect = [&](const char* op, float lo, float hi) {
    Tensor out = RunOk(op, {x}).at(0);
    EXPECT_EQ(out.data<float>()[0], lo) << op;
    EXPECT_EQ(out.data<float>()[1], hi) << op;
  };
  expect("Relu", 0.0f, inf);
  expect("Gelu", 0.0f, inf);
  expect("Sigmoid", 0.0f, 1.0f);
  expect("Tanh", -1.0f, 1.0f);
  expect("Relu6", 0.0f, 6.0f);
  expect("Elu", -1.0f, inf);
  expect("Selu", static_cast<float>(-1.0507009873554804934193349852946 * 1.6732632423543772848170429916717), inf);
  // -inf * sigmoid(-inf) is -inf * 0, NaN, as PyTorch's x * sigmoid(x) gives.
  Tensor silu = RunOk("Silu", {x}).at(0);
  EXPECT_TRUE(std::isnan(silu.data<float>()[0]));
  EXPECT_EQ(silu.data<float>()[1], inf);
}

// ExpFloat (the vectorising e^x behind Sigmoid and SiLU) against float64's exp on a dense grid
// over the whole range where e^x is a normal float: within 2 ulp; and its edges.
TEST(OpsActivationTest, ExpFloatIsWithinTwoUlps) {
  double worst_ulps = 0;
  for (int i = -8733000; i <= 8872000; ++i) {
    const float x = static_cast<float>(i) * 1e-5f;
    const double want = std::exp(static_cast<double>(x));
    const float got = ExpFloat(x);
    const double ulp = std::nextafter(static_cast<float>(want), INFINITY) - static_cast<float>(want);
    worst_ulps = std::max(worst_ulps, std::fabs(static_cast<double>(got) - want) / ulp);
  }
  EXPECT_LE(worst_ulps, 2.0);
  EXPECT_EQ(ExpFloat(0.0f), 1.0f);
  EXPECT_EQ(ExpFloat(-100.0f), 0.0f);
  EXPECT_EQ(ExpFloat(-INFINITY), 0.0f);
  EXPECT_EQ(ExpFloat(89.0f), INFINITY);
  EXPECT_EQ(ExpFloat(INFINITY), INFINITY);
  EXPECT_TRUE(std::isfinite(ExpFloat(88.72f)));
  EXPECT_TRUE(std::isnan(ExpFloat(std::numeric_limits<float>::quiet_NaN())));
  // ExpFloatInRange (the sigmoids' e^x, without clamps) is ExpFloat wherever it is defined.
  for (int i = -8733000; i <= 8800000; i += 7) {
    const float x = static_cast<float>(i) * 1e-5f;
    ASSERT_EQ(ExpFloatInRange(x), ExpFloat(x)) << x;
  }
}

// Sigmoid and SiLU clamp their e^-x into ExpFloatInRange's domain and take over below -88.72:
// near and past the edges they stay within 4 ulp, or 3e-37 of the float64 value where that is
// subnormal.
TEST(OpsActivationTest, SigmoidAndSiluAtTheEdgesOfTheirExponential) {
  for (float x : {-200.0f, -89.0f, -88.72f, -88.5f, -88.0f, -87.5f, -87.3f, 86.0f, 87.3f, 87.5f, 88.5f, 89.0f, 200.0f}) {
    const double sigmoid = 1.0 / (1.0 + std::exp(-static_cast<double>(x)));
    const double silu = x * sigmoid;
    EXPECT_NEAR(Sigmoid(x), sigmoid, 4 * kU * std::fabs(sigmoid) + 3e-37) << x;
    EXPECT_NEAR(Silu(x), silu, 4 * kU * std::fabs(silu) + 3e-37) << x;
  }
}

// The activation loops are compiled for each instruction set the matmul core may run on
// (activation.cc); every one must give ApplyActivation's scalar bits, or a server on another CPU
// would answer differently from the trainer.
TEST(OpsActivationTest, EveryInstructionSetGivesTheSameBits) {
  Tensor x = RandomTensor({4099}, 11, -12, 12);
  const GemmPath before = ActiveGemmPath();
  for (GemmPath path : SupportedGemmPaths()) {
    ASSERT_TRUE(SetGemmPath(path).ok());
    for (Activation act : {Activation::kRelu, Activation::kGelu, Activation::kSigmoid, Activation::kTanh,
                           Activation::kRelu6, Activation::kElu, Activation::kSelu, Activation::kSilu,
                           Activation::kHardSwish}) {
      std::vector<float> out(static_cast<size_t>(x.num_elements()));
      ApplyActivation(act, x.data<float>().data(), out.data(), x.num_elements());
      for (size_t i = 0; i < out.size(); ++i) {
        const float want = ApplyActivation(act, x.data<float>()[i]);
        ASSERT_EQ(std::memcmp(&want, &out[i], sizeof(float)), 0)
            << ActivationName(act) << " on " << GemmPathName(path) << " at " << i;
      }
    }
  }
  // Softmax's rows too, against the first path's bits, at lengths around its 16 lanes.
  std::vector<std::vector<float>> first;
  for (GemmPath path : SupportedGemmPaths()) {
    ASSERT_TRUE(SetGemmPath(path).ok());
    size_t k = 0;
    for (int64_t n : {1, 15, 16, 17, 197, 4099}) {
      std::vector<float> out(static_cast<size_t>(n));
      SoftmaxRow(x.data<float>().data(), out.data(), n);
      if (first.size() <= k) first.push_back(out);
      ASSERT_EQ(std::memcmp(first[k].data(), out.data(), out.size() * sizeof(float)), 0)
          << "Softmax of " << n << " on " << GemmPathName(path);
      ++k;
    }
  }
  // LayerNormalize's rows, with and without scale and offset, likewise.
  const Tensor scale = RandomTensor({4099}, 12, -2, 2), offset = RandomTensor({4099}, 13, -1, 1);
  first.clear();
  for (GemmPath path : SupportedGemmPaths()) {
    ASSERT_TRUE(SetGemmPath(path).ok());
    size_t k = 0;
    for (int64_t n : {1, 15, 16, 17, 96, 197, 4099}) {
      for (bool affine : {false, true}) {
        std::vector<float> out(static_cast<size_t>(n));
        LayerNormRow(x.data<float>().data(), affine ? scale.data<float>().data() : nullptr,
                     affine ? offset.data<float>().data() : nullptr, out.data(), n, 1e-5f);
        if (first.size() <= k) first.push_back(out);
        ASSERT_EQ(std::memcmp(first[k].data(), out.data(), out.size() * sizeof(float)), 0)
            << "LayerNormalize of " << n << (affine ? " with scale and offset" : "") << " on " << GemmPathName(path);
        ++k;
      }
    }
  }
  // The GELU and SiLU derivatives and LayerNormalize's gradient (the gradients' rows), likewise.
  const Tensor dy = RandomTensor({4099}, 14, -2, 2);
  first.clear();
  for (GemmPath path : SupportedGemmPaths()) {
    ASSERT_TRUE(SetGemmPath(path).ok());
    size_t k = 0;
    for (Activation act : {Activation::kGelu, Activation::kSilu}) {
      std::vector<float> out(4099);
      ActivationDerivativeRow(act, dy.data<float>().data(), x.data<float>().data(), out.data(), 4099);
      if (first.size() <= k) first.push_back(out);
      ASSERT_EQ(std::memcmp(first[k].data(), out.data(), out.size() * sizeof(float)), 0)
          << ActivationName(act) << "'s derivative on " << GemmPathName(path);
      ++k;
    }
    for (int64_t n : {1, 17, 96, 4099}) {
      std::vector<float> out(static_cast<size_t>(n));
      LayerNormGradRow(x.data<float>().data(), dy.data<float>().data(), out.data(), n, 1e-5f);
      if (first.size() <= k) first.push_back(out);
      ASSERT_EQ(std::memcmp(first[k].data(), out.data(), out.size() * sizeof(float)), 0)
          << "LayerNormalize's gradient of " << n << " on " << GemmPathName(path);
      ++k;
    }
  }
  ASSERT_TRUE(SetGemmPath(before).ok());
}

// The float derivatives of GELU and SiLU the gradients use, against double's closed forms:
// within a few float roundings of the largest term.
TEST(OpsActivationTest, GeluAndSiluDerivativesMatchDouble) {
  const Tensor x = RandomTensor({4099}, 21, -12, 12);
  const std::vector<float> ones(4099, 1.0f);
  for (Activation act : {Activation::kGelu, Activation::kSilu}) {
    std::vector<float> out(4099);
    ActivationDerivativeRow(act, ones.data(), x.data<float>().data(), out.data(), 4099);
    for (size_t i = 0; i < out.size(); ++i) {
      const double v = x.data<float>()[i];
      double want;
      if (act == Activation::kGelu) {
        want = 0.5 * (1 + std::erf(v / std::sqrt(2.0))) + v * std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI);
      } else {
        const double sig = 1 / (1 + std::exp(-v));
        want = sig * (1 + v * (1 - sig));
      }
      ASSERT_NEAR(out[i], want, 1e-6 * (1 + std::fabs(v))) << ActivationName(act) << " at " << v;
    }
  }
}

// The ops must compute exactly ApplyActivation, which the Gemm epilogue uses.
TEST(OpsActivationTest, BitIdenticalToApplyActivation) {
  Tensor x = RandomTensor({3, 1000}, 7, -6, 6);
  for (const ActivationCase& c : kActivations) {
    Tensor out = RunOk(c.op, {x}).at(0);
    for (int64_t i = 0; i < x.num_elements(); ++i) {
      const float want = ApplyActivation(c.act, x.data<float>()[i]);
      ASSERT_EQ(std::memcmp(&want, &out.data<float>()[i], sizeof(float)), 0) << c.op << " at " << i;
    }
  }
}

// GELU's float erf (ErfFloat, a rational fit that vectorises) against float64's erf on a dense
// grid over [-6, 6]: within 4e-7 absolute, 3e-7 relative for |x| in (1e-6, 0.5); and GELU
// itself within 3e-7 of the float64 formula, relative to max(1, |x|).
TEST(OpsActivationTest, GelusFloatErfIsWithinAFewUlps) {
  double worst_abs = 0, worst_rel = 0, worst_gelu = 0;
  for (int i = -600000; i <= 600000; ++i) {
    const float x = static_cast<float>(i) * 1e-5f;
    const double want = std::erf(static_cast<double>(x));
    const double err = std::fabs(static_cast<double>(ErfFloat(x)) - want);
    worst_abs = std::max(worst_abs, err);
    if (std::fabs(x) > 1e-6f && std::fabs(x) < 0.5f) worst_rel = std::max(worst_rel, err / std::fabs(want));
    const double gelu = 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    worst_gelu = std::max(worst_gelu, std::fabs(static_cast<double>(Gelu(x)) - gelu) / std::max(1.0, std::fabs(double{x})));
  }
  EXPECT_LT(worst_abs, 4e-7);
  EXPECT_LT(worst_rel, 3e-7);
  EXPECT_LT(worst_gelu, 3e-7);
  EXPECT_EQ(ErfFloat(100.0f), 1.0f);
  EXPECT_EQ(ErfFloat(-100.0f), -1.0f);
  EXPECT_EQ(ErfFloat(0.0f), 0.0f);
  EXPECT_TRUE(std::isnan(Gelu(std::numeric_limits<float>::quiet_NaN())));
}

TEST(OpsActivationTest, ElementwiseErrors) {
  ExpectError(RunOp("Relu", std::vector<Tensor>{Tensor::FromVector<int32_t>({1}, {1})}).status(),
              StatusCode::kInvalidArgument, "Relu: input must be float32");
}

// ---- Softmax / LogSoftmax ----

std::vector<double> SoftmaxRef(const std::vector<double>& x, int64_t n, bool log) {
  std::vector<double> out(x.size());
  for (size_t r = 0; n > 0 && r < x.size() / n; ++r) {
    const double* row = x.data() + r * n;
    double max = row[0];
    for (int64_t i = 1; i < n; ++i) max = std::max(max, row[i]);
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += std::exp(row[i] - max);
    for (int64_t i = 0; i < n; ++i) {
      out[r * n + i] = log ? (row[i] - max) - std::log(sum) : std::exp(row[i] - max) / sum;
    }
  }
  return out;
}

TEST(OpsActivationTest, SoftmaxMatchesReference) {
  uint64_t seed = 50;
  for (bool log : {false, true}) {
    const char* op = log ? "LogSoftmax" : "Softmax";
    for (Shape shape : {Shape{1, 1}, Shape{0, 5}, Shape{5}, Shape{7, 17}, Shape{3, 33},
                        Shape{2, 3, 16}, Shape{40, 1000}}) {
      for (float offset : {0.0f, 1000.0f, -1000.0f}) {  // large offsets: stability
        Tensor x = RandomTensor(shape, seed++, offset - 10, offset + 10);
        Tensor out = RunOk(op, {x}, log ? AttrMap{} : AttrMap{{"axis", int64_t{-1}}}).at(0);
        const int64_t n = shape[shape.rank() - 1];
        const auto xv = ToDouble(x);
        std::vector<double> want = SoftmaxRef(xv, n, log), tol(want.size());
        for (size_t i = 0; i < want.size(); ++i) {
          // exp and the final division or subtraction each add a few u; the row maximum is
          // subtracted exactly enough that |x - max| <= 20 carries at most u * 20 absolute.
          tol[i] = log ? kU * (4 * std::fabs(want[i]) + 2 * 20 + 8)
                       : kU * (8 + 2 * 20) * want[i] + 1e-40;
        }
        ExpectNear(out, shape, want, tol, std::string(op) + " " + shape.ToString());
        if (!log && n > 0) {
          for (int64_t r = 0; r < x.num_elements() / n; ++r) {
            double sum = 0;
            for (int64_t i = 0; i < n; ++i) sum += out.data<float>()[r * n + i];
            EXPECT_NEAR(sum, 1.0, (n + 50) * kU);
          }
        }
      }
    }
  }
}

TEST(OpsActivationTest, SoftmaxNaNRowAndAxes) {
  Tensor x = Tensor::FromVector<float>({2, 3}, {1.0f, kNaN, 2.0f, 1.0f, 2.0f, 3.0f});
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    Tensor out = RunOk(op, {x}).at(0);
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(std::isnan(out.data<float>()[i])) << op;
    for (int i = 3; i < 6; ++i) EXPECT_FALSE(std::isnan(out.data<float>()[i])) << op;
    // The last axis named positively is fine; any other axis is refused with a reason.
    EXPECT_TRUE(RunOp(op, std::vector<Tensor>{x}, {{"axis", int64_t{1}}}).ok());
    ExpectError(RunOp(op, std::vector<Tensor>{x}, {{"axis", int64_t{0}}}).status(),
                StatusCode::kUnimplemented, "only the last axis");
    ExpectError(RunOp(op, std::vector<Tensor>{x}, {{"axis", int64_t{2}}}).status(),
                StatusCode::kInvalidArgument, "axis 2 is out of range");
    ExpectError(RunOp(op, std::vector<Tensor>{Tensor::Scalar<float>(1)}).status(),
                StatusCode::kInvalidArgument, "rank >= 1");
  }
}

}  // namespace
}  // namespace lockstep
