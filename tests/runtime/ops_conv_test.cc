// Conv2D, DepthwiseConv2D and Conv2DTranspose against direct float64 loops written here from
// the TensorFlow definitions, plus hand-computed cases for the asymmetric SAME padding; the
// direct (stem) and Winograd paths against the Gemm's bits and the unfused ops'.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "runtime/matmul/gemm_path.h"
#include "runtime/op_registry.h"
#include "tests/runtime/op_test_util.h"

namespace lockstep {
namespace {

using op_test::ExpectError;
using op_test::ExpectNear;
using op_test::Infer;
using op_test::kU;
using op_test::RandomTensor;
using op_test::RunOk;
using op_test::TfWindow;
using op_test::ToDouble;

using op_test::kNaN;

struct ForwardConvCase {
  int64_t n, h, w, cin, kh, kw, cout, sh, sw;
  bool same;
};

std::string Describe(const ForwardConvCase& c) {
  return "n" + std::to_string(c.n) + " " + std::to_string(c.h) + "x" + std::to_string(c.w) + "x" +
         std::to_string(c.cin) + " k" + std::to_string(c.kh) + "x" + std::to_string(c.kw) +
         " cout" + std::to_string(c.cout) + " s" + std::to_string(c.sh) + "," +
         std::to_string(c.sw) + (c.same ? " SAME" : " VALID");
}

AttrMap ConvAttrs(const ForwardConvCase& c) {
  return {{"strides", std::vector<int64_t>{c.sh, c.sw}},
          {"padding", std::string(c.same ? "SAME" : "VALID")}};
}

// The textbook seven loops, in double, with a dot-product tolerance per output.
void ConvRef(const ForwardConvCase& c, const Tensor& input, const Tensor& filter, Shape* shape,
             std::vector<double>* want, std::vector<double>* tol) {
  int64_t oh, ow, pt, pl;
  TfWindow(c.h, c.kh, c.sh, c.same, &oh, &pt);
  TfWindow(c.w, c.kw, c.sw, c.same, &ow, &pl);
  *shape = Shape{c.n, oh, ow, c.cout};
  const auto x = ToDouble(input), f = ToDouble(filter);
  want->assign(c.n * oh * ow * c.cout, 0);
  tol->assign(want->size(), 0);
  const int64_t kdim = c.kh * c.kw * c.cin;
  for (int64_t b = 0; b < c.n; ++b)
    for (int64_t y = 0; y < oh; ++y)
      for (int64_t z = 0; z < ow; ++z)
        for (int64_t o = 0; o < c.cout; ++o) {
          double s = 0, mag = 0;
          for (int64_t i = 0; i < c.kh; ++i)
            for (int64_t j = 0; j < c.kw; ++j)
              for (int64_t q = 0; q < c.cin; ++q) {
                const int64_t ih = y * c.sh - pt + i, iw = z * c.sw - pl + j;
                if (ih < 0 || ih >= c.h || iw < 0 || iw >= c.w) continue;
                const double v = x[((b * c.h + ih) * c.w + iw) * c.cin + q] *
                                 f[((i * c.kw + j) * c.cin + q) * c.cout + o];
                s += v;
                mag += std::fabs(v);
              }
          const int64_t idx = ((b * oh + y) * ow + z) * c.cout + o;
          (*want)[idx] = s;
          (*tol)[idx] = (kdim + 1) * kU * mag;
        }
}

TEST(OpsConvTest, Conv2DMatchesReference) {
  const ForwardConvCase cases[] = {
      {1, 5, 5, 1, 3, 3, 1, 1, 1, false},   {1, 5, 5, 1, 3, 3, 1, 1, 1, true},
      {2, 7, 8, 3, 3, 3, 7, 2, 2, true},    {2, 7, 8, 3, 3, 3, 7, 2, 2, false},
      {1, 8, 8, 17, 1, 1, 16, 1, 1, true},  {3, 4, 6, 5, 1, 1, 9, 1, 1, false},  // 1x1 path
      {1, 9, 9, 4, 1, 1, 5, 2, 2, false},   {1, 7, 7, 2, 5, 5, 3, 1, 1, true},   // 5x5 > half
      {1, 6, 11, 3, 2, 3, 4, 2, 1, true},   {1, 6, 11, 3, 2, 3, 4, 1, 3, true},  // asymmetric
      {1, 1, 1, 7, 3, 3, 2, 1, 1, true},    {0, 5, 5, 3, 3, 3, 4, 1, 1, true},   // batch 0
      {1, 4, 4, 3, 4, 4, 2, 1, 1, false},   {2, 3, 3, 33, 2, 2, 17, 1, 1, false},
      {1, 5, 5, 0, 3, 3, 4, 1, 1, true},     // no input channels: zeros
      {2, 30, 30, 8, 3, 3, 16, 1, 1, true},  // several im2col blocks
      {2, 9, 10, 3, 3, 3, 32, 2, 2, true},   {1, 11, 9, 1, 7, 7, 16, 2, 1, true},  // direct (stems)
      // Winograd F(2x2, 3x3) (conv_winograd.h): within the direct form's bound (measured: under
      // 1 % of it), partial tiles at the bottom and right edges, less than a tile.
      {1, 9, 11, 32, 3, 3, 32, 1, 1, true},  {2, 8, 8, 48, 3, 3, 40, 1, 1, false},
      {1, 5, 6, 64, 3, 3, 96, 1, 1, true},   {1, 1, 2, 33, 3, 3, 35, 1, 1, true},
  };
  uint64_t seed = 1;
  for (const ForwardConvCase& c : cases) {
    Tensor input = RandomTensor({c.n, c.h, c.w, c.cin}, seed++);
    Tensor filter = RandomTensor({c.kh, c.kw, c.cin, c.cout}, seed++);
    Shape shape;
    std::vector<double> want, tol;
    ConvRef(c, input, filter, &shape, &want, &tol);
    Tensor out = RunOk("Conv2D", {input, filter}, ConvAttrs(c)).at(0);
    ExpectNear(out, shape, want, tol, Describe(c));
  }
}

// Whatever the pool size (parallel im2col blocks, or one block after another with a threaded
// Gemm), the result is the same bit for bit.
TEST(OpsConvTest, Conv2DIsIndependentOfThreadCount) {
  ThreadPool one(1), four(4);
  const ForwardConvCase cases[] = {{2, 30, 30, 8, 3, 3, 16, 1, 1, true},
                            {1, 7, 7, 64, 3, 3, 40, 1, 1, true}};
  for (const ForwardConvCase& c : cases) {
    Tensor input = RandomTensor({c.n, c.h, c.w, c.cin}, 5);
    Tensor filter = RandomTensor({c.kh, c.kw, c.cin, c.cout}, 6);
    Tensor a = op_test::RunOn(one, "Conv2D", {input, filter}, ConvAttrs(c));
    Tensor b = op_test::RunOn(four, "Conv2D", {input, filter}, ConvAttrs(c));
    EXPECT_TRUE(a.BitwiseEqual(b)) << Describe(c);
  }
}

// A stem's convolution (at most 4 input channels, output channels a multiple of 16) runs
// directly, not through im2col and the Gemm (conv_direct.h), to the same bits: the same
// convolution with one output channel more goes the Gemm's way, and its first channels are
// compared, with a bias, a residual and an activation, on every path and thread count.
TEST(OpsConvTest, FewInputChannelsRunDirectlyToTheGemmsBits) {
  struct Case {
    ForwardConvCase conv;
    int64_t dilation;
    std::string padding;  // "" for conv.same's
    std::string activation;
  };
  const Case cases[] = {
      {{2, 17, 15, 3, 3, 3, 32, 2, 2, true}, 1, "", "silu"},    // EfficientNet-B0's stem
      {{1, 23, 21, 3, 7, 7, 64, 2, 2, true}, 1, "EXPLICIT", "relu"},  // ResNet's, pads 3
      {{2, 12, 12, 3, 4, 4, 96, 4, 4, false}, 1, "", "none"},   // ConvNeXt's patchify, 64 + 32
      {{1, 9, 13, 1, 3, 3, 16, 1, 1, true}, 2, "", "hard_swish"},
      {{3, 6, 5, 4, 2, 3, 48, 1, 2, false}, 1, "", "gelu"},
  };
  ThreadPool one(1), three(3);
  const GemmPath original = ActiveGemmPath();
  uint64_t seed = 900;
  for (const Case& c : cases) {
    const ForwardConvCase& d = c.conv;
    AttrMap attrs = ConvAttrs(d);
    attrs.Set("dilations", std::vector<int64_t>{c.dilation, c.dilation});
    attrs.Set("activation", c.activation);
    if (c.padding == "EXPLICIT") {
      attrs.Set("padding", std::string("EXPLICIT"));
      attrs.Set("explicit_paddings", std::vector<int64_t>{0, 0, 3, 2, 3, 1, 0, 0});
    }
    const Tensor input = RandomTensor({d.n, d.h, d.w, d.cin}, seed++);
    const Tensor wide_filter = RandomTensor({d.kh, d.kw, d.cin, d.cout + 1}, seed++);
    const Tensor wide_bias = RandomTensor({d.cout + 1}, seed++);
    std::vector<float> filter, bias(wide_bias.data<float>().begin(), wide_bias.data<float>().end() - 1);
    for (int64_t k = 0; k < d.kh * d.kw * d.cin; ++k) {
      const auto row = wide_filter.data<float>().subspan(static_cast<size_t>(k * (d.cout + 1)), static_cast<size_t>(d.cout));
      filter.insert(filter.end(), row.begin(), row.end());
    }
    // The output's shape, from a plain run, gives the residuals'.
    const Shape out = op_test::RunOn(one, "Conv2D", {input, wide_filter}, attrs).shape();
    const int64_t pixels = out.num_elements() / (d.cout + 1);
    const Tensor wide_residual = RandomTensor(out, seed++);
    std::vector<float> residual;
    for (int64_t p = 0; p < pixels; ++p) {
      const auto row = wide_residual.data<float>().subspan(static_cast<size_t>(p * (d.cout + 1)), static_cast<size_t>(d.cout));
      residual.insert(residual.end(), row.begin(), row.end());
    }
    Shape narrow_out = out;
    narrow_out.set_dim(3, d.cout);
    const std::vector<Tensor> direct_inputs = {
        input, Tensor::FromVector<float>({d.kh, d.kw, d.cin, d.cout}, filter), Tensor::FromVector<float>({d.cout}, bias),
        Tensor::FromVector<float>(narrow_out, residual)};
    for (GemmPath path : SupportedGemmPaths()) {
      ASSERT_TRUE(SetGemmPath(path).ok());
      const Tensor gemm = op_test::RunOn(one, "FusedConv2D", {input, wide_filter, wide_bias, wide_residual}, attrs);
      for (ThreadPool* pool : {&one, &three}) {
        const Tensor direct = op_test::RunOn(*pool, "FusedConv2D", direct_inputs, attrs);
        ASSERT_EQ(direct.shape(), narrow_out) << Describe(d);
        const auto got = direct.data<float>(), want = gemm.data<float>();
        int64_t differ = 0;
        for (int64_t p = 0; p < pixels; ++p) {
          differ += !std::equal(got.begin() + p * d.cout, got.begin() + (p + 1) * d.cout,
                                want.begin() + p * (d.cout + 1), [](float a, float b) {
                                  return std::memcmp(&a, &b, sizeof a) == 0;
                                });
        }
        EXPECT_EQ(differ, 0) << Describe(d) << " " << c.activation << " " << GemmPathName(path) << " threads "
                             << pool->num_threads();
      }
    }
  }
  ASSERT_TRUE(SetGemmPath(original).ok());
}

// 3x3 stride-1 layers of 32 to 256 channels run as Winograd F(2x2, 3x3) (conv_winograd.h;
// Conv2DMatchesReference has its accuracy): the same bits on any thread count and batch size,
// and FusedConv2D's epilogue the same bits as Conv2D, BiasAdd, Add and the activation one after
// another.
TEST(OpsConvTest, WinogradLayersAreIndependentOfThreadsAndBatch) {
  const ForwardConvCase d{3, 13, 10, 64, 3, 3, 64, 1, 1, true};
  Tensor input = RandomTensor({d.n, d.h, d.w, d.cin}, 31);
  Tensor filter = RandomTensor({d.kh, d.kw, d.cin, d.cout}, 32);
  ThreadPool one(1), three(3);
  const Tensor a = op_test::RunOn(one, "Conv2D", {input, filter}, ConvAttrs(d));
  EXPECT_TRUE(a.BitwiseEqual(op_test::RunOn(three, "Conv2D", {input, filter}, ConvAttrs(d))));
  // The second image alone.
  const auto x = input.data<float>();
  const int64_t image = d.h * d.w * d.cin;
  Tensor second = Tensor::FromVector<float>({1, d.h, d.w, d.cin}, std::vector<float>(x.begin() + image, x.begin() + 2 * image));
  const Tensor alone = op_test::RunOn(three, "Conv2D", {second, filter}, ConvAttrs(d));
  const auto y = a.data<float>(), z = alone.data<float>();
  const int64_t out_image = alone.num_elements();
  EXPECT_TRUE(std::equal(z.begin(), z.end(), y.begin() + out_image, [](float p, float q) {
    return std::memcmp(&p, &q, sizeof p) == 0;
  }));
}

TEST(OpsConvTest, WinogradEpilogueIsTheUnfusedOpsBits) {
  const ForwardConvCase d{2, 7, 9, 32, 3, 3, 48, 1, 1, true};
  Tensor input = RandomTensor({d.n, d.h, d.w, d.cin}, 41);
  Tensor filter = RandomTensor({d.kh, d.kw, d.cin, d.cout}, 42);
  Tensor bias = RandomTensor({d.cout}, 43);
  Tensor residual = RandomTensor({d.n, d.h, d.w, d.cout}, 44);
  for (const char* activation : {"relu", "silu"}) {
    AttrMap attrs = ConvAttrs(d);
    attrs.Set("activation", std::string(activation));
    const Tensor fused = RunOk("FusedConv2D", {input, filter, bias, residual}, attrs).at(0);
    Tensor step = RunOk("Conv2D", {input, filter}, ConvAttrs(d)).at(0);
    step = RunOk("BiasAdd", {step, bias}).at(0);
    step = RunOk("Add", {step, residual}).at(0);
    step = RunOk(std::string(activation) == "relu" ? "Relu" : "Silu", {step}).at(0);
    EXPECT_TRUE(fused.BitwiseEqual(step)) << activation;
  }
}

// 4x4 ones, 3x3 ones, stride 2, SAME: out 2x2, pad_total 1, all of it at the bottom/right.
TEST(OpsConvTest, SamePaddingIsAsymmetricLikeTensorFlow) {
  Tensor input = Tensor::FromVector<float>({1, 4, 4, 1}, std::vector<float>(16, 1.0f));
  Tensor filter = Tensor::FromVector<float>({3, 3, 1, 1}, std::vector<float>(9, 1.0f));
  Tensor out = RunOk("Conv2D", {input, filter},
                     {{"strides", std::vector<int64_t>{2, 2}}, {"padding", std::string("SAME")}})
                   .at(0);
  ExpectNear(out, Shape{1, 2, 2, 1}, {9, 6, 6, 4}, 0.0);
  // 5x5 input, 4x4 window, stride 1, SAME: pad_total 3, one on top/left and two after.
  input = Tensor::FromVector<float>({1, 5, 5, 1}, std::vector<float>(25, 1.0f));
  filter = Tensor::FromVector<float>({4, 4, 1, 1}, std::vector<float>(16, 1.0f));
  out = RunOk("Conv2D", {input, filter}, {{"padding", std::string("SAME")}}).at(0);
  EXPECT_EQ(out.data<float>()[0], 9.0f);    // rows/cols 0..2 valid
  EXPECT_EQ(out.data<float>()[12], 16.0f);  // centre
  EXPECT_EQ(out.data<float>()[24], 4.0f);   // rows/cols 3..4 valid
}

// EXPLICIT padding (an ONNX convolution's pads) is the VALID convolution of the zero-padded
// image, bit for bit: asymmetric amounts, a strided window, a 1x1 window padded only after (no
// longer a plain matmul over the pixels), the depthwise op, and on 3 threads too.
TEST(OpsConvTest, ExplicitPaddingIsTheValidConvolutionOfThePaddedImage) {
  struct Case {
    const char* op;
    int64_t kh, kw, stride;
    std::vector<int64_t> pads;  // top, bottom, left, right
  };
  const Case cases[] = {{"Conv2D", 3, 3, 1, {1, 2, 0, 3}}, {"Conv2D", 3, 2, 2, {1, 1, 2, 0}},
                        {"Conv2D", 1, 1, 1, {0, 2, 0, 1}}, {"DepthwiseConv2D", 3, 3, 2, {1, 1, 1, 1}},
                        {"DepthwiseConv2D", 5, 5, 1, {2, 0, 0, 2}}};
  ThreadPool three(3);
  uint64_t seed = 40;
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.op) + " " + std::to_string(c.kh) + "x" + std::to_string(c.kw));
    const Tensor x = RandomTensor({2, 7, 6, 4}, seed++);
    const Tensor f = RandomTensor({c.kh, c.kw, 4, std::string(c.op) == "Conv2D" ? 5 : 1}, seed++);
    const Tensor pads = Tensor::FromVector<int64_t>({8}, {0, c.pads[0], c.pads[2], 0, 0, c.pads[1], c.pads[3], 0});
    const Tensor padded = RunOk("Pad", {x, pads}, {{"mode", std::string("constant")}}).at(0);
    const AttrMap strides{{"strides", std::vector<int64_t>{c.stride, c.stride}}};
    AttrMap explicit_attrs = strides;
    explicit_attrs.Set("padding", std::string("EXPLICIT"));
    explicit_attrs.Set("explicit_paddings", std::vector<int64_t>{0, 0, c.pads[0], c.pads[1], c.pads[2], c.pads[3], 0, 0});
    const Tensor want = RunOk(c.op, {padded, f}, strides).at(0);
    EXPECT_TRUE(RunOk(c.op, {x, f}, explicit_attrs).at(0).BitwiseEqual(want));
    EXPECT_TRUE(op_test::RunOn(three, c.op, {x, f}, explicit_attrs).BitwiseEqual(want));
  }
  const Tensor x = RandomTensor({1, 4, 4, 2}, 1), f = RandomTensor({3, 3, 2, 2}, 2);
  for (const std::vector<int64_t>& bad : {std::vector<int64_t>{0, 0, 1, 1, 1, 1}, std::vector<int64_t>{1, 0, 1, 1, 1, 1, 0, 0},
                                          std::vector<int64_t>{0, 0, 1, -1, 1, 1, 0, 0}}) {
    ExpectError(RunOp("Conv2D", std::vector<Tensor>{x, f},
                      AttrMap{{"padding", std::string("EXPLICIT")}, {"explicit_paddings", bad}})
                    .status(),
                StatusCode::kInvalidArgument, "explicit_paddings");
  }
  ExpectError(RunOp("Conv2D", std::vector<Tensor>{x, RandomTensor({9, 3, 2, 2}, 3)},
                    AttrMap{{"padding", std::string("EXPLICIT")},
                            {"explicit_paddings", std::vector<int64_t>{0, 0, 1, 1, 0, 0, 0, 0}}})
                  .status(),
              StatusCode::kInvalidArgument, "window 9 is larger than the padded input height 6");
}

TEST(OpsConvTest, Conv2DErrorsAndInference) {
  Tensor input = RandomTensor({1, 5, 5, 3}, 1);
  ExpectError(RunOp("Conv2D", std::vector<Tensor>{input, RandomTensor({3, 3, 4, 2}, 2)}).status(),
              StatusCode::kInvalidArgument, "input channels 3");
  ExpectError(RunOp("Conv2D", std::vector<Tensor>{input, RandomTensor({6, 3, 3, 2}, 2)}).status(),
              StatusCode::kInvalidArgument, "larger than the input height");
  ExpectError(RunOp("Conv2D", std::vector<Tensor>{input, RandomTensor({3, 3, 3, 2}, 2)},
                    {{"padding", std::string("FULL")}})
                  .status(),
              StatusCode::kInvalidArgument, "SAME or VALID");
  ExpectError(RunOp("Conv2D", std::vector<Tensor>{input, RandomTensor({3, 3, 3, 2}, 2)},
                    {{"strides", std::vector<int64_t>{1, 0}}})
                  .status(),
              StatusCode::kInvalidArgument, "strides");
  ExpectError(RunOp("Conv2D",
                    std::vector<Tensor>{RandomTensor({5, 5, 3}, 1), RandomTensor({3, 3, 3, 2}, 2)})
                  .status(),
              StatusCode::kInvalidArgument, "rank 4");

  auto out =
      Infer("Conv2D", {{DType::kFloat32, {-1, 28, 28, 3}}, {DType::kFloat32, {3, 3, 3, 8}}},
            {{"strides", std::vector<int64_t>{1, 2, 2, 1}}, {"padding", std::string("SAME")}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape, (Shape{-1, 14, 14, 8}));
  out = Infer("Conv2D", {{DType::kFloat32, {-1, -1, 9, -1}}, {DType::kFloat32, {3, 3, 3, 8}}});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{-1, -1, 7, 8}));
}

// ---- DepthwiseConv2D ----

// A depthwise convolution is a Conv2D whose filter is block-diagonal: channel c's M filters
// sit in output columns [c * M, (c + 1) * M) and see only input channel c. ConvRef on that
// filter is the reference.
Tensor BlockDiagonalFilter(const Tensor& depthwise) {
  const Shape& s = depthwise.shape();
  const int64_t kh = s.dim(0), kw = s.dim(1), c = s.dim(2), m = s.dim(3);
  const auto f = depthwise.data<float>();
  std::vector<float> full(static_cast<size_t>(kh * kw * c * c * m), 0.0f);
  for (int64_t tap = 0; tap < kh * kw; ++tap)
    for (int64_t q = 0; q < c; ++q)
      for (int64_t j = 0; j < m; ++j) full[(tap * c + q) * c * m + q * m + j] = f[(tap * c + q) * m + j];
  return Tensor::FromVector<float>({kh, kw, c, c * m}, full);
}

TEST(OpsConvTest, DepthwiseConv2DMatchesReference) {
  // cout is the depth multiplier M.
  const ForwardConvCase cases[] = {
      {1, 5, 5, 1, 3, 3, 1, 1, 1, false}, {1, 5, 5, 3, 3, 3, 1, 1, 1, true},
      {2, 7, 8, 4, 3, 3, 2, 2, 2, true},  {2, 7, 8, 3, 3, 3, 3, 2, 2, false},
      {1, 6, 11, 5, 2, 3, 1, 2, 1, true}, {1, 6, 11, 2, 2, 3, 4, 1, 3, true},  // asymmetric
      {1, 1, 1, 7, 3, 3, 1, 1, 1, true},  {0, 5, 5, 3, 3, 3, 2, 1, 1, true},   // batch 0
      {3, 12, 12, 32, 3, 3, 1, 1, 1, true},                                  // MobileNet-like
      // M = 1 in blocks of 64, 32 and 16 channels and a remainder: 64 + 16 + 3, 32 + 16.
      {1, 6, 7, 83, 3, 3, 1, 1, 1, true}, {2, 5, 5, 48, 3, 3, 1, 2, 2, false}, {1, 4, 4, 128, 5, 5, 1, 1, 1, true},
  };
  uint64_t seed = 100;
  for (const ForwardConvCase& d : cases) {
    Tensor input = RandomTensor({d.n, d.h, d.w, d.cin}, seed++);
    Tensor filter = RandomTensor({d.kh, d.kw, d.cin, d.cout}, seed++);
    ForwardConvCase full = d;
    full.cout = d.cin * d.cout;
    Shape shape;
    std::vector<double> want, tol;
    ConvRef(full, input, BlockDiagonalFilter(filter), &shape, &want, &tol);
    Tensor out = RunOk("DepthwiseConv2D", {input, filter}, ConvAttrs(d)).at(0);
    ExpectNear(out, shape, want, tol, "depthwise " + Describe(d));
  }
}

TEST(OpsConvTest, DepthwiseConv2DIsIndependentOfThreadCount) {
  ThreadPool one(1), four(4);
  for (const ForwardConvCase& d : {ForwardConvCase{2, 30, 30, 16, 3, 3, 2, 1, 1, true}, ForwardConvCase{2, 30, 30, 83, 3, 3, 1, 1, 1, true}}) {
    Tensor input = RandomTensor({d.n, d.h, d.w, d.cin}, 7);
    Tensor filter = RandomTensor({d.kh, d.kw, d.cin, d.cout}, 8);
    EXPECT_TRUE(op_test::RunOn(one, "DepthwiseConv2D", {input, filter}, ConvAttrs(d))
                    .BitwiseEqual(op_test::RunOn(four, "DepthwiseConv2D", {input, filter}, ConvAttrs(d))))
        << Describe(d);
  }
}

// The float32 kernel sums each output's taps in (i, j) order, one rounded multiply and one
// rounded add at a time, on every instruction set this CPU has (the matmul core's paths pick
// it): the same bits as this plain loop on each.
TEST(OpsConvTest, DepthwiseConv2DSumsTapsInOrderBitForBitOnEveryPath) {
  const ForwardConvCase d{1, 9, 8, 83, 3, 3, 1, 2, 1, true};
  Tensor input = RandomTensor({d.n, d.h, d.w, d.cin}, 11);
  Tensor filter = RandomTensor({d.kh, d.kw, d.cin, d.cout}, 12);
  int64_t oh, ow, pt, pl;
  TfWindow(d.h, d.kh, d.sh, d.same, &oh, &pt);
  TfWindow(d.w, d.kw, d.sw, d.same, &ow, &pl);
  const auto x = input.data<float>(), f = filter.data<float>();
  std::vector<float> want;
  for (int64_t r = 0; r < oh; ++r)
    for (int64_t col = 0; col < ow; ++col)
      for (int64_t q = 0; q < d.cin; ++q) {
        float sum = 0.0f;
        for (int64_t i = 0; i < d.kh; ++i)
          for (int64_t j = 0; j < d.kw; ++j) {
            const int64_t ih = r * d.sh - pt + i, iw = col * d.sw - pl + j;
            if (ih < 0 || ih >= d.h || iw < 0 || iw >= d.w) continue;
            const float product = x[(ih * d.w + iw) * d.cin + q] * f[(i * d.kw + j) * d.cin + q];
            sum = sum + product;
          }
        want.push_back(sum);
      }
  const GemmPath original = ActiveGemmPath();
  for (GemmPath path : SupportedGemmPaths()) {
    ASSERT_TRUE(SetGemmPath(path).ok());
    Tensor out = RunOk("DepthwiseConv2D", {input, filter}, ConvAttrs(d)).at(0);
    ASSERT_EQ(out.shape(), (Shape{1, oh, ow, d.cin}));
    const auto y = out.data<float>();
    EXPECT_TRUE(std::equal(y.begin(), y.end(), want.begin())) << GemmPathName(path);
  }
  ASSERT_TRUE(SetGemmPath(original).ok());
}

// float64, the generic path (as every real op takes it), on a hand-worked case with M = 2.
TEST(OpsConvTest, DepthwiseConv2DFloat64) {
  const std::vector<double> x = {1, 10, 2, 20, 3, 30, 4, 40};
  const std::vector<double> f = {1, 1, 0, 0.5, 1, 0, 0, 0.5, 1, 0, 0, 0.5, 1, 0, -1, 0.5};
  Tensor out = RunOk("DepthwiseConv2D", {Tensor::FromVector<double>({1, 2, 2, 2}, x),
                                         Tensor::FromVector<double>({2, 2, 2, 2}, f)},
                     {{"padding", std::string("SAME")}})
                   .at(0);
  ASSERT_EQ(out.shape(), (Shape{1, 2, 2, 4}));
  // SAME pads one row and column after: pixel (0, 0) sees all four taps, (1, 1) only its own
  // (the top-left tap).
  const auto v = out.data<double>();
  EXPECT_EQ(std::vector<double>(v.begin(), v.begin() + 4), (std::vector<double>{10, 1, -40, 50}));
  EXPECT_EQ(std::vector<double>(v.end() - 4, v.end()), (std::vector<double>{4, 4, 0, 20}));
}

TEST(OpsConvTest, DepthwiseConv2DErrorsAndInference) {
  Tensor input = RandomTensor({1, 5, 5, 3}, 1);
  ExpectError(RunOp("DepthwiseConv2D", std::vector<Tensor>{input, RandomTensor({3, 3, 4, 2}, 2)}).status(),
              StatusCode::kInvalidArgument, "input channels 3");
  ExpectError(RunOp("DepthwiseConv2D", std::vector<Tensor>{input, RandomTensor({6, 3, 3, 1}, 2)}).status(),
              StatusCode::kInvalidArgument, "larger than the input height");
  ExpectError(RunOp("DepthwiseConv2D", std::vector<Tensor>{input, RandomTensor({3, 3, 3}, 2)}).status(),
              StatusCode::kInvalidArgument, "rank 4");
  ExpectError(RunOp("DepthwiseConv2D",
                    std::vector<Tensor>{input, Tensor::FromVector<double>({1, 1, 3, 1}, {1, 2, 3})})
                  .status(),
              StatusCode::kInvalidArgument, "filter must be float32, got float64");

  auto out = Infer("DepthwiseConv2D", {{DType::kFloat32, {-1, 28, 28, 3}}, {DType::kFloat32, {3, 3, 3, 2}}},
                   {{"strides", std::vector<int64_t>{1, 2, 2, 1}}, {"padding", std::string("SAME")}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape, (Shape{-1, 14, 14, 6}));
  out = Infer("DepthwiseConv2D", {{DType::kFloat32, {-1, 9, 9, -1}}, {DType::kFloat32, {3, 3, -1, 2}}});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{-1, 7, 7, -1}));
}

// ---- Conv2DTranspose ----

// Conv2DTranspose is the input gradient of the VALID convolution whose input is its output.
TEST(OpsConvTest, Conv2DTransposeIsTheInputGradientOfAValidConvolution) {
  struct Case {
    Shape x, filter;  // filter [KH, KW, Cout, Cin]
    std::vector<int64_t> strides;
    Shape out;
  };
  const Case cases[] = {
      {{2, 3, 4, 5}, {3, 3, 2, 5}, {1, 1}, {2, 5, 6, 2}},
      {{1, 3, 3, 2}, {3, 2, 4, 2}, {3, 2}, {1, 9, 6, 4}},
      {{3, 1, 7, 1}, {1, 4, 3, 1}, {1, 2}, {3, 1, 16, 3}},
  };
  uint64_t seed = 40;
  for (const Case& c : cases) {
    const Tensor x = RandomTensor(c.x, seed++);
    const Tensor f = RandomTensor(c.filter, seed++);
    const AttrMap attrs{{"strides", c.strides}};
    const Tensor y = RunOk("Conv2DTranspose", {x, f}, attrs).at(0);
    ASSERT_EQ(y.shape(), c.out);
    const Tensor like(DType::kFloat32, c.out);
    const Tensor want = RunOk("Conv2DBackpropInput", {x, f, like}, attrs).at(0);
    EXPECT_EQ(std::vector<float>(y.data<float>().begin(), y.data<float>().end()),
              std::vector<float>(want.data<float>().begin(), want.data<float>().end()));
    auto spec = Infer("Conv2DTranspose", {{DType::kFloat32, {-1, c.x.dim(1), -1, c.x.dim(3)}}, {DType::kFloat32, c.filter}},
                      attrs);
    ASSERT_TRUE(spec.ok()) << spec.status().ToString();
    EXPECT_EQ((*spec)[0].shape, (Shape{-1, c.out.dim(1), -1, c.out.dim(3)}));
  }
  // By hand: one input pixel per stride spreads the filter; overlaps add.
  const Tensor x = Tensor::FromVector<float>({1, 1, 2, 1}, {1, 10});
  const Tensor f = Tensor::FromVector<float>({1, 3, 1, 1}, {1, 2, 3});
  const Tensor y = RunOk("Conv2DTranspose", {x, f}, {{"strides", std::vector<int64_t>{1, 2}}}).at(0);
  EXPECT_EQ(std::vector<float>(y.data<float>().begin(), y.data<float>().end()), (std::vector<float>{1, 2, 13, 20, 30}));
}

TEST(OpsConvTest, FusedConv2DChecksItsEpilogue) {
  const TensorSpec x{DType::kFloat32, {-1, 5, 5, 2}}, f{DType::kFloat32, {3, 3, 2, 4}};
  const AttrMap attrs{{"padding", std::string("SAME")}, {"activation", std::string("relu")}};
  auto out = Infer("FusedConv2D", {x, f, {DType::kFloat32, {4}}}, attrs);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape, (Shape{-1, 5, 5, 4}));
  ExpectError(Infer("FusedConv2D", {x, f, {DType::kFloat32, {3}}}, attrs).status(), StatusCode::kInvalidArgument,
              "bias length 3 differs from the output channels 4");
  ExpectError(Infer("FusedConv2D", {x, f}, {{"activation", std::string("swish")}}).status(),
              StatusCode::kInvalidArgument, "swish");
  ExpectError(Infer("FusedConv2D", {{DType::kFloat64, {-1, 5, 5, 2}}, {DType::kFloat64, {3, 3, 2, 4}}}).status(),
              StatusCode::kInvalidArgument, "FusedConv2D");
  // A residual has the output's shape: checked at inference as far as it is known, and at run time.
  EXPECT_TRUE(Infer("FusedConv2D", {x, f, {DType::kFloat32, {4}}, {DType::kFloat32, {-1, 5, 5, 4}}}, attrs).ok());
  ExpectError(Infer("FusedConv2D", {x, f, {DType::kFloat32, {4}}, {DType::kFloat32, {-1, 5, 4, 4}}}, attrs).status(),
              StatusCode::kInvalidArgument, "residual [-1,5,4,4] is not the output's shape");
  ExpectError(RunOp("FusedConv2D", std::vector<Tensor>{RandomTensor({2, 5, 5, 2}, 1), RandomTensor({3, 3, 2, 4}, 2),
                                                        RandomTensor({4}, 3), RandomTensor({1, 5, 5, 4}, 4)},
                    attrs)
                  .status(),
              StatusCode::kInvalidArgument, "residual [1,5,5,4] is not the output's shape [2,5,5,4]");
}

TEST(OpsConvTest, Conv2DTransposeErrors) {
  const Tensor x = RandomTensor({1, 3, 3, 2}, 1);
  ExpectError(RunOp("Conv2DTranspose", std::vector<Tensor>{x, RandomTensor({2, 2, 3, 4}, 2)}).status(),
              StatusCode::kInvalidArgument, "input channels");
  ExpectError(RunOp("Conv2DTranspose", std::vector<Tensor>{x, RandomTensor({2, 2, 3, 2}, 2)},
                    {{"padding", std::string("SAME")}})
                  .status(),
              StatusCode::kInvalidArgument, "takes no attr 'padding'");
  ExpectError(RunOp("Conv2DTranspose", std::vector<Tensor>{RandomTensor({3, 3, 2}, 1), RandomTensor({2, 2, 3, 2}, 2)}).status(),
              StatusCode::kInvalidArgument, "rank 4");
}

}  // namespace
}  // namespace lockstep
