// Window ops of the ONNX importer whose translations compose several nodes, each against a
// direct computation written here: a 3-D transposed convolution (strides, pads, dilations,
// output_padding, a bias), a transposed convolution whose dilated filter is a graph input, and
// MaxPool's Indices output.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "runtime/onnx/onnx_model.h"
#include "runtime/session.h"
#include "tests/runtime/onnx_test_util.h"

namespace lockstep {
namespace {

using testing_onnx::OnnxModelBuilder;
using testing_onnx::Pattern;

StatusOr<std::vector<NamedTensor>> ImportAndRun(OnnxModelBuilder& b, std::vector<NamedTensor> feed) {
  LS_ASSIGN_OR_RETURN(Model model, ImportOnnxModel(b.proto(), std::filesystem::temp_directory_path()));
  LS_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Create(std::move(model)));
  std::vector<NamedTensor> out;
  LS_RETURN_IF_ERROR(session->Run("serving_default", feed, &out));
  return out;
}

// y[n, m, o...] = b[m] + sum x[n, c, i...] w[c, m, k...] over o = i * s - pad_begin + k * dil.
std::vector<float> ConvTranspose3DByHand(const Tensor& x, const Tensor& w, const std::vector<float>& bias,
                                         const int64_t s[3], const int64_t pads[6], const int64_t dil[3],
                                         const int64_t extra[3], Shape* out_shape) {
  const Shape& xs = x.shape();
  const Shape& ws = w.shape();
  const int64_t n = xs[0], c = xs[1], m = ws[1];
  int64_t in[3], k[3], out[3];
  for (int d = 0; d < 3; ++d) {
    in[d] = xs[2 + d];
    k[d] = ws[2 + d];
    out[d] = (in[d] - 1) * s[d] + (k[d] - 1) * dil[d] + 1 + extra[d] - pads[d] - pads[3 + d];
  }
  *out_shape = Shape{n, m, out[0], out[1], out[2]};
  std::vector<float> y(static_cast<size_t>(out_shape->num_elements()));
  const auto xv = x.data<float>();
  const auto wv = w.data<float>();
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t mo = 0; mo < m; ++mo) {
      for (int64_t o0 = 0; o0 < out[0]; ++o0) {
        for (int64_t o1 = 0; o1 < out[1]; ++o1) {
          for (int64_t o2 = 0; o2 < out[2]; ++o2) {
            double acc = bias[static_cast<size_t>(mo)];
            for (int64_t ci = 0; ci < c; ++ci) {
              for (int64_t k0 = 0; k0 < k[0]; ++k0) {
                for (int64_t k1 = 0; k1 < k[1]; ++k1) {
                  for (int64_t k2 = 0; k2 < k[2]; ++k2) {
                    const int64_t t0 = o0 + pads[0] - k0 * dil[0], t1 = o1 + pads[1] - k1 * dil[1],
                                  t2 = o2 + pads[2] - k2 * dil[2];
                    if (t0 % s[0] != 0 || t1 % s[1] != 0 || t2 % s[2] != 0) continue;
                    const int64_t i0 = t0 / s[0], i1 = t1 / s[1], i2 = t2 / s[2];
                    if (t0 < 0 || t1 < 0 || t2 < 0 || i0 >= in[0] || i1 >= in[1] || i2 >= in[2]) continue;
                    acc += double{xv[static_cast<size_t>((((b * c + ci) * in[0] + i0) * in[1] + i1) * in[2] + i2)]} *
                           double{wv[static_cast<size_t>((((ci * m + mo) * k[0] + k0) * k[1] + k1) * k[2] + k2)]};
                  }
                }
              }
            }
            y[static_cast<size_t>((((b * m + mo) * out[0] + o0) * out[1] + o1) * out[2] + o2)] = static_cast<float>(acc);
          }
        }
      }
    }
  }
  return y;
}

TEST(OnnxWindowTest, ConvTranspose3DWithStridesPadsDilationsAndOutputPaddingAnswersAsComputedByHand) {
  const int64_t s[3] = {2, 1, 2}, pads[6] = {1, 0, 0, 0, 1, 1}, dil[3] = {1, 2, 1}, extra[3] = {1, 0, 1};
  const Tensor x = Pattern(Shape{2, 3, 3, 4, 3}, 1), w = Pattern(Shape{3, 2, 2, 2, 3}, 2);
  const std::vector<float> bias{0.25f, -0.5f};
  Shape out_shape;
  const std::vector<float> want = ConvTranspose3DByHand(x, w, bias, s, pads, dil, extra, &out_shape);

  OnnxModelBuilder b(13);
  b.Input("x", {-1, 3, 3, 4, 3});
  b.Input("w", {3, 2, 2, 2, 3});
  b.Output("y", {-1, 2, out_shape[2], out_shape[3], out_shape[4]});
  b.Initializer("b", {2}, bias);
  onnx::NodeProto* node = b.Node("ConvTranspose", {"x", "w", "b"}, {"y"});
  OnnxModelBuilder::IntsAttr(node, "strides", {s[0], s[1], s[2]});
  OnnxModelBuilder::IntsAttr(node, "pads", {pads[0], pads[1], pads[2], pads[3], pads[4], pads[5]});
  OnnxModelBuilder::IntsAttr(node, "dilations", {dil[0], dil[1], dil[2]});
  OnnxModelBuilder::IntsAttr(node, "output_padding", {extra[0], extra[1], extra[2]});
  StatusOr<std::vector<NamedTensor>> out = ImportAndRun(b, {{"x", x}, {"w", w}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const Tensor& y = (*out)[0].tensor;
  ASSERT_EQ(y.shape(), out_shape);
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(y.data<float>()[i], want[i], 1e-5) << i;
}

TEST(OnnxWindowTest, ADilatedFilterFedAtRunTimeAnswersAsTheSameFilterAsAWeight) {
  const Tensor x = Pattern(Shape{1, 2, 5, 4}, 3), w = Pattern(Shape{2, 3, 3, 2}, 4);
  std::vector<float> weights(w.data<float>().begin(), w.data<float>().end());
  std::vector<std::vector<float>> answers;
  for (bool fed : {true, false}) {
    OnnxModelBuilder b(13);
    b.Input("x", {1, 2, 5, 4});
    if (fed) {
      b.Input("w", {2, 3, 3, 2});
    } else {
      b.Initializer("w", {2, 3, 3, 2}, weights);
    }
    b.Output("y", {1, 3, -1, -1});
    OnnxModelBuilder::IntsAttr(b.Node("ConvTranspose", {"x", "w"}, {"y"}), "dilations", {2, 3});
    StatusOr<std::vector<NamedTensor>> out =
        ImportAndRun(b, fed ? std::vector<NamedTensor>{{"x", x}, {"w", w}} : std::vector<NamedTensor>{{"x", x}});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ((*out)[0].tensor.shape(), (Shape{1, 3, 9, 7}));
    answers.emplace_back((*out)[0].tensor.data<float>().begin(), (*out)[0].tensor.data<float>().end());
  }
  EXPECT_EQ(answers[0], answers[1]);
}

TEST(OnnxWindowTest, MaxPoolIndicesPointAtEachMaximumInTheFlattenedInput) {
  // Two images of two channels, 4x5, pooled 2x2 with stride 2, padding 1 at the top and left.
  const Tensor x = Pattern(Shape{2, 2, 4, 5}, 5);
  OnnxModelBuilder b(12);
  b.Input("x", {2, 2, 4, 5});
  b.Output("y", {2, 2, 2, 3});
  b.Output("i", {2, 2, 2, 3}, onnx::TensorProto::INT64);
  onnx::NodeProto* pool = b.Node("MaxPool", {"x"}, {"y", "i"});
  OnnxModelBuilder::IntsAttr(pool, "kernel_shape", {2, 2});
  OnnxModelBuilder::IntsAttr(pool, "strides", {2, 2});
  OnnxModelBuilder::IntsAttr(pool, "pads", {1, 1, 0, 0});
  StatusOr<std::vector<NamedTensor>> out = ImportAndRun(b, {{"x", x}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const auto y = (*out)[0].tensor.data<float>();
  const auto idx = (*out)[1].tensor.data<int64_t>();
  const auto xv = x.data<float>();
  for (int64_t plane = 0; plane < 4; ++plane) {
    for (int64_t oh = 0; oh < 2; ++oh) {
      for (int64_t ow = 0; ow < 3; ++ow) {
        float best = -INFINITY;
        int64_t at = -1;
        for (int64_t h = oh * 2 - 1; h < oh * 2 + 1; ++h) {
          for (int64_t w = ow * 2 - 1; w < ow * 2 + 1; ++w) {
            if (h < 0 || w < 0 || h >= 4 || w >= 5) continue;
            const int64_t flat = plane * 20 + h * 5 + w;
            if (at < 0 || xv[static_cast<size_t>(flat)] > best) {
              best = xv[static_cast<size_t>(flat)];
              at = flat;
            }
          }
        }
        const size_t o = static_cast<size_t>(plane * 6 + oh * 3 + ow);
        EXPECT_EQ(y[o], best) << o;
        EXPECT_EQ(idx[o], at) << o;
      }
    }
  }
}

}  // namespace
}  // namespace lockstep
