// Every gradient against central finite differences in float64 (gradient_check_util.h).
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/autodiff/gradients.h"
#include "tests/runtime/gradient_check_util.h"

namespace lockstep {
namespace {

using grad_test::CheckGradients;
using grad_test::GradCase;
using grad_test::Unary;

TEST(GradientCheck, ElementwiseArithmeticWithBroadcasting) {
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
    for (auto [a, b] : {std::pair{Shape{2, 3}, Shape{2, 3}},
                        {Shape{2, 3}, Shape{3}},
                        {Shape{2, 1}, Shape{1, 3}},
                        {Shape{}, Shape{2, 2}}}) {
      GradCase c{std::string(op) + " " + a.ToString() + " " + b.ToString(),
                 {a, b},
                 [op](GraphBuilder& g, const std::vector<std::string>& x) {
                   return std::pair{g.Op(op, {x[0], x[1]}), Shape{}};
                 }};
      // y's shape is the broadcast one.
      Shape out = a.rank() >= b.rank() ? a : b;
      for (int d = 0; d < out.rank(); ++d) {
        const int ia = d - (out.rank() - a.rank()), ib = d - (out.rank() - b.rank());
        out.set_dim(d, std::max(ia >= 0 ? a.dim(ia) : 1, ib >= 0 ? b.dim(ib) : 1));
      }
      c.build = [op, out](GraphBuilder& g, const std::vector<std::string>& x) {
        return std::pair{g.Op(op, {x[0], x[1]}), out};
      };
      c.positive = std::string(op) == "Div";
      c.lo = c.positive ? 0.5 : 0.1;
      CheckGradients(c);
    }
  }
}

TEST(GradientCheck, BiasAddAndMatMulEveryTranspose) {
  CheckGradients({"BiasAdd", {Shape{3, 4}, Shape{4}}, [](GraphBuilder& g, const std::vector<std::string>& x) {
                    return std::pair{g.Op("BiasAdd", {x[0], x[1]}), Shape{3, 4}};
                  }});
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const Shape a = ta ? Shape{4, 2} : Shape{2, 4};
      const Shape b = tb ? Shape{3, 4} : Shape{4, 3};
      CheckGradients({"MatMul ta=" + std::to_string(ta) + " tb=" + std::to_string(tb),
                      {a, b},
                      [ta, tb](GraphBuilder& g, const std::vector<std::string>& x) {
                        AttrMap attrs;
                        attrs.Set("transpose_a", ta);
                        attrs.Set("transpose_b", tb);
                        return std::pair{g.Op("MatMul", {x[0], x[1]}, attrs), Shape{2, 3}};
                      }});
    }
  }
}

TEST(GradientCheck, Activations) {
  for (const char* op : {"Relu", "Sigmoid", "Tanh", "Gelu", "Softmax", "LogSoftmax", "Silu", "HardSwish",
                         "LeakyRelu"}) {
    CheckGradients({op,
                    {Shape{2, 5}},
                    [op](GraphBuilder& g, const std::vector<std::string>& x) {
                      return Unary(g, op, x[0], Shape{2, 5});
                    },
                    0.1,
                    3.0});
  }
  // HardSwish's outer pieces (0 below -3, x above 3) and LeakyRelu's own slope.
  CheckGradients({"HardSwish outside [-3, 3]",
                  {Shape{2, 5}},
                  [](GraphBuilder& g, const std::vector<std::string>& x) {
                    return Unary(g, "HardSwish", x[0], Shape{2, 5});
                  },
                  3.1,
                  6.0});
  CheckGradients({"LeakyRelu alpha=0.3", {Shape{2, 5}}, [](GraphBuilder& g, const std::vector<std::string>& x) {
                    AttrMap attrs;
                    attrs.Set("alpha", 0.3);
                    return Unary(g, "LeakyRelu", x[0], Shape{2, 5}, attrs);
                  }});
}

TEST(GradientCheck, ConcatAlongEachAxis) {
  for (int64_t axis : {0, 1, -1}) {
    const Shape a{2, 3, 2};
    const Shape b = axis == 0 ? Shape{3, 3, 2} : axis == 1 ? Shape{2, 4, 2} : Shape{2, 3, 3};
    const Shape out = axis == 0 ? Shape{7, 3, 2} : axis == 1 ? Shape{2, 10, 2} : Shape{2, 3, 7};
    CheckGradients({"Concat axis=" + std::to_string(axis),
                    {a, b},
                    [axis, out](GraphBuilder& g, const std::vector<std::string>& x) {
                      AttrMap attrs;
                      attrs.Set("axis", axis);
                      // x0 twice: the gradients of its two parts add up.
                      return std::pair{g.Op("Concat", {x[0], x[1], x[0]}, attrs), out};
                    }});
  }
}

// A slice with constant bounds: dy padded back with zeros (a grouped convolution's channels).
TEST(GradientCheck, SliceOfConstantBounds) {
  auto ints = [](GraphBuilder& g, const std::string& name, std::vector<int64_t> v) {
    return g.Const(name, Tensor::FromVector<int64_t>(Shape{static_cast<int64_t>(v.size())}, v));
  };
  CheckGradients({"Slice channels 2..5", {Shape{2, 3, 7}}, [&](GraphBuilder& g, const std::vector<std::string>& x) {
                    return std::pair{g.Op("Slice", {x[0], ints(g, "b", {2}), ints(g, "e", {5}), ints(g, "a", {-1})}),
                                     Shape{2, 3, 3}};
                  }});
  // An unknown batch, not sliced, is no obstacle.
  GraphBuilder g;
  const std::string x = g.Input("x", DType::kFloat32, Shape{-1, 6});
  const std::string y = g.Op("Slice", {x, ints(g, "b", {1}), ints(g, "e", {3}), ints(g, "a", {1})});
  const std::string loss = g.Op("Sum", {y});
  g.AddSignature({"s", "", {{"x", x, DType::kFloat32, Shape{-1, 6}}}, {{"loss", loss, DType::kFloat32, Shape{}}}});
  Model m = std::move(g).Build();
  StatusOr<std::vector<std::string>> grads = AddGradients(m, loss, std::vector<std::string>{x});
  EXPECT_TRUE(grads.ok()) << grads.status().ToString();
  CheckGradients({"Slice two axes, ends past the end", {Shape{4, 5}}, [&](GraphBuilder& g, const std::vector<std::string>& x) {
                    return std::pair{g.Op("Slice", {x[0], ints(g, "b", {1, -3}), ints(g, "e", {100, 4})}), Shape{3, 2}};
                  }});
}

TEST(GradientCheck, BatchMatMulEveryTransposeAndBroadcast) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const Shape a = ta ? Shape{2, 3, 4, 2} : Shape{2, 3, 2, 4};
      const Shape b = tb ? Shape{2, 3, 5, 4} : Shape{2, 3, 4, 5};
      CheckGradients({"BatchMatMul ta=" + std::to_string(ta) + " tb=" + std::to_string(tb),
                      {a, b},
                      [ta, tb](GraphBuilder& g, const std::vector<std::string>& x) {
                        AttrMap attrs;
                        attrs.Set("transpose_a", ta);
                        attrs.Set("transpose_b", tb);
                        return std::pair{g.Op("BatchMatMul", {x[0], x[1]}, attrs), Shape{2, 3, 2, 5}};
                      }});
    }
  }
  // b shared by every batch (a sequence times a weight), and broadcast along one dimension.
  for (const Shape& b : {Shape{4, 5}, Shape{1, 3, 4, 5}, Shape{2, 1, 4, 5}}) {
    CheckGradients({"BatchMatMul broadcast b " + b.ToString(),
                    {Shape{2, 3, 2, 4}, b},
                    [](GraphBuilder& g, const std::vector<std::string>& x) {
                      return std::pair{g.Op("BatchMatMul", {x[0], x[1]}), Shape{2, 3, 2, 5}};
                    }});
  }
}

TEST(GradientCheck, TransposeEveryPermutationOfThreeAxes) {
  for (std::vector<int64_t> perm : {std::vector<int64_t>{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}) {
    const Shape in{2, 3, 4};
    Shape out;
    for (int64_t p : perm) out.AddDim(in.dim(static_cast<int>(p)));
    CheckGradients({"Transpose " + std::to_string(perm[0]) + std::to_string(perm[1]) + std::to_string(perm[2]),
                    {in},
                    [perm, out](GraphBuilder& g, const std::vector<std::string>& x) {
                      AttrMap attrs;
                      attrs.Set("perm", perm);
                      return Unary(g, "Transpose", x[0], out, attrs);
                    }});
  }
  CheckGradients({"Transpose reversed", {Shape{2, 3, 4}}, [](GraphBuilder& g, const std::vector<std::string>& x) {
                    return Unary(g, "Transpose", x[0], Shape{4, 3, 2});
                  }});
}

TEST(GradientCheck, ShapesAndReductions) {
  CheckGradients({"Reshape", {Shape{2, 3}}, [](GraphBuilder& g, const std::vector<std::string>& x) {
                    AttrMap attrs;
                    attrs.Set("shape", std::vector<int64_t>{3, 2});
                    return Unary(g, "Reshape", x[0], Shape{3, 2}, attrs);
                  }});
  CheckGradients({"Flatten", {Shape{2, 2, 3}}, [](GraphBuilder& g, const std::vector<std::string>& x) {
                    return Unary(g, "Flatten", x[0], Shape{2, 6});
                  }});
  CheckGradients({"Identity", {Shape{4}}, [](GraphBuilder& g, const std::vector<std::string>& x) {
                    return Unary(g, "Identity", x[0], Shape{4});
                  }});
  for (bool keep : {false, true}) {
    CheckGradients({"Sum axes=1 keep=" + std::to_string(keep),
                    {Shape{2, 3, 2}},
                    [keep](GraphBuilder& g, const std::vector<std::string>& x) {
                      AttrMap attrs;
                      attrs.Set("axes", std::vector<int64_t>{1});
                      attrs.Set("keep_dims", keep);
                      return Unary(g, "Sum", x[0], keep ? Shape{2, 1, 2} : Shape{2, 2}, attrs);
                    }});
  }
}

TEST(GradientCheck, LossesAndMean) {
  CheckGradients(
      {"SoftmaxCrossEntropy",
       {Shape{4, 3}},
       [](GraphBuilder& g, const std::vector<std::string>& x) {
         const std::string labels = g.Const("labels", Tensor::FromVector<int32_t>(Shape{4}, {2, 0, 1, 2}));
         return std::pair{g.Op("SoftmaxCrossEntropy", {x[0], labels}), Shape{4}};
       },
       0.1,
       3.0});
  CheckGradients(
      {"SigmoidCrossEntropy",
       {Shape{2, 3}},
       [](GraphBuilder& g, const std::vector<std::string>& x) {
         const std::string z = g.Const("z", Tensor::FromVector<double>(Shape{2, 3}, {0, 1, 0.25, 1, 0, 0.5}));
         return std::pair{g.Op("SigmoidCrossEntropy", {x[0], z}), Shape{2, 3}};
       },
       0.1,
       4.0});
  for (bool keep : {false, true}) {
    CheckGradients({"Mean axes=0 keep=" + std::to_string(keep),
                    {Shape{3, 2}},
                    [keep](GraphBuilder& g, const std::vector<std::string>& x) {
                      AttrMap attrs;
                      attrs.Set("axes", std::vector<int64_t>{0});
                      attrs.Set("keep_dims", keep);
                      return Unary(g, "Mean", x[0], keep ? Shape{1, 2} : Shape{2}, attrs);
                    }});
  }
  CheckGradients(
      {"Mean of everything", {Shape{2, 3}}, [](GraphBuilder& g, const std::vector<std::string>& x) {
         return Unary(g, "Mean", x[0], Shape{});
       }});
}

TEST(LossOps, ForwardValuesAndLabelErrors) {
  // logits (0, ln 3): softmax (1/4, 3/4); the loss of label 0 is ln 4, of label 1 ln(4/3).
  const Tensor logits = Tensor::FromVector<double>(Shape{2, 2}, {0, std::log(3.0), 0, std::log(3.0)});
  StatusOr<std::vector<Tensor>> loss = RunOp(
      "SoftmaxCrossEntropy", std::vector<Tensor>{logits, Tensor::FromVector<int32_t>(Shape{2}, {0, 1})});
  ASSERT_TRUE(loss.ok()) << loss.status().ToString();
  EXPECT_NEAR(loss.value()[0].data<double>()[0], std::log(4.0), 1e-15);
  EXPECT_NEAR(loss.value()[0].data<double>()[1], std::log(4.0 / 3.0), 1e-15);
  // Large logits do not overflow.
  const Tensor big = Tensor::FromVector<float>(Shape{1, 2}, {1000.0f, 0.0f});
  loss = RunOp("SoftmaxCrossEntropy", std::vector<Tensor>{big, Tensor::FromVector<int32_t>(Shape{1}, {1})});
  ASSERT_TRUE(loss.ok());
  EXPECT_EQ(loss.value()[0].data<float>()[0], 1000.0f);
  StatusOr<std::vector<Tensor>> bad = RunOp(
      "SoftmaxCrossEntropy", std::vector<Tensor>{logits, Tensor::FromVector<int32_t>(Shape{2}, {0, 2})});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "SoftmaxCrossEntropy: label 2 in row 1 is out of range for 2 classes");
  // Sigmoid cross-entropy at a large negative logit with target 1 is -x, not inf.
  StatusOr<std::vector<Tensor>> s =
      RunOp("SigmoidCrossEntropy", std::vector<Tensor>{Tensor::FromVector<float>(Shape{1}, {-100.0f}),
                                                       Tensor::FromVector<float>(Shape{1}, {1.0f})});
  ASSERT_TRUE(s.ok());
  EXPECT_FLOAT_EQ(s.value()[0].data<float>()[0], 100.0f);
}

// A two-layer network, with x used by two consumers (its gradients are summed).
TEST(GradientCheck, TwoLayerNetworkWithASharedValue) {
  CheckGradients(
      {"mlp",
       {Shape{3, 4}, Shape{4, 5}, Shape{5}, Shape{5, 2}},
       [](GraphBuilder& g, const std::vector<std::string>& x) {
         const std::string h = g.Op("Tanh", {g.Op("BiasAdd", {g.Op("MatMul", {x[0], x[1]}), x[2]})});
         const std::string logits = g.Op("MatMul", {h, x[3]});
         const std::string y = g.Op("LogSoftmax", {logits});
         // x[0] also feeds the output directly through its own sum.
         AttrMap keep;
         keep.Set("axes", std::vector<int64_t>{1});
         keep.Set("keep_dims", true);
         return std::pair{g.Op("Add", {y, g.Op("Sum", {x[0]}, keep)}), Shape{3, 2}};
       }});
}

TEST(Gradients, ErrorsNameTheProblem) {
  GraphBuilder g;
  const std::string x = g.Input("x", DType::kFloat64, Shape{2, 3});
  const std::string unused = g.Input("unused", DType::kFloat64, Shape{2});
  AttrMap to32;
  to32.Set("dtype", DType::kFloat32);
  const std::string cast = g.Op("Cast", {x}, to32, "cast");
  // FusedMatMul is made by the fusion pass for serving, and has no gradient.
  const std::string w = g.Const("w", Tensor::FromVector<float>(Shape{3, 1}, {1, 2, 3}));
  const std::string loss = g.Op("Sum", {g.Op("FusedMatMul", {cast, w}, {}, "fused")}, {}, "loss");
  const std::string vector = g.Op("Relu", {x}, {}, "vector");
  Signature sig;
  sig.name = "s";
  sig.inputs = {{"x", x, DType::kFloat64, Shape{2, 3}}, {"unused", unused, DType::kFloat64, Shape{2}}};
  sig.outputs = {{"loss", loss, DType::kFloat32, Shape{}}};
  g.AddSignature(sig);
  Model model = std::move(g).Build();
  Model copy = model;

  const std::vector<std::string> wrt_x = {x};
  StatusOr<std::vector<std::string>> r = AddGradients(copy, loss, wrt_x);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ(r.status().message(), "gradients: op FusedMatMul (node 'fused') has no gradient");

  copy = model;
  r = AddGradients(copy, vector, wrt_x);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "gradients: the loss 'vector' must be a scalar, got shape [2,3]");

  copy = model;
  const std::vector<std::string> wrt_unused = {unused};
  r = AddGradients(copy, loss, wrt_unused);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "gradients: 'unused' does not reach the loss 'loss'");
}

}  // namespace
}  // namespace lockstep
