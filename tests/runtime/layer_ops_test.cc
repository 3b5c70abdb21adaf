// The ops behind model-train's Embedding, LayerNorm and Dropout layers and its one-hot
// targets: gradients against finite differences, values, determinism and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "runtime/autodiff/gradients.h"
#include "runtime/graph_builder.h"
#include "runtime/op_registry.h"
#include "runtime/session.h"
#include "tests/runtime/gradient_check_util.h"
#include "tests/runtime/op_test_util.h"

namespace lockstep {
namespace {

using grad_test::CheckGradients;

TEST(LayerOpsGradientCheck, GatherWithRepeatedIndices) {
  CheckGradients(
      {"Gather", {Shape{5, 3}}, [](GraphBuilder& g, const std::vector<std::string>& x) {
         // Row 1 is gathered twice: its gradient is the sum of both.
         const std::string ids = g.Const("ids", Tensor::FromVector<int32_t>(Shape{2, 2}, {1, 4, 1, 0}));
         return std::pair{g.Op("Gather", {x[0], ids}), Shape{2, 2, 3}};
       }});
}

TEST(LayerOpsGradientCheck, LayerNormalizeWithScaleAndOffset) {
  for (double epsilon : {1e-5, 0.5}) {
    CheckGradients({"LayerNormalize eps=" + std::to_string(epsilon),
                    {Shape{3, 5}, Shape{5}, Shape{5}},
                    [epsilon](GraphBuilder& g, const std::vector<std::string>& x) {
                      AttrMap attrs;
                      attrs.Set("epsilon", epsilon);
                      const std::string y = g.Op("LayerNormalize", {x[0]}, attrs);
                      return std::pair{g.Op("Add", {g.Op("Mul", {y, x[1]}), x[2]}), Shape{3, 5}};
                    },
                    0.1,
                    2.0});
  }
}

TEST(LayerOpsGradientCheck, DropoutPassesTheGradientOfTheKeptElements) {
  CheckGradients(
      {"Dropout", {Shape{4, 6}}, [](GraphBuilder& g, const std::vector<std::string>& x) {
         AttrMap attrs;
         attrs.Set("rate", 0.5);
         const std::string seed = g.Const("seed", Tensor::FromVector<int64_t>(Shape{}, {42}));
         return std::pair{g.Op("Mul", {x[0], g.Op("DropoutMask", {x[0], seed}, attrs)}), Shape{4, 6}};
       }});
}

// Mixed precision: a float32 weight cast to bf16 feeds a product; its gradient comes back
// through the cast as float32, and is itself a bf16 product: exactly X^T R computed in bf16.
TEST(LayerOpsGradients, ACastToBf16PassesAFloat32GradientFromABf16Product) {
  GraphBuilder g;
  const std::string x = g.Input("x", DType::kFloat32, Shape{5, 4});
  const std::string w = g.Input("w", DType::kFloat32, Shape{4, 3});
  AttrMap to_bf16;
  to_bf16.Set("dtype", DType::kBFloat16);
  AttrMap bf16;
  bf16.Set("precision", std::string("bfloat16"));
  const Tensor r = op_test::RandomTensor(Shape{5, 3}, 9);
  const std::string y = g.Op("MatMul", {x, g.Op("Cast", {w}, to_bf16)}, bf16);
  const std::string loss = g.Op("Sum", {g.Op("Mul", {y, g.Const("r", r)})});
  Signature sig;
  sig.name = "s";
  sig.inputs = {{"x", x, DType::kFloat32, Shape{5, 4}}, {"w", w, DType::kFloat32, Shape{4, 3}}};
  sig.outputs = {{"loss", loss, DType::kFloat32, Shape{}}};
  g.AddSignature(sig);
  Model model = std::move(g).Build();
  const std::vector<std::string> wrt = {w};
  StatusOr<std::vector<std::string>> grads = AddGradients(model, loss, wrt);
  ASSERT_TRUE(grads.ok()) << grads.status().ToString();
  model.graph.signatures[0].outputs.push_back({"dw", grads.value()[0], DType::kFloat32, Shape{4, 3}});
  StatusOr<std::unique_ptr<Session>> session = Session::Create(std::move(model));
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  const Tensor xv = op_test::RandomTensor(Shape{5, 4}, 7), wv = op_test::RandomTensor(Shape{4, 3}, 8);
  std::vector<NamedTensor> out;
  ASSERT_TRUE(session.value()->Run("s", std::vector<NamedTensor>{{"x", xv}, {"w", wv}}, &out).ok());
  AttrMap xt = bf16;
  xt.Set("transpose_a", true);
  StatusOr<std::vector<Tensor>> want = RunOp("MatMul", std::vector<Tensor>{xv, r}, xt);
  ASSERT_TRUE(want.ok());
  EXPECT_EQ(out[1].tensor.dtype(), DType::kFloat32);
  EXPECT_TRUE(out[1].tensor.BitwiseEqual(want.value()[0]));
  // ... and bf16 it is: the float32 product differs.
  xt.Set("precision", std::string("float32"));
  EXPECT_FALSE(out[1].tensor.BitwiseEqual(RunOp("MatMul", std::vector<Tensor>{xv, r}, xt).value()[0]));
}

TEST(LayerOps, LayerNormalizeRowsHaveZeroMeanAndUnitVariance) {
  const Tensor x = op_test::RandomTensor(Shape{4, 64}, 5, -3.0f, 7.0f);
  StatusOr<std::vector<Tensor>> y = RunOp("LayerNormalize", std::vector<Tensor>{x});
  ASSERT_TRUE(y.ok()) << y.status().ToString();
  const auto v = y.value()[0].data<float>();
  for (int r = 0; r < 4; ++r) {
    double sum = 0, sq = 0;
    for (int i = 0; i < 64; ++i) sum += v[static_cast<size_t>(r * 64 + i)];
    for (int i = 0; i < 64; ++i) sq += std::pow(v[static_cast<size_t>(r * 64 + i)] - sum / 64, 2);
    EXPECT_NEAR(sum / 64, 0.0, 1e-6);
    EXPECT_NEAR(sq / 64, 1.0, 1e-3);  // epsilon 1e-5 against a variance of about 8
  }
}

// With scale and offset (what FuseLayerNormScaleOffset makes of a model's Mul and Add): the
// same bits as the three ops, for float32 (the vectorised row, at widths around its 16 lanes)
// and float64, and a clear error for a row of the wrong width.
TEST(LayerOps, LayerNormalizeWithScaleAndOffsetIsTheSeparateOpsBitForBit) {
  for (int64_t d : {1, 15, 16, 17, 96, 197}) {
    const Tensor x = op_test::RandomTensor(Shape{5, d}, 3, -3.0f, 7.0f);
    const Tensor scale = op_test::RandomTensor(Shape{d}, 4, -2.0f, 2.0f);
    const Tensor offset = op_test::RandomTensor(Shape{d}, 5, -1.0f, 1.0f);
    const Tensor normal = op_test::Run1("LayerNormalize", {x});
    const Tensor scaled = op_test::Run1("Mul", {normal, scale});
    EXPECT_TRUE(op_test::Run1("LayerNormalize", {x, scale}).BitwiseEqual(scaled)) << d;
    EXPECT_TRUE(op_test::Run1("LayerNormalize", {x, scale, offset}).BitwiseEqual(op_test::Run1("Add", {scaled, offset})))
        << d;
  }
  auto f64 = [](const std::vector<double>& v) { return Tensor::FromVector<double>(Shape{static_cast<int64_t>(v.size())}, v); };
  const Tensor x = Tensor::FromVector<double>(Shape{2, 3}, {1, 2, 4, -1, 0.5, 3});
  const Tensor scale = f64({0.5, -2, 3}), offset = f64({1, 0, -1});
  const Tensor want = op_test::Run1("Add", {op_test::Run1("Mul", {op_test::Run1("LayerNormalize", {x}), scale}), offset});
  EXPECT_TRUE(op_test::Run1("LayerNormalize", {x, scale, offset}).BitwiseEqual(want));

  const Status wrong = RunOp("LayerNormalize", std::vector<Tensor>{x, f64({1, 2})}).status();
  EXPECT_EQ(wrong.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.message().find("scale must be float64 [3]"), std::string::npos) << wrong.ToString();
  EXPECT_EQ(op_test::KernelStatus("LayerNormalize", {x, scale, f64({1})}).code(), StatusCode::kInvalidArgument);
}

std::vector<float> Mask(const Tensor& x, int64_t seed, double rate, int64_t stream) {
  AttrMap attrs;
  attrs.Set("rate", rate);
  attrs.Set("stream", stream);
  StatusOr<std::vector<Tensor>> m =
      RunOp("DropoutMask", std::vector<Tensor>{x, Tensor::FromVector<int64_t>(Shape{}, {seed})}, attrs);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  if (!m.ok()) return {};
  const auto v = m.value()[0].data<float>();
  return {v.begin(), v.end()};
}

TEST(LayerOps, DropoutMaskIsSeededAndDropsTheRateOnAverage) {
  const Tensor x(DType::kFloat32, Shape{100, 100});
  const std::vector<float> a = Mask(x, 7, 0.25, 0);
  ASSERT_EQ(a.size(), 10000u);
  int dropped = 0;
  for (float v : a) {
    ASSERT_TRUE(v == 0.0f || v == static_cast<float>(1.0 / 0.75)) << v;
    dropped += v == 0.0f;
  }
  // Binomial(10000, 0.25): standard deviation about 43; 5 of them either way.
  EXPECT_NEAR(dropped, 2500, 220);
  EXPECT_EQ(a, Mask(x, 7, 0.25, 0));  // the same inputs, the same mask
  EXPECT_NE(a, Mask(x, 8, 0.25, 0));  // another step
  EXPECT_NE(a, Mask(x, 7, 0.25, 1));  // another layer
  for (float v : Mask(x, 7, 0.0, 0)) ASSERT_EQ(v, 1.0f);
  AttrMap bad;
  bad.Set("rate", 1.0);
  StatusOr<std::vector<Tensor>> r =
      RunOp("DropoutMask", std::vector<Tensor>{x, Tensor::FromVector<int64_t>(Shape{}, {1})}, bad);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "DropoutMask: attr 'rate' must be in [0, 1), got 1.000000");
}

TEST(LayerOps, OneHotAndItsRangeCheck) {
  AttrMap depth3;
  depth3.Set("depth", int64_t{3});
  StatusOr<std::vector<Tensor>> y =
      RunOp("OneHot", std::vector<Tensor>{Tensor::FromVector<int32_t>(Shape{2}, {2, 0})}, depth3);
  ASSERT_TRUE(y.ok()) << y.status().ToString();
  EXPECT_EQ(y.value()[0].shape(), (Shape{2, 3}));
  const auto v = y.value()[0].data<float>();
  EXPECT_EQ(std::vector<float>(v.begin(), v.end()), (std::vector<float>{0, 0, 1, 1, 0, 0}));
  y = RunOp("OneHot", std::vector<Tensor>{Tensor::FromVector<int64_t>(Shape{2}, {1, 3})}, depth3);
  ASSERT_FALSE(y.ok());
  EXPECT_EQ(y.status().message(), "OneHot: indices[1] = 3 is out of range [0, 3) for depth 3");
}

TEST(LayerOps, BroadcastLikeRepeatsStringsForEveryRow) {
  const Tensor names = Tensor::FromVector<std::string>(Shape{1, 2}, {"cat", "dog"});
  StatusOr<std::vector<Tensor>> y =
      RunOp("BroadcastLike", std::vector<Tensor>{names, Tensor(DType::kFloat32, Shape{3, 2})});
  ASSERT_TRUE(y.ok()) << y.status().ToString();
  const auto v = y.value()[0].data<std::string>();
  EXPECT_EQ(std::vector<std::string>(v.begin(), v.end()),
            (std::vector<std::string>{"cat", "dog", "cat", "dog", "cat", "dog"}));
}

}  // namespace
}  // namespace lockstep
