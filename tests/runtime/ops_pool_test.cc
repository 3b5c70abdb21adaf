// MaxPool2D and AvgPool2D against direct float64 loops written here from the TensorFlow
// definitions, and their padding semantics and errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "runtime/op_registry.h"
#include "tests/runtime/op_test_util.h"

namespace lockstep {
namespace {

using op_test::ExpectError;
using op_test::ExpectNear;
using op_test::Infer;
using op_test::kNaN;
using op_test::kU;
using op_test::RandomTensor;
using op_test::RunOk;
using op_test::TfWindow;
using op_test::ToDouble;

struct PoolCase {
  int64_t n, h, w, c, kh, kw, sh, sw;
  bool same;
  int64_t dh = 1, dw = 1;  // dilations: the taps' distance
};

void PoolRef(bool max, const PoolCase& p, const Tensor& input, Shape* shape,
             std::vector<double>* want, std::vector<double>* tol) {
  int64_t oh, ow, pt, pl;
  TfWindow(p.h, (p.kh - 1) * p.dh + 1, p.sh, p.same, &oh, &pt);
  TfWindow(p.w, (p.kw - 1) * p.dw + 1, p.sw, p.same, &ow, &pl);
  *shape = Shape{p.n, oh, ow, p.c};
  const auto x = ToDouble(input);
  want->clear();
  tol->clear();
  for (int64_t b = 0; b < p.n; ++b)
    for (int64_t y = 0; y < oh; ++y)
      for (int64_t z = 0; z < ow; ++z)
        for (int64_t q = 0; q < p.c; ++q) {
          double best = -INFINITY, sum = 0, mag = 0;
          int count = 0;
          for (int64_t i = 0; i < p.kh; ++i)
            for (int64_t j = 0; j < p.kw; ++j) {
              const int64_t ih = y * p.sh - pt + i * p.dh, iw = z * p.sw - pl + j * p.dw;
              if (ih < 0 || ih >= p.h || iw < 0 || iw >= p.w) continue;
              const double v = x[((b * p.h + ih) * p.w + iw) * p.c + q];
              best = std::max(best, v);
              sum += v;
              mag += std::fabs(v);
              ++count;
            }
          want->push_back(max ? best : sum / count);
          tol->push_back(max ? 0.0 : (count + 1) * kU * mag / count);
        }
}

TEST(OpsPoolTest, PoolingMatchesReference) {
  const PoolCase cases[] = {
      {1, 5, 5, 1, 2, 2, 2, 2, false},  {1, 5, 5, 1, 2, 2, 2, 2, true},
      {2, 7, 8, 3, 3, 3, 2, 2, true},   {2, 7, 8, 3, 3, 3, 1, 1, true},
      {1, 6, 11, 17, 3, 2, 2, 3, true}, {1, 6, 11, 17, 3, 2, 2, 3, false},
      {0, 4, 4, 3, 2, 2, 2, 2, true},   {1, 1, 1, 33, 3, 3, 1, 1, true},
      {3, 9, 9, 16, 5, 5, 2, 2, true},  {8, 32, 32, 16, 2, 2, 2, 2, false},
      // Dilated (ONNX's pools): taps 2 or 3 apart, SAME padding over the extent, strides
      // smaller and larger than the dilation.
      {2, 9, 10, 3, 3, 2, 1, 1, false, 2, 3}, {2, 9, 10, 3, 3, 2, 1, 2, true, 2, 3},
      {1, 7, 7, 5, 2, 2, 3, 3, true, 3, 3},   {1, 12, 5, 4, 4, 1, 2, 1, false, 3, 1},
  };
  uint64_t seed = 100;
  for (bool max : {true, false}) {
    for (const PoolCase& p : cases) {
      Tensor input = RandomTensor({p.n, p.h, p.w, p.c}, seed++, -5, 5);
      Shape shape;
      std::vector<double> want, tol;
      PoolRef(max, p, input, &shape, &want, &tol);
      AttrMap attrs{{"ksize", std::vector<int64_t>{p.kh, p.kw}},
                    {"strides", std::vector<int64_t>{p.sh, p.sw}},
                    {"padding", std::string(p.same ? "SAME" : "VALID")}};
      if (p.dh != 1 || p.dw != 1) attrs.Set("dilations", std::vector<int64_t>{p.dh, p.dw});
      Tensor out = RunOk(max ? "MaxPool2D" : "AvgPool2D", {input}, attrs).at(0);
      ExpectNear(out, shape, want, tol, std::string(max ? "max " : "avg ") + shape.ToString());
    }
  }
}

TEST(OpsPoolTest, PoolingPaddingSemantics) {
  // 3x3 values 1..9, 3x3 window, stride 1, SAME: the corner averages its 4 real values (TF),
  // it does not count padding as zeros.
  std::vector<float> v{1, 2, 3, 4, 5, 6, 7, 8, 9};
  Tensor x = Tensor::FromVector<float>({1, 3, 3, 1}, v);
  AttrMap same{{"ksize", std::vector<int64_t>{3, 3}},
               {"strides", std::vector<int64_t>{1, 1}},
               {"padding", std::string("SAME")}};
  Tensor avg = RunOk("AvgPool2D", {x}, same).at(0);
  EXPECT_EQ(avg.data<float>()[0], 3.0f);  // (1 + 2 + 4 + 5) / 4
  EXPECT_EQ(avg.data<float>()[4], 5.0f);
  // MaxPool ignores padding: all-negative input stays negative at the borders.
  Tensor neg = Tensor::FromVector<float>({1, 3, 3, 1}, std::vector<float>(9, -5.0f));
  Tensor mx = RunOk("MaxPool2D", {neg}, same).at(0);
  for (float o : mx.data<float>()) EXPECT_EQ(o, -5.0f);
  // A NaN under the window wins.
  v[0] = kNaN;
  mx = RunOk("MaxPool2D", {Tensor::FromVector<float>({1, 3, 3, 1}, v)}, same).at(0);
  EXPECT_TRUE(std::isnan(mx.data<float>()[0]));
  EXPECT_FALSE(std::isnan(mx.data<float>()[8]));
  // strides default to ksize (Keras): 4x4 with 2x2 windows gives 2x2.
  Tensor y = RandomTensor({1, 4, 4, 2}, 3);
  EXPECT_EQ(RunOk("MaxPool2D", {y}, {{"ksize", std::vector<int64_t>{2, 2}}}).at(0).shape(),
            (Shape{1, 2, 2, 2}));
}

TEST(OpsPoolTest, PoolingErrors) {
  Tensor x = RandomTensor({1, 3, 3, 2}, 1);
  ExpectError(RunOp("MaxPool2D", std::vector<Tensor>{x}).status(), StatusCode::kInvalidArgument,
              "ksize");
  ExpectError(
      RunOp("AvgPool2D", std::vector<Tensor>{x}, {{"ksize", std::vector<int64_t>{4, 4}}}).status(),
      StatusCode::kInvalidArgument, "larger than the input");
  ExpectError(RunOp("AvgPool2D", std::vector<Tensor>{RandomTensor({3, 3}, 1)},
                    {{"ksize", std::vector<int64_t>{2, 2}}})
                  .status(),
              StatusCode::kInvalidArgument, "rank 4");
  auto out = Infer("MaxPool2D", {{DType::kFloat32, {-1, 7, -1, 3}}},
                   {{"ksize", std::vector<int64_t>{2, 2}}, {"padding", std::string("SAME")}});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{-1, 4, -1, 3}));
  // A dilated window's extent is what must fit: 3 taps 2 apart span 5 rows.
  const AttrMap dilated{{"ksize", std::vector<int64_t>{3, 1}}, {"strides", std::vector<int64_t>{1, 1}},
                        {"dilations", std::vector<int64_t>{2, 1}}};
  out = Infer("MaxPool2D", {{DType::kFloat32, {-1, 7, 4, 3}}}, dilated);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{-1, 3, 4, 3}));
  ExpectError(RunOp("MaxPool2D", std::vector<Tensor>{RandomTensor({1, 4, 4, 1}, 1)}, dilated).status(),
              StatusCode::kInvalidArgument, "larger than the input");
  ExpectError(RunOp("AvgPool2D", std::vector<Tensor>{x}, {{"ksize", std::vector<int64_t>{2, 2}},
                                                          {"dilations", std::vector<int64_t>{0, 1}}})
                  .status(),
              StatusCode::kInvalidArgument, "dilations");
  // The gradients have no dilations: training a dilated pool is an error, not a wrong answer.
  Tensor dy = RandomTensor({1, 3, 4, 3}, 2);
  ExpectError(RunOp("MaxPool2DGrad", std::vector<Tensor>{RandomTensor({1, 7, 4, 3}, 1), dy}, dilated).status(),
              StatusCode::kInvalidArgument, "dilations are not supported");
}

}  // namespace
}  // namespace lockstep
