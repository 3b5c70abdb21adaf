// Conv2D's, DepthwiseConv2D's and the pools' gradients: against finite differences in float64 (every padding,
// strides, overlapping windows), and the float32 kernels (through the matmul core) against the
// float64 reference loops, bit-identical whatever the thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "runtime/op_registry.h"
#include "runtime/thread_pool.h"
#include "tests/runtime/gradient_check_util.h"
#include "tests/runtime/op_test_util.h"

namespace lockstep {
namespace {

using grad_test::CheckGradients;

AttrMap WindowAttrs(std::vector<int64_t> strides, const std::string& padding,
                    std::vector<int64_t> ksize = {}) {
  AttrMap attrs;
  attrs.Set("strides", strides);
  attrs.Set("padding", padding);
  if (!ksize.empty()) attrs.Set("ksize", ksize);
  return attrs;
}

struct ConvCase {
  Shape input, filter, output;
  std::vector<int64_t> strides;
  std::string padding;
};

const std::vector<ConvCase>& ConvCases() {
  static const std::vector<ConvCase> cases = {
      {Shape{2, 5, 5, 2}, Shape{3, 3, 2, 3}, Shape{2, 3, 3, 3}, {1, 1}, "VALID"},
      {Shape{1, 5, 6, 2}, Shape{3, 3, 2, 2}, Shape{1, 3, 3, 2}, {2, 2}, "SAME"},
      {Shape{2, 4, 5, 1}, Shape{2, 3, 1, 2}, Shape{2, 2, 5, 2}, {2, 1}, "SAME"},
      {Shape{1, 3, 3, 3}, Shape{1, 1, 3, 4}, Shape{1, 3, 3, 4}, {1, 1}, "VALID"},  // pointwise
  };
  return cases;
}

TEST(ConvGradientCheck, Conv2DInputAndFilter) {
  for (const ConvCase& c : ConvCases()) {
    CheckGradients(
        {"Conv2D " + c.input.ToString() + " * " + c.filter.ToString() + " " + c.padding,
         {c.input, c.filter},
         [c](GraphBuilder& g, const std::vector<std::string>& x) {
           return std::pair{g.Op("Conv2D", {x[0], x[1]}, WindowAttrs(c.strides, c.padding)), c.output};
         }});
  }
}

// Depthwise: M = 1 and a depth multiplier of 2, strides, each padding, a window not square.
TEST(ConvGradientCheck, DepthwiseConv2DInputAndFilter) {
  const std::vector<ConvCase> cases = {
      {Shape{2, 5, 5, 3}, Shape{3, 3, 3, 1}, Shape{2, 5, 5, 3}, {1, 1}, "SAME"},
      {Shape{1, 6, 5, 2}, Shape{3, 3, 2, 2}, Shape{1, 3, 3, 4}, {2, 2}, "SAME"},
      {Shape{2, 5, 4, 2}, Shape{2, 3, 2, 1}, Shape{2, 4, 2, 2}, {1, 1}, "VALID"},
  };
  for (const ConvCase& c : cases) {
    CheckGradients(
        {"DepthwiseConv2D " + c.input.ToString() + " * " + c.filter.ToString() + " " + c.padding,
         {c.input, c.filter},
         [c](GraphBuilder& g, const std::vector<std::string>& x) {
           return std::pair{g.Op("DepthwiseConv2D", {x[0], x[1]}, WindowAttrs(c.strides, c.padding)), c.output};
         }});
  }
}

TEST(ConvGradientCheck, PoolsWithOverlappingAndPaddedWindows) {
  for (const char* op : {"MaxPool2D", "AvgPool2D"}) {
    CheckGradients(
        {std::string(op) + " 2x2 VALID",
         {Shape{2, 4, 5, 3}},
         [op](GraphBuilder& g, const std::vector<std::string>& x) {
           return grad_test::Unary(g, op, x[0], Shape{2, 2, 2, 3}, WindowAttrs({2, 2}, "VALID", {2, 2}));
         }});
    CheckGradients(
        {std::string(op) + " 3x3 stride 2 SAME",
         {Shape{1, 5, 4, 2}},
         [op](GraphBuilder& g, const std::vector<std::string>& x) {
           return grad_test::Unary(g, op, x[0], Shape{1, 3, 2, 2}, WindowAttrs({2, 2}, "SAME", {3, 3}));
         }});
  }
}

// The layers of the digits CNN in a row: the gradients flow through each into the one before.
TEST(ConvGradientCheck, ConvPoolFlattenDense) {
  CheckGradients({"cnn",
                  {Shape{2, 6, 6, 1}, Shape{3, 3, 1, 2}, Shape{2}, Shape{8, 3}},
                  [](GraphBuilder& g, const std::vector<std::string>& x) {
                    std::string h = g.Op("Conv2D", {x[0], x[1]}, WindowAttrs({1, 1}, "VALID"));
                    h = g.Op("Tanh", {g.Op("BiasAdd", {h, x[2]})});
                    h = g.Op("MaxPool2D", {h}, WindowAttrs({2, 2}, "VALID", {2, 2}));
                    return std::pair{g.Op("MatMul", {g.Op("Flatten", {h}), x[3]}), Shape{2, 3}};
                  }});
}

Tensor ToF64(const Tensor& t) {
  std::vector<double> v;
  for (float f : t.data<float>()) v.push_back(f);
  return Tensor::FromVector<double>(t.shape(), v);
}

// The float32 backward kernels against the float64 loops on the same values, within the dot
// product bound (op_test_util.h), and the same bits on one thread and on four. The batch is
// large enough for several blocks of images.
TEST(ConvGradients, Float32KernelsMatchTheReferenceOnAnyThreadCount) {
  const Shape input{64, 8, 8, 16}, filter{3, 3, 16, 8};
  for (const std::string padding : {"VALID", "SAME"}) {
    SCOPED_TRACE(padding);
    const AttrMap attrs = WindowAttrs({1, 1}, padding);
    const Tensor x = op_test::RandomTensor(input, 1);
    const Tensor f = op_test::RandomTensor(filter, 2);
    StatusOr<std::vector<Tensor>> y = RunOp("Conv2D", std::vector<Tensor>{x, f}, attrs);
    ASSERT_TRUE(y.ok()) << y.status().ToString();
    const Tensor dy = op_test::RandomTensor(y.value()[0].shape(), 3);
    struct Grad {
      const char* op;
      std::vector<Tensor> inputs;
      int64_t terms;  // products summed per element, for the error bound
    };
    const Tensor fd = op_test::RandomTensor(Shape{3, 3, 16, 1}, 4);
    StatusOr<std::vector<Tensor>> yd = RunOp("DepthwiseConv2D", std::vector<Tensor>{x, fd}, attrs);
    ASSERT_TRUE(yd.ok()) << yd.status().ToString();
    const Tensor dyd = op_test::RandomTensor(yd.value()[0].shape(), 5);
    const std::vector<Grad> grads = {
        {"Conv2DBackpropInput", {dy, f, x}, 3 * 3 * 8},
        {"Conv2DBackpropFilter", {x, dy, f}, 64 * 8 * 8},
        {"DepthwiseConv2DBackpropInput", {dyd, fd, x}, 3 * 3},
        {"DepthwiseConv2DBackpropFilter", {x, dyd, fd}, 64 * 8 * 8},
    };
    for (const Grad& grad : grads) {
      SCOPED_TRACE(grad.op);
      const OpDef* def = OpRegistry::Global().Find(grad.op);
      ASSERT_NE(def, nullptr);
      ThreadPool one(1), four(4);
      StatusOr<std::vector<Tensor>> a = RunOp(*def, grad.inputs, attrs, one);
      StatusOr<std::vector<Tensor>> b = RunOp(*def, grad.inputs, attrs, four);
      ASSERT_TRUE(a.ok() && b.ok()) << a.status().ToString() << b.status().ToString();
      ASSERT_EQ(a.value()[0].num_elements(), b.value()[0].num_elements());
      EXPECT_EQ(0, std::memcmp(a.value()[0].raw_data(), b.value()[0].raw_data(), a.value()[0].byte_size()));

      std::vector<Tensor> wide;
      for (const Tensor& t : grad.inputs) wide.push_back(ToF64(t));
      StatusOr<std::vector<Tensor>> ref = RunOp(*def, wide, attrs, one);
      ASSERT_TRUE(ref.ok()) << ref.status().ToString();
      // Inputs in [-1, 1]: each term is at most 1 in magnitude.
      const double bound =
          static_cast<double>(grad.terms + 1) * op_test::kU * static_cast<double>(grad.terms);
      const auto got = a.value()[0].data<float>();
      const auto want = ref.value()[0].data<double>();
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], bound) << i;
    }
  }
}

// At stride 1 the input gradient runs as a convolution of dy with the filter turned half a turn
// (conv_ops.cc's TransposedConvolution), Winograd's for a float32 layer of 32 channels, with
// im2col in bf16; a forward pad past the window's extent keeps col2im. Every case against the
// float64 loops within the dot product bound (Winograd's within four times it), the same bits
// on one thread and on four.
TEST(ConvGradients, StrideOneInputGradientsAreConvolutionsOfDy) {
  struct Case {
    Shape input, filter;
    AttrMap attrs;
    double bound_scale;
  };
  AttrMap explicit_pads{{"padding", std::string("EXPLICIT")},
                        {"explicit_paddings", std::vector<int64_t>{0, 0, 2, 0, 0, 1, 0, 0}}};
  AttrMap past_extent{{"padding", std::string("EXPLICIT")},
                      {"explicit_paddings", std::vector<int64_t>{0, 0, 3, 1, 1, 4, 0, 0}}};
  AttrMap dilated = WindowAttrs({1, 1}, "SAME");
  dilated.Set("dilations", std::vector<int64_t>{2, 1});
  AttrMap bf16 = WindowAttrs({1, 1}, "SAME");
  bf16.Set("precision", std::string("bfloat16"));
  const std::vector<Case> cases = {
      {Shape{3, 7, 6, 5}, Shape{3, 2, 5, 4}, explicit_pads, 1},
      {Shape{2, 5, 6, 3}, Shape{3, 3, 3, 4}, past_extent, 1},
      {Shape{2, 8, 7, 4}, Shape{3, 3, 4, 6}, dilated, 1},
      {Shape{2, 9, 7, 32}, Shape{3, 3, 32, 40}, WindowAttrs({1, 1}, "SAME"), 4},  // Winograd
      {Shape{2, 6, 6, 16}, Shape{3, 3, 16, 16}, bf16, 1},
  };
  uint64_t seed = 60;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.input.ToString() + " * " + c.filter.ToString());
    const Tensor x = op_test::RandomTensor(c.input, seed++);
    const Tensor f = op_test::RandomTensor(c.filter, seed++);
    StatusOr<std::vector<Tensor>> y = RunOp("Conv2D", std::vector<Tensor>{x, f}, c.attrs);
    ASSERT_TRUE(y.ok()) << y.status().ToString();
    const Tensor dy = op_test::RandomTensor(y.value()[0].shape(), seed++);
    const OpDef* def = OpRegistry::Global().Find("Conv2DBackpropInput");
    ASSERT_NE(def, nullptr);
    ThreadPool one(1), four(4);
    const std::vector<Tensor> inputs = {dy, f, x};
    StatusOr<std::vector<Tensor>> a = RunOp(*def, inputs, c.attrs, one);
    StatusOr<std::vector<Tensor>> b = RunOp(*def, inputs, c.attrs, four);
    ASSERT_TRUE(a.ok() && b.ok()) << a.status().ToString() << b.status().ToString();
    EXPECT_TRUE(a.value()[0].BitwiseEqual(b.value()[0]));
    // bf16 products: the reference takes the operands rounded to bf16, as the kernel does.
    const bool rounds = c.attrs.GetStringViewOr("precision", "float32").value() == "bfloat16";
    auto wide = [&](const Tensor& t) {
      if (!rounds) return ToF64(t);
      StatusOr<std::vector<Tensor>> r = RunOp("Cast", std::vector<Tensor>{t}, AttrMap{{"dtype", DType::kBFloat16}});
      EXPECT_TRUE(r.ok());
      r = RunOp("Cast", r.value(), AttrMap{{"dtype", DType::kFloat64}});
      EXPECT_TRUE(r.ok());
      return r.value()[0];
    };
    AttrMap f64_attrs = c.attrs;
    f64_attrs.Set("precision", std::string("float32"));
    const std::vector<Tensor> wide_inputs = {wide(dy), wide(f), ToF64(x)};
    StatusOr<std::vector<Tensor>> ref = RunOp(*def, wide_inputs, f64_attrs, one);
    ASSERT_TRUE(ref.ok()) << ref.status().ToString();
    const double terms = static_cast<double>(c.filter.dim(0) * c.filter.dim(1) * c.filter.dim(3));
    const double bound = c.bound_scale * (terms + 1) * op_test::kU * terms;
    const auto got = a.value()[0].data<float>();
    const auto want = ref.value()[0].data<double>();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], bound) << i;
  }
}

// Mixed precision: a bf16 filter and precision bfloat16 on a float32 one compute the same bf16
// products (the filter rounded once either way), forward and backward; the filter's gradient is
// float32, and differs from the float32 products'.
TEST(ConvGradients, Bf16FiltersAndBf16PrecisionAgree) {
  const Tensor x = op_test::RandomTensor(Shape{3, 6, 6, 4}, 1);
  const Tensor f = op_test::RandomTensor(Shape{3, 3, 4, 5}, 2);
  StatusOr<std::vector<Tensor>> f16 = RunOp("Cast", std::vector<Tensor>{f}, AttrMap{{"dtype", DType::kBFloat16}});
  ASSERT_TRUE(f16.ok());
  AttrMap fp32 = WindowAttrs({1, 1}, "SAME"), bf16 = fp32;
  bf16.Set("precision", std::string("bfloat16"));
  const Tensor dy = op_test::RandomTensor(Shape{3, 6, 6, 5}, 3);
  struct Case {
    const char* op;
    std::vector<Tensor> with_bf16_filter, with_precision;
  };
  const std::vector<Case> cases = {
      {"Conv2D", {x, f16.value()[0]}, {x, f}},
      {"Conv2DBackpropInput", {dy, f16.value()[0], x}, {dy, f, x}},
      {"Conv2DBackpropFilter", {x, dy, f16.value()[0]}, {x, dy, f}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op);
    StatusOr<std::vector<Tensor>> a = RunOp(c.op, c.with_bf16_filter, fp32);
    StatusOr<std::vector<Tensor>> b = RunOp(c.op, c.with_precision, bf16);
    StatusOr<std::vector<Tensor>> full = RunOp(c.op, c.with_precision, fp32);
    ASSERT_TRUE(a.ok() && b.ok() && full.ok()) << a.status().ToString() << b.status().ToString();
    EXPECT_EQ(a.value()[0].dtype(), DType::kFloat32);
    EXPECT_TRUE(a.value()[0].BitwiseEqual(b.value()[0]));
    EXPECT_FALSE(a.value()[0].BitwiseEqual(full.value()[0]));
  }
  // The same for a layer of Winograd's shape (3x3, stride 1, 32 channels), which float32 runs
  // as Winograd F(2x2, 3x3) and bf16 does not: its products are the operands' own, rounded to
  // bf16 (what an ONNX export's Casts compute), so it is the float64 convolution of the rounded
  // operands up to float32's sums, not Winograd's transformed tiles rounded (about 1e-3 off).
  const Tensor wx = op_test::RandomTensor(Shape{2, 7, 6, 32}, 4);
  const Tensor wf = op_test::RandomTensor(Shape{3, 3, 32, 32}, 5);
  auto rounded64 = [](const Tensor& t) {
    StatusOr<std::vector<Tensor>> b = RunOp("Cast", std::vector<Tensor>{t}, AttrMap{{"dtype", DType::kBFloat16}});
    EXPECT_TRUE(b.ok());
    StatusOr<std::vector<Tensor>> d = RunOp("Cast", b.value(), AttrMap{{"dtype", DType::kFloat64}});
    EXPECT_TRUE(d.ok());
    return d.value()[0];
  };
  StatusOr<std::vector<Tensor>> wf16 = RunOp("Cast", std::vector<Tensor>{wf}, AttrMap{{"dtype", DType::kBFloat16}});
  ASSERT_TRUE(wf16.ok());
  StatusOr<std::vector<Tensor>> a = RunOp("Conv2D", std::vector<Tensor>{wx, wf16.value()[0]}, fp32);
  StatusOr<std::vector<Tensor>> b = RunOp("Conv2D", std::vector<Tensor>{wx, wf}, bf16);
  StatusOr<std::vector<Tensor>> exact = RunOp("Conv2D", std::vector<Tensor>{rounded64(wx), rounded64(wf)}, fp32);
  ASSERT_TRUE(a.ok() && b.ok() && exact.ok());
  EXPECT_TRUE(a.value()[0].BitwiseEqual(b.value()[0]));
  const auto got = b.value()[0].data<float>();
  const auto want = exact.value()[0].data<double>();
  double worst = 0, scale = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, std::fabs(got[i] - want[i]));
    scale = std::max(scale, std::fabs(want[i]));
  }
  EXPECT_LT(worst, 1e-6 * scale);  // 288 exact products summed in float32
  // With attr bf16_winograd (the server's opt-in bf16), the same layer runs as Winograd in bf16:
  // a bf16 filter and precision bfloat16 still agree (the filter rounded before its transform),
  // the transformed tiles are what is rounded, and the answer stays within bf16's reach of
  // float32's.
  AttrMap fp32_winograd = fp32, bf16_winograd = bf16;
  fp32_winograd.Set("bf16_winograd", true);
  bf16_winograd.Set("bf16_winograd", true);
  StatusOr<std::vector<Tensor>> wa = RunOp("Conv2D", std::vector<Tensor>{wx, wf16.value()[0]}, fp32_winograd);
  StatusOr<std::vector<Tensor>> wb = RunOp("Conv2D", std::vector<Tensor>{wx, wf}, bf16_winograd);
  StatusOr<std::vector<Tensor>> full = RunOp("Conv2D", std::vector<Tensor>{wx, wf}, fp32);
  ASSERT_TRUE(wa.ok() && wb.ok() && full.ok());
  EXPECT_TRUE(wa.value()[0].BitwiseEqual(wb.value()[0]));
  const auto tiles = wb.value()[0].data<float>(), want32 = full.value()[0].data<float>();
  double off_operands = 0, off_float32 = 0;
  for (size_t i = 0; i < tiles.size(); ++i) {
    off_operands = std::max(off_operands, std::fabs(tiles[i] - want[i]));
    off_float32 = std::max(off_float32, std::fabs(static_cast<double>(tiles[i]) - want32[i]));
  }
  EXPECT_GT(off_operands, 1e-5 * scale) << "Winograd's tiles, not the operands, are rounded";
  EXPECT_LT(off_float32, 0.02 * scale);  // bf16 keeps 8 bits: a 288-term sum stays within 2 %
}

TEST(ConvGradients, MaxPoolSendsATiedWindowsGradientToItsFirstElement) {
  const Tensor x = Tensor::FromVector<float>(Shape{1, 2, 2, 1}, {5, 5, 1, 5});
  const Tensor dy = Tensor::FromVector<float>(Shape{1, 1, 1, 1}, {2});
  StatusOr<std::vector<Tensor>> dx =
      RunOp("MaxPool2DGrad", std::vector<Tensor>{x, dy}, WindowAttrs({2, 2}, "VALID", {2, 2}));
  ASSERT_TRUE(dx.ok()) << dx.status().ToString();
  const auto v = dx.value()[0].data<float>();
  EXPECT_EQ(std::vector<float>(v.begin(), v.end()), (std::vector<float>{2, 0, 0, 0}));
}

TEST(ConvGradients, AGradientOfTheWrongShapeIsAnError) {
  const Tensor x = op_test::RandomTensor(Shape{1, 4, 4, 1}, 1);
  const Tensor f = op_test::RandomTensor(Shape{3, 3, 1, 2}, 2);
  const Tensor dy = op_test::RandomTensor(Shape{1, 3, 3, 2}, 3);  // VALID gives [1,2,2,2]
  StatusOr<std::vector<Tensor>> r = RunOp("Conv2DBackpropInput", std::vector<Tensor>{dy, f, x});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "Conv2DBackpropInput: gradient [1,3,3,2] does not match the forward output [1,2,2,2]");
  r = RunOp("MaxPool2DGrad", std::vector<Tensor>{x, dy}, WindowAttrs({2, 2}, "VALID", {2, 2}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "MaxPool2DGrad: gradient [1,3,3,2] does not match the forward output [1,2,2,1]");
}

}  // namespace
}  // namespace lockstep
