// SinkLayoutChanges (layout_sinking.cc): the Transposes and Reshapes an importer leaves between
// the ops that compute move below element-wise ops, constants, reductions and products, and
// cancel, with the same bits (or, for reordered sums, within rounding).
#include <gtest/gtest.h>

#include "graph_test_util.h"
#include "runtime/passes/passes.h"
#include "runtime/thread_pool.h"

namespace lockstep {
namespace {

using testing::CountOps;
using testing::ExpectOptimisedIsPlain;
using testing::kToNchw;
using testing::kToNhwc;
using testing::OneInOneOut;
using testing::RandomTensor;
using testing::RunUnoptimised;
using testing::ToLayout;

// An NHWC op between two NCHW element-wise ones, as the ONNX importer lays out Conv -> Relu ->
// Conv -> Add(residual): the Transposes sink below Relu, Add and a scalar Mul and cancel, and the
// outputs are the same bits as without the pass.
TEST(LayoutSinking, TransposesSinkBelowElementwiseOpsAndCancel) {
  GraphBuilder g;
  std::mt19937 rng(5);
  std::string x = g.Input("x", DType::kFloat32, Shape{-1, 4, 4, 3});  // NHWC, as a convolution's output
  auto nchw = [&](const std::string& v, const char* name) { return ToLayout(g, v, kToNchw, name); };
  auto nhwc = [&](const std::string& v, const char* name) { return ToLayout(g, v, kToNhwc, name); };
  std::string a = g.Op("Relu", {nchw(x, "t1")}, {}, "relu");
  std::string b = g.Op("Softmax", {nhwc(a, "t2")}, {}, "nhwc_op");  // stands for the next convolution
  std::string sum = g.Op("Add", {nchw(b, "t3"), a}, {}, "residual");
  std::string half = g.Op("Mul", {sum, g.Const("half", Tensor::Scalar<float>(0.5f))}, {}, "scaled");
  std::string y = g.Op("Sigmoid", {nhwc(half, "t4")}, {}, "y");
  // An explicit NCHW padding (a strided convolution's) between two: its pads follow their axes.
  std::string z = g.Input("z", DType::kFloat32, Shape{-1, 4, 5, 3});
  std::string pads = g.Const("pads", Tensor::FromVector<int64_t>(Shape{8}, {0, 0, 1, 0, 0, 0, 0, 2}));
  std::string padded = g.Op("Pad", {nchw(z, "t5"), pads}, AttrMap{{"mode", std::string("constant")}}, "pad");
  std::string w = g.Op("Tanh", {nhwc(padded, "t6")}, {}, "w");
  Signature sig = OneInOneOut("x", Shape{-1, 4, 4, 3}, y, Shape{-1, 4, 4, 3});
  sig.inputs.push_back({"z", z, DType::kFloat32, Shape{-1, 4, 5, 3}});
  sig.outputs.push_back({"w", w, DType::kFloat32, Shape{-1, 5, 7, 3}});
  g.AddSignature(sig);
  Model m = std::move(g).Build();
  const Model original = m;
  ASSERT_TRUE(SinkLayoutChanges(m).ok());
  ASSERT_TRUE(EliminateDeadNodes(m).ok());
  EXPECT_EQ(CountOps(m, "Transpose"), 0);
  std::vector<NamedTensor> inputs = {{"x", RandomTensor(Shape{2, 4, 4, 3}, rng)}, {"z", RandomTensor(Shape{2, 4, 5, 3}, rng)}};
  const std::vector<NamedTensor> sunk = RunUnoptimised(m, inputs), plain = RunUnoptimised(original, inputs);
  ASSERT_EQ(sunk.size(), 2u);
  EXPECT_EQ(sunk[1].tensor.shape(), (Shape{2, 5, 7, 3}));
  for (size_t k = 0; k < 2; ++k) EXPECT_TRUE(sunk[k].tensor.BitwiseEqual(plain[k].tensor)) << sunk[k].name;
}

// ConvNeXt's block as an NCHW model's import lays it out in an NHWC runtime: the block's
// result goes back to NCHW, is scaled per channel by a constant [C, 1, 1] (its layer scale) and
// added to the block's input before the next block's NHWC op. The Transpose moves below the
// constant's Mul (the constant becomes [1, 1, 1, C]) and the residual Add, and then every
// Transpose cancels, with the same bits. A constant whose axes the Transpose would reorder
// ([C, H, 1]) keeps its Transpose.
TEST(LayoutSinking, TransposesSinkBelowAPerChannelConstant) {
  GraphBuilder g;
  std::mt19937 rng(13);
  std::string x = g.Input("x", DType::kFloat32, Shape{-1, 4, 5, 3});
  auto nchw = [&](const std::string& v, const char* name) { return ToLayout(g, v, kToNchw, name); };
  auto nhwc = [&](const std::string& v, const char* name) { return ToLayout(g, v, kToNhwc, name); };
  std::string input = nchw(x, "t_in");
  std::string block = g.Op("Softmax", {nhwc(input, "t1")}, {}, "block");  // stands for the block's NHWC ops
  std::string scale = g.Const("layer_scale", RandomTensor(Shape{3, 1, 1}, rng));
  std::string scaled = g.Op("Mul", {scale, nchw(block, "t2")}, {}, "scaled");
  std::string sum = g.Op("Add", {scaled, input}, {}, "residual");
  std::string y = g.Op("Sigmoid", {nhwc(sum, "t3")}, {}, "y");
  std::string z = g.Input("z", DType::kFloat32, Shape{-1, 4, 5, 3});
  std::string mixed = g.Op("Mul", {nchw(z, "tz"), g.Const("by_pixel", RandomTensor(Shape{3, 4, 1}, rng))}, {}, "mixed");
  Signature sig = OneInOneOut("x", Shape{-1, 4, 5, 3}, y, Shape{-1, 4, 5, 3});
  sig.inputs.push_back({"z", z, DType::kFloat32, Shape{-1, 4, 5, 3}});
  sig.outputs.push_back({"mixed", mixed, DType::kFloat32, Shape{-1, 3, 4, 5}});
  g.AddSignature(sig);
  Model m = std::move(g).Build();
  const Model original = m;
  ASSERT_TRUE(SinkLayoutChanges(m).ok());
  ASSERT_TRUE(EliminateDeadNodes(m).ok());
  EXPECT_EQ(CountOps(m, "Transpose"), 1);  // tz
  EXPECT_EQ(m.graph.FindNode("tz")->op, "Transpose");
  std::vector<NamedTensor> inputs = {{"x", RandomTensor(Shape{2, 4, 5, 3}, rng)}, {"z", RandomTensor(Shape{2, 4, 5, 3}, rng)}};
  const std::vector<NamedTensor> sunk = RunUnoptimised(m, inputs), plain = RunUnoptimised(original, inputs);
  ASSERT_EQ(sunk.size(), 2u);
  for (size_t k = 0; k < 2; ++k) EXPECT_TRUE(sunk[k].tensor.BitwiseEqual(plain[k].tensor)) << sunk[k].name;
}

// A squeeze-and-excitation block as an NCHW model's import lays it out in an NHWC runtime: the
// global average pool (Mean over H, W, kept), its scale through an activation, and the channel
// scale, each between Transposes. The reductions move below their Transposes (kept dimensions,
// dropped ones, a Max), and then every Transpose cancels. Max's bits are unchanged; the Means
// sum in the untransposed order, so they agree to within rounding.
TEST(LayoutSinking, ReductionsSinkBelowTransposesAndAnSEBlockLosesThemAll) {
  GraphBuilder g;
  std::mt19937 rng(9);
  std::string x = g.Input("x", DType::kFloat32, Shape{-1, 5, 6, 4});
  auto nchw = [&](const std::string& v, const char* name) { return ToLayout(g, v, kToNchw, name); };
  auto nhwc = [&](const std::string& v, const char* name) { return ToLayout(g, v, kToNhwc, name); };
  std::string t = nchw(x, "t");
  std::string pooled = g.Op("Mean", {t}, AttrMap{{"axes", std::vector<int64_t>{2, 3}}, {"keep_dims", true}}, "pool");
  std::string scale = g.Op("Sigmoid", {nchw(g.Op("Softmax", {nhwc(pooled, "p1")}, {}, "fc"), "p2")}, {}, "scale");
  std::string y = g.Op("Silu", {nhwc(g.Op("Mul", {t, scale}, {}, "excite"), "back")}, {}, "y");
  // Dropped dimensions: Mean over H of NCHW is [N, C, W], which is NHWC's Mean over H moved
  // by [0, 2, 1]; Max over C and W leaves [N, H] in both layouts, no Transpose at all.
  std::string z = g.Input("z", DType::kFloat32, Shape{-1, 5, 6, 4});
  std::string dropped = g.Op("Mean", {nchw(z, "tz")}, AttrMap{{"axes", std::vector<int64_t>{-2}}}, "dropped");
  std::string w = g.Input("w", DType::kFloat32, Shape{-1, 5, 6, 4});
  std::string maxed = g.Op("Max", {nchw(w, "tw")}, AttrMap{{"axes", std::vector<int64_t>{1, 3}}}, "maxed");
  Signature sig = OneInOneOut("x", Shape{-1, 5, 6, 4}, y, Shape{-1, 5, 6, 4});
  sig.inputs.push_back({"z", z, DType::kFloat32, Shape{-1, 5, 6, 4}});
  sig.inputs.push_back({"w", w, DType::kFloat32, Shape{-1, 5, 6, 4}});
  sig.outputs.push_back({"dropped", dropped, DType::kFloat32, Shape{-1, 4, 6}});
  sig.outputs.push_back({"maxed", maxed, DType::kFloat32, Shape{-1, 5}});
  g.AddSignature(sig);
  Model m = std::move(g).Build();
  const Model original = m;
  ASSERT_TRUE(SinkLayoutChanges(m).ok());
  ASSERT_TRUE(EliminateDeadNodes(m).ok());
  EXPECT_EQ(CountOps(m, "Transpose"), 1);  // the dropped Mean's [0, 2, 1]
  EXPECT_EQ(m.graph.FindNode("maxed")->op, "Max");

  std::vector<NamedTensor> inputs = {{"x", RandomTensor(Shape{3, 5, 6, 4}, rng)},
                                     {"z", RandomTensor(Shape{3, 5, 6, 4}, rng)},
                                     {"w", RandomTensor(Shape{3, 5, 6, 4}, rng)}};
  const std::vector<NamedTensor> sunk = RunUnoptimised(m, inputs), plain = RunUnoptimised(original, inputs);
  ASSERT_EQ(sunk.size(), 3u);
  EXPECT_TRUE(sunk[2].tensor.BitwiseEqual(plain[2].tensor));
  for (size_t k = 0; k < 2; ++k) {
    ASSERT_EQ(sunk[k].tensor.shape(), plain[k].tensor.shape()) << sunk[k].name;
    for (int64_t i = 0; i < sunk[k].tensor.num_elements(); ++i) {
      EXPECT_NEAR(sunk[k].tensor.data<float>()[i], plain[k].tensor.data<float>()[i], 1e-6) << sunk[k].name << " " << i;
    }
  }
}

// Attention's K^T: a Transpose moving K's innermost axis to the second last place, read only
// by the product, becomes one keeping it (rows copied, not tiles) and the product's
// transpose_b; one that only swaps the last two axes goes altogether (here on the left operand).
// The same bits either way.
TEST(LayoutSinking, TransposesFoldIntoBatchMatMulFlags) {
  GraphBuilder g;
  std::string q = g.Input("q", DType::kFloat32, Shape{2, 5, 3});
  std::string k = g.Input("k", DType::kFloat32, Shape{5, 2, 3});
  std::string kt = g.Op("Transpose", {k}, AttrMap{{"perm", std::vector<int64_t>{1, 2, 0}}}, "kt");  // [2, 3, 5]
  std::string scores = g.Op("BatchMatMul", {q, kt}, {}, "scores");                                   // [2, 5, 5]
  std::string st = g.Op("Transpose", {scores}, AttrMap{{"perm", std::vector<int64_t>{0, 2, 1}}}, "st");
  std::string y = g.Op("BatchMatMul", {st, q}, {}, "y");  // [2, 5, 3]
  g.AddSignature({"serving_default",
                  "",
                  {{"q", q, DType::kFloat32, Shape{2, 5, 3}}, {"k", k, DType::kFloat32, Shape{5, 2, 3}}},
                  {{"y", y, DType::kFloat32, Shape{2, 5, 3}}}});
  const Model model = std::move(g).Build();
  Model m = model;
  ASSERT_TRUE(SinkLayoutChanges(m).ok());
  ASSERT_TRUE(EliminateDeadNodes(m).ok());
  ASSERT_NE(m.graph.FindNode("kt"), nullptr);
  EXPECT_EQ(m.graph.FindNode("kt")->attrs.GetInts("perm").value()[2], 2);  // keeps the innermost axis
  EXPECT_TRUE(m.graph.FindNode("scores")->attrs.GetBoolOr("transpose_b", false).value());
  EXPECT_EQ(m.graph.FindNode("st"), nullptr);
  EXPECT_TRUE(m.graph.FindNode("y")->attrs.GetBoolOr("transpose_a", false).value());
  EXPECT_EQ(CountOps(m, "Transpose"), 1);
  std::mt19937 rng(1);
  const std::vector<NamedTensor> inputs = {{"q", RandomTensor(Shape{2, 5, 3}, rng)}, {"k", RandomTensor(Shape{5, 2, 3}, rng)}};
  ThreadPool one(1), three(3);
  ExpectOptimisedIsPlain(model, inputs, {&one, &three});
}

// A Transpose that something else reads too stays where it is: moving the op below it would
// add a Transpose, not remove one. A transposed value that is a signature output stays one.
TEST(LayoutSinking, TransposesStayWhereMovingWouldAddOne) {
  GraphBuilder g;
  std::string x = g.Input("x", DType::kFloat32, Shape{-1, 2, 3});
  std::string t = g.Op("Transpose", {x}, AttrMap{{"perm", std::vector<int64_t>{0, 2, 1}}}, "t");
  std::string r = g.Op("Relu", {t}, {}, "relu");
  std::string back = g.Op("Transpose", {r}, AttrMap{{"perm", std::vector<int64_t>{0, 2, 1}}}, "back");
  Signature sig = OneInOneOut("x", Shape{-1, 2, 3}, back, Shape{-1, 2, 3});
  sig.outputs.push_back({"t", t, DType::kFloat32, Shape{-1, 3, 2}});
  g.AddSignature(sig);
  Model m = std::move(g).Build();
  ASSERT_TRUE(SinkLayoutChanges(m).ok());
  EXPECT_EQ(m.graph.FindNode("relu")->op, "Relu");
  EXPECT_EQ(m.graph.FindNode("t")->op, "Transpose");
}

}  // namespace
}  // namespace lockstep
