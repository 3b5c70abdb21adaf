#include "runtime/passes/passes.h"

#include <gtest/gtest.h>

#include "graph_test_util.h"
#include "runtime/graph_analysis.h"
#include "runtime/session.h"
#include "runtime/thread_pool.h"

namespace lockstep {
namespace {

using testing::OneInOneOut;
using testing::CountOps;
using testing::ExpectOptimisedIsPlain;
using testing::RandomTensor;
using testing::RunUnoptimised;

// A random graph over values of shape [-1, w]: element-wise ops, activations, MatMul chains
// that fusion can take, constant-only subgraphs that folding can take, reshapes that alias,
// and dead branches. Some intermediate values are exported, which must stop fusion there.
Model RandomGraph(uint32_t seed) {
  std::mt19937 rng(seed);
  auto pick = [&](int n) { return static_cast<int>(rng() % n); };
  GraphBuilder g;
  struct Value { std::string name; int64_t width; };
  std::vector<Value> values = {{g.Input("x", DType::kFloat32, Shape{-1, 6}), 6}};
  int consts = 0;
  auto constant = [&](Shape shape) {
    // Half of the constants are themselves computed from constants: folding material.
    std::string a = g.Const("c" + std::to_string(consts++), RandomTensor(shape, rng));
    if (pick(2) == 0) return a;
    std::string b = g.Const("c" + std::to_string(consts++), RandomTensor(shape, rng));
    const char* ops[] = {"Add", "Mul", "Sub"};
    return g.Op(ops[pick(3)], {a, b});
  };
  const char* unary[] = {"Relu", "Tanh", "Sigmoid", "Gelu", "Identity"};
  const char* binary[] = {"Add", "Sub", "Mul"};
  const int steps = 6 + pick(10);
  for (int s = 0; s < steps; ++s) {
    const Value v = values[pick(static_cast<int>(values.size()))];
    switch (pick(5)) {
      case 0:
        values.push_back({g.Op(unary[pick(5)], {v.name}), v.width});
        break;
      case 1: {
        std::vector<Value> same;
        for (const Value& u : values) {
          if (u.width == v.width) same.push_back(u);
        }
        std::string other = pick(2) == 0 ? same[pick(static_cast<int>(same.size()))].name : constant(Shape{v.width});
        values.push_back({g.Op(binary[pick(3)], {v.name, other}), v.width});
        break;
      }
      case 2:
      case 3: {
        int64_t out = 1 + pick(9);
        std::string h = g.Op("MatMul", {v.name, constant(Shape{v.width, out})});
        if (pick(3) != 0) h = g.Op("BiasAdd", {h, constant(Shape{out})});
        if (pick(3) != 0) h = g.Op(unary[pick(4)], {h});
        values.push_back({h, out});
        break;
      }
      case 4:
        values.push_back({g.Op("Reshape", {v.name}, AttrMap{{"shape", std::vector<int64_t>{-1, v.width}}}), v.width});
        break;
    }
  }
  Signature sig{"serving_default", "", {{"x", "x", DType::kFloat32, Shape{-1, 6}}}, {}};
  sig.outputs.push_back({"y", values.back().name, DType::kFloat32, Shape{-1, values.back().width}});
  if (values.size() > 2 && pick(2) == 0) {
    const Value& mid = values[1 + pick(static_cast<int>(values.size()) - 2)];
    sig.outputs.push_back({"mid", mid.name, DType::kFloat32, Shape{-1, mid.width}});
  }
  g.AddSignature(sig);
  return std::move(g).Build();
}

std::vector<NamedTensor> RunAll(const Model& model, SessionOptions options, const Tensor& x) {
  auto session = Session::Create(model, options);
  EXPECT_TRUE(session.ok()) << session.status().ToString();
  std::vector<NamedTensor> in = {{"x", x}}, out;
  Status s = (*session)->Run("serving_default", in, &out);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

void ExpectSameOutputs(const std::vector<NamedTensor>& a, const std::vector<NamedTensor>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(a[i].tensor.BitwiseEqual(b[i].tensor))
        << what << " output " << a[i].name << ": " << a[i].tensor.DebugString() << " vs " << b[i].tensor.DebugString();
  }
}

// Each pass alone, and all of them with the memory plan, give bit-identical outputs to the
// unoptimised graph with one buffer per value.
TEST(Passes, PreserveResultsOnRandomGraphs) {
  ThreadPool& pool = ThreadPool::Default();
  int fused = 0, folded = 0, removed = 0;
  for (uint32_t seed = 0; seed < 150; ++seed) {
    Model model = RandomGraph(seed);
    std::mt19937 rng(seed + 1000);
    Tensor x = RandomTensor(Shape{1 + static_cast<int64_t>(seed % 5), 6}, rng, -2.0f, 2.0f);
    SessionOptions reference_options;
    reference_options.optimize = false;
    reference_options.reuse_buffers = false;
    auto reference = RunAll(model, reference_options, x);

    Model f = model;
    ASSERT_TRUE(FoldConstants(f, pool).ok());
    folded += CountOps(f, "Const") - CountOps(model, "Const");
    ExpectSameOutputs(reference, RunAll(f, reference_options, x), "fold seed " + std::to_string(seed));

    Model u = model;
    ASSERT_TRUE(FuseMatMul(u).ok());
    fused += CountOps(u, "FusedMatMul");
    ExpectSameOutputs(reference, RunAll(u, reference_options, x), "fuse seed " + std::to_string(seed));

    Model d = model;
    ASSERT_TRUE(EliminateDeadNodes(d).ok());
    removed += static_cast<int>(model.graph.nodes.size() - d.graph.nodes.size());
    ExpectSameOutputs(reference, RunAll(d, reference_options, x), "dead seed " + std::to_string(seed));

    SessionOptions plan_only = reference_options;
    plan_only.reuse_buffers = true;
    ExpectSameOutputs(reference, RunAll(model, plan_only, x), "memory plan seed " + std::to_string(seed));
    ExpectSameOutputs(reference, RunAll(model, SessionOptions{}, x), "all seed " + std::to_string(seed));
  }
  // The random graphs must actually give every pass something to do.
  EXPECT_GT(fused, 20);
  EXPECT_GT(folded, 20);
  EXPECT_GT(removed, 20);
}

TEST(Passes, FoldConstantsReplacesConstantSubgraphs) {
  GraphBuilder g;
  std::string x = g.Input("x", DType::kFloat32, Shape{-1});
  std::string c = g.Op("Mul", {g.Const("a", Tensor::Scalar(3.0f)), g.Const("b", Tensor::Scalar(4.0f))}, {}, "c");
  g.Op("Add", {x, c}, {}, "y");
  g.AddSignature(OneInOneOut("x", Shape{-1}, "y", Shape{-1}));
  Model m = std::move(g).Build();
  ASSERT_TRUE(FoldConstants(m, ThreadPool::Default()).ok());
  const NodeDef* folded = m.graph.FindNode("c");
  ASSERT_NE(folded, nullptr);
  EXPECT_EQ(folded->op, "Const");
  const std::string weight = std::get<std::string>(folded->attrs.values().at("weight"));
  EXPECT_EQ(m.weights.at(weight).data<float>()[0], 12.0f);
  ASSERT_TRUE(EliminateDeadNodes(m).ok());
  EXPECT_EQ(m.graph.FindNode("a"), nullptr);
  EXPECT_EQ(m.weights.count("a"), 0u);
}

TEST(Passes, FusionMakesOneNodeAndRespectsOtherConsumers) {
  auto build = [](bool export_bias) {
    GraphBuilder g;
    std::mt19937 rng(1);
    std::string x = g.Input("x", DType::kFloat32, Shape{-1, 3});
    std::string mm = g.Op("MatMul", {x, g.Const("w", RandomTensor(Shape{3, 2}, rng))}, {}, "mm");
    std::string biased = g.Op("BiasAdd", {mm, g.Const("b", RandomTensor(Shape{2}, rng))}, {}, "biased");
    std::string y = g.Op("Relu", {biased}, {}, "y");
    Signature sig = OneInOneOut("x", Shape{-1, 3}, y, Shape{-1, 2});
    if (export_bias) sig.outputs.push_back({"pre", biased, DType::kFloat32, Shape{-1, 2}});
    g.AddSignature(sig);
    return std::move(g).Build();
  };
  Model m = build(false);
  ASSERT_TRUE(FuseMatMul(m).ok());
  ASSERT_EQ(m.graph.nodes.size(), 4u);  // x, w, b, y
  const NodeDef* y = m.graph.FindNode("y");
  EXPECT_EQ(y->op, "FusedMatMul");
  EXPECT_EQ(std::get<std::string>(y->attrs.values().at("activation")), "relu");
  EXPECT_EQ(y->inputs.size(), 3u);

  Model exported = build(true);
  ASSERT_TRUE(FuseMatMul(exported).ok());
  // "biased" is a signature output, so only MatMul + BiasAdd fuse; Relu stays.
  EXPECT_EQ(exported.graph.FindNode("y")->op, "Relu");
  EXPECT_EQ(exported.graph.FindNode("biased")->op, "FusedMatMul");
  EXPECT_EQ(std::get<std::string>(exported.graph.FindNode("biased")->attrs.values().at("activation")), "none");
}

// bf16 products: the session computes what the same graph with precision "bfloat16" on each
// float32 matrix product and convolution computes (bit for bit), which differs from float32;
// a float64 product and a node that chose its own precision are left alone.
// Attention's stacked products go to the bf16 core too.
TEST(Passes, Bf16ProductsSetThePrecisionOfBatchMatMuls) {
  GraphBuilder g;
  std::string q = g.Input("q", DType::kFloat32, Shape{-1, 4, 8});
  std::string scores = g.Op("BatchMatMul", {q, q}, AttrMap{{"transpose_b", true}}, "scores");
  g.AddSignature(OneInOneOut("q", Shape{-1, 4, 8}, scores, Shape{-1, 4, 4}));
  Model m = std::move(g).Build();
  ASSERT_TRUE(UseBf16Products(m).ok());
  EXPECT_EQ(std::get<std::string>(m.graph.FindNode("scores")->attrs.values().at("precision")), "bfloat16");
}

// A convolution the pass makes bf16 may also run as Winograd in bf16 (attr bf16_winograd); one
// that a model asked bf16 of itself rounds its operands (conv_gradient_test.cc).
TEST(Passes, Bf16ProductsLetConvolutionsRunAsWinograd) {
  GraphBuilder g;
  std::mt19937 rng(5);
  std::string x = g.Input("x", DType::kFloat32, Shape{-1, 6, 6, 32});
  AttrMap same{{"padding", std::string("SAME")}};
  std::string y = g.Op("Conv2D", {x, g.Const("f", RandomTensor(Shape{3, 3, 32, 32}, rng))}, same, "conv");
  g.AddSignature(OneInOneOut("x", Shape{-1, 6, 6, 32}, y, Shape{-1, 6, 6, 32}));
  Model m = std::move(g).Build();
  ASSERT_TRUE(UseBf16Products(m).ok());
  const auto& attrs = m.graph.FindNode("conv")->attrs.values();
  EXPECT_EQ(std::get<std::string>(attrs.at("precision")), "bfloat16");
  EXPECT_TRUE(std::get<bool>(attrs.at("bf16_winograd")));
}

TEST(Passes, Bf16ProductsSetThePrecisionOfFloat32MatMulsAndConvolutions) {
  auto build = [](bool by_hand) {
    GraphBuilder g;
    std::mt19937 rng(3);
    const AttrMap bf16{{"precision", std::string("bfloat16")}};
    const AttrMap none;
    std::string x = g.Input("x", DType::kFloat32, Shape{-1, 5});
    std::string h = g.Op("MatMul", {x, g.Const("w", RandomTensor(Shape{5, 8}, rng))}, by_hand ? bf16 : none, "mm");
    h = g.Op("Relu", {g.Op("BiasAdd", {h, g.Const("b", RandomTensor(Shape{8}, rng))}, {}, "biased")}, {}, "h");
    std::string image = g.Op("Reshape", {h}, AttrMap{{"shape", std::vector<int64_t>{-1, 2, 2, 2}}}, "image");
    AttrMap conv{{"strides", std::vector<int64_t>{1, 1}}, {"padding", std::string("SAME")}};
    if (by_hand) conv.Set("precision", std::string("bfloat16"));
    std::string y = g.Op("Conv2D", {image, g.Const("f", RandomTensor(Shape{2, 2, 2, 3}, rng))}, conv, "conv");
    // With a bias, so that a session fuses it into a FusedConv2D before choosing precisions.
    y = g.Op("BiasAdd", {y, g.Const("fb", RandomTensor(Shape{3}, rng))}, {}, "conv_biased");
    y = g.Op("Reshape", {y}, AttrMap{{"shape", std::vector<int64_t>{-1, 12}}}, "y");
    // Chose float32 itself: stays float32 either way.
    std::string z = g.Op("MatMul", {y, g.Const("v", RandomTensor(Shape{12, 2}, rng))},
                         AttrMap{{"precision", std::string("float32")}}, "z");
    std::string d = g.Input("d", DType::kFloat64, Shape{-1, 2});
    std::string dz = g.Op("MatMul", {d, g.Const("dw", Tensor::FromVector<double>(Shape{2, 1}, {0.1, 0.3}))}, {}, "dz");
    Signature sig = OneInOneOut("x", Shape{-1, 5}, z, Shape{-1, 2});
    sig.inputs.push_back({"d", d, DType::kFloat64, Shape{-1, 2}});
    sig.outputs.push_back({"conv", y, DType::kFloat32, Shape{-1, 12}});
    sig.outputs.push_back({"dz", dz, DType::kFloat64, Shape{-1, 1}});
    g.AddSignature(sig);
    return std::move(g).Build();
  };
  Model m = build(false);
  const Status used = UseBf16Products(m);
  ASSERT_TRUE(used.ok()) << used.ToString();
  EXPECT_EQ(std::get<std::string>(m.graph.FindNode("mm")->attrs.values().at("precision")), "bfloat16");
  EXPECT_EQ(std::get<std::string>(m.graph.FindNode("conv")->attrs.values().at("precision")), "bfloat16");
  EXPECT_EQ(std::get<std::string>(m.graph.FindNode("z")->attrs.values().at("precision")), "float32");
  EXPECT_FALSE(m.graph.FindNode("dz")->attrs.Has("precision"));

  std::mt19937 rng(9);
  const std::vector<NamedTensor> inputs = {{"x", RandomTensor(Shape{4, 5}, rng)},
                                           {"d", Tensor::FromVector<double>(Shape{1, 2}, {1.0 / 3, 2.0 / 3})}};
  auto run = [&](Model model, bool bf16_products) {
    SessionOptions options;
    options.bf16_products = bf16_products;
    auto session = Session::Create(std::move(model), options);
    EXPECT_TRUE(session.ok()) << session.status().ToString();
    std::vector<NamedTensor> out;
    EXPECT_TRUE((*session)->Run("serving_default", inputs, &out).ok());
    return out;
  };
  const std::vector<NamedTensor> asked = run(build(false), true);
  const std::vector<NamedTensor> by_hand = run(build(true), false);
  const std::vector<NamedTensor> float32 = run(build(false), false);
  ASSERT_EQ(asked.size(), 3u);
  for (size_t i = 0; i < asked.size(); ++i) EXPECT_TRUE(asked[i].tensor.BitwiseEqual(by_hand[i].tensor)) << asked[i].name;
  EXPECT_FALSE(asked[1].tensor.BitwiseEqual(float32[1].tensor));  // conv: rounded operands
  EXPECT_TRUE(asked[2].tensor.BitwiseEqual(float32[2].tensor));   // dz: float64, untouched
}

// A dense layer over a sequence, as the ONNX importer lays it out (rows -> MatMul -> Reshape
// back -> Add(bias row first, as PyTorch exports it) -> Relu): the bias and the activation move
// above the Reshape, and the whole layer becomes one FusedMatMul, with the same bits.
TEST(Passes, ASequencesDenseLayerFusesAcrossItsReshape) {
  GraphBuilder g;
  std::mt19937 rng(8);
  std::string x = g.Input("x", DType::kFloat32, Shape{-1, 3, 4});
  std::string rows = g.Op("Reshape", {x}, AttrMap{{"shape", std::vector<int64_t>{-1, 4}}}, "rows");
  std::string mm = g.Op("MatMul", {rows, g.Const("w", RandomTensor(Shape{4, 5}, rng))}, {}, "mm");
  std::string back = g.Op("Reshape", {mm}, AttrMap{{"shape", std::vector<int64_t>{-1, 3, 5}}}, "back");
  std::string biased = g.Op("Add", {g.Const("b", RandomTensor(Shape{5}, rng)), back}, {}, "biased");
  std::string y = g.Op("Relu", {biased}, {}, "y");
  g.AddSignature(OneInOneOut("x", Shape{-1, 3, 4}, y, Shape{-1, 3, 5}));
  Model m = std::move(g).Build();
  const Model original = m;
  ThreadPool pool(1);
  ASSERT_TRUE(OptimizeGraph(m, pool).ok());
  EXPECT_EQ(CountOps(m, "FusedMatMul"), 1);
  EXPECT_EQ(CountOps(m, "MatMul") + CountOps(m, "Add") + CountOps(m, "BiasAdd") + CountOps(m, "Relu"), 0);

  std::vector<NamedTensor> inputs = {{"x", RandomTensor(Shape{2, 3, 4}, rng)}};
  auto run = [&](Model model, bool optimize) {
    SessionOptions options;
    options.optimize = optimize;
    auto session = Session::Create(std::move(model), options);
    EXPECT_TRUE(session.ok()) << session.status().ToString();
    std::vector<NamedTensor> out;
    EXPECT_TRUE((*session)->Run("serving_default", inputs, &out).ok());
    return out[0].tensor;
  };
  EXPECT_TRUE(run(original, true).BitwiseEqual(run(original, false)));
}

// Conv2D -> BiasAdd -> Relu becomes one FusedConv2D, with the same bits on 1 and 3 threads; a
// convolution whose output something else reads stays unfused.
TEST(Passes, AConvolutionsBiasAndActivationFuseIntoItsEpilogue) {
  for (const char* activation : {"Relu", "Silu", "HardSwish"}) {
    SCOPED_TRACE(activation);
    auto build = [&](bool export_conv) {
      GraphBuilder g;
      std::mt19937 rng(11);
      std::string x = g.Input("x", DType::kFloat32, Shape{-1, 6, 5, 3});
      const AttrMap attrs{{"strides", std::vector<int64_t>{1, 1}}, {"padding", std::string("SAME")}};
      std::string conv = g.Op("Conv2D", {x, g.Const("f", RandomTensor(Shape{3, 3, 3, 4}, rng))}, attrs, "conv");
      std::string biased = g.Op("BiasAdd", {conv, g.Const("b", RandomTensor(Shape{4}, rng))}, {}, "biased");
      std::string y = g.Op(activation, {biased}, {}, "y");
      Signature sig = OneInOneOut("x", Shape{-1, 6, 5, 3}, y, Shape{-1, 6, 5, 4});
      if (export_conv) sig.outputs.push_back({"conv", conv, DType::kFloat32, Shape{-1, 6, 5, 4}});
      g.AddSignature(sig);
      return std::move(g).Build();
    };
    Model m = build(false);
    ThreadPool one(1), three(3);
    ASSERT_TRUE(OptimizeGraph(m, one).ok());
    EXPECT_EQ(CountOps(m, "FusedConv2D"), 1);
    EXPECT_EQ(CountOps(m, "Conv2D") + CountOps(m, "BiasAdd") + CountOps(m, activation), 0);
    Model kept = build(true);
    ASSERT_TRUE(OptimizeGraph(kept, one).ok());
    EXPECT_EQ(CountOps(kept, "FusedConv2D"), 0);

    std::mt19937 rng(12);
    std::vector<NamedTensor> inputs = {{"x", RandomTensor(Shape{3, 6, 5, 3}, rng)}};
    ExpectOptimisedIsPlain(build(false), inputs, {&one, &three});
  }
}

// DepthwiseConv2D -> BiasAdd -> activation becomes one FusedDepthwiseConv2D, with the same bits
// on 1 and 3 threads, for a depth multiplier of 1 (the vectorised path) and of 2.
TEST(Passes, ADepthwiseConvolutionsBiasAndActivationFuse) {
  for (int64_t multiplier : {1, 2}) {
    SCOPED_TRACE(multiplier);
    auto build = [&] {
      GraphBuilder g;
      std::mt19937 rng(31);
      std::string x = g.Input("x", DType::kFloat32, Shape{-1, 9, 9, 20});
      const AttrMap attrs{{"strides", std::vector<int64_t>{2, 2}}, {"padding", std::string("EXPLICIT")},
                          {"explicit_paddings", std::vector<int64_t>{0, 0, 1, 1, 1, 1, 0, 0}}};
      std::string conv =
          g.Op("DepthwiseConv2D", {x, g.Const("f", RandomTensor(Shape{3, 3, 20, multiplier}, rng))}, attrs, "conv");
      std::string biased = g.Op("BiasAdd", {conv, g.Const("b", RandomTensor(Shape{20 * multiplier}, rng))}, {}, "biased");
      std::string y = g.Op("HardSwish", {biased}, {}, "y");
      g.AddSignature(OneInOneOut("x", Shape{-1, 9, 9, 20}, y, Shape{-1, 5, 5, 20 * multiplier}));
      return std::move(g).Build();
    };
    ThreadPool one(1), three(3);
    Model m = build();
    ASSERT_TRUE(OptimizeGraph(m, one).ok());
    EXPECT_EQ(CountOps(m, "FusedDepthwiseConv2D"), 1);
    EXPECT_EQ(CountOps(m, "DepthwiseConv2D") + CountOps(m, "BiasAdd") + CountOps(m, "HardSwish"), 0);
    std::mt19937 rng(32);
    ExpectOptimisedIsPlain(build(), {{"x", RandomTensor(Shape{3, 9, 9, 20}, rng)}}, {&one, &three});
  }
}

// A residual block's tail, Conv2D -> BiasAdd -> Add(skip) -> Relu, becomes one FusedConv2D
// with the skip as its residual input: the same bits as the four ops, on 1 and 3 threads, with
// images large enough that the convolution runs in several im2col blocks. When the skip is a
// convolution too (a downsampling block's projection), one of the two takes the Add and the
// other stays whole. A skip that broadcasts (a row per channel) stays an Add.
TEST(Passes, AResidualAddFusesIntoTheConvolutionBeforeItsActivation) {
  for (const char* skip_kind : {"tanh", "conv"}) {
    SCOPED_TRACE(skip_kind);
    auto build = [&](bool broadcast_skip) {
      GraphBuilder g;
      std::mt19937 rng(21);
      std::string x = g.Input("x", DType::kFloat32, Shape{-1, 40, 40, 4});
      const AttrMap attrs{{"strides", std::vector<int64_t>{1, 1}}, {"padding", std::string("SAME")}};
      std::string conv = g.Op("Conv2D", {x, g.Const("f", RandomTensor(Shape{3, 3, 4, 4}, rng))}, attrs, "conv");
      std::string biased = g.Op("BiasAdd", {conv, g.Const("b", RandomTensor(Shape{4}, rng))}, {}, "biased");
      std::string skip = broadcast_skip ? g.Const("row", RandomTensor(Shape{1, 1, 1, 4}, rng)) : g.Op("Tanh", {x}, {}, "skip");
      if (!broadcast_skip && std::string(skip_kind) == "conv") {
        skip = g.Op("BiasAdd",
                    {g.Op("Conv2D", {x, g.Const("f2", RandomTensor(Shape{1, 1, 4, 4}, rng))}, attrs, "projection"),
                     g.Const("b2", RandomTensor(Shape{4}, rng))},
                    {}, "projection_biased");
      }
      std::string y = g.Op("Relu", {g.Op("Add", {skip, biased}, {}, "sum")}, {}, "y");
      g.AddSignature(OneInOneOut("x", Shape{-1, 40, 40, 4}, y, Shape{-1, 40, 40, 4}));
      return std::move(g).Build();
    };
    ThreadPool one(1), three(3);
    Model m = build(false);
    ASSERT_TRUE(OptimizeGraph(m, one).ok());
    const bool conv_skip = std::string(skip_kind) == "conv";
    EXPECT_EQ(CountOps(m, "FusedConv2D"), conv_skip ? 2 : 1);
    EXPECT_EQ(CountOps(m, "Add") + CountOps(m, "BiasAdd") + CountOps(m, "Relu"), 0);
    EXPECT_EQ(m.graph.FindNode("y")->inputs.size(), 4u);
    Model broadcast = build(true);
    ASSERT_TRUE(OptimizeGraph(broadcast, one).ok());
    EXPECT_EQ(CountOps(broadcast, "Add"), 1);

    std::mt19937 rng(22);
    std::vector<NamedTensor> inputs = {{"x", RandomTensor(Shape{3, 40, 40, 4}, rng)}};
    ExpectOptimisedIsPlain(build(false), inputs, {&one, &three});
  }
}

// LayerNormalize -> Mul(scale row) -> Add(offset row, either side) becomes one LayerNormalize,
// with the same bits; where the scaled value is read elsewhere too, only the scale fuses.
TEST(Passes, LayerNormScaleAndOffsetFuseIntoIt) {
  GraphBuilder g;
  std::mt19937 rng(17);
  std::string x = g.Input("x", DType::kFloat32, Shape{-1, 3, 24});
  std::string normal = g.Op("LayerNormalize", {x}, {}, "ln");
  std::string scaled = g.Op("Mul", {g.Const("gamma", RandomTensor(Shape{24}, rng)), normal}, {}, "scaled");
  std::string y = g.Op("Add", {g.Const("beta", RandomTensor(Shape{24}, rng)), scaled}, {}, "y");
  std::string z = g.Input("z", DType::kFloat32, Shape{-1, 24});
  std::string z_scaled = g.Op("Mul", {g.Op("LayerNormalize", {z}, {}, "ln_z"), g.Const("gamma_z", RandomTensor(Shape{24}, rng))}, {}, "z_scaled");
  std::string w = g.Op("BiasAdd", {z_scaled, g.Const("beta_z", RandomTensor(Shape{24}, rng))}, {}, "w");
  Signature sig = OneInOneOut("x", Shape{-1, 3, 24}, y, Shape{-1, 3, 24});
  sig.inputs.push_back({"z", z, DType::kFloat32, Shape{-1, 24}});
  sig.outputs.push_back({"w", w, DType::kFloat32, Shape{-1, 24}});
  sig.outputs.push_back({"z_scaled", z_scaled, DType::kFloat32, Shape{-1, 24}});
  g.AddSignature(sig);
  Model m = std::move(g).Build();
  const Model original = m;
  ASSERT_TRUE(FuseLayerNormScaleOffset(m).ok());
  EXPECT_EQ(m.graph.FindNode("y")->op, "LayerNormalize");
  EXPECT_EQ(m.graph.FindNode("y")->inputs.size(), 3u);
  EXPECT_EQ(m.graph.FindNode("ln"), nullptr);
  EXPECT_EQ(m.graph.FindNode("scaled"), nullptr);
  EXPECT_EQ(m.graph.FindNode("z_scaled")->op, "LayerNormalize");  // a signature reads it: the offset stays out
  EXPECT_EQ(m.graph.FindNode("z_scaled")->inputs.size(), 2u);
  EXPECT_EQ(m.graph.FindNode("w")->op, "BiasAdd");
  std::vector<NamedTensor> inputs = {{"x", RandomTensor(Shape{2, 3, 24}, rng)}, {"z", RandomTensor(Shape{5, 24}, rng)}};
  const std::vector<NamedTensor> fused = RunUnoptimised(m, inputs), plain = RunUnoptimised(original, inputs);
  ASSERT_EQ(fused.size(), 3u);
  for (size_t k = 0; k < 3; ++k) EXPECT_TRUE(fused[k].tensor.BitwiseEqual(plain[k].tensor)) << fused[k].name;
}

TEST(Passes, DeadNodeEliminationKeepsSignatureInputs) {
  GraphBuilder g;
  std::string x = g.Input("x", DType::kFloat32, Shape{-1});
  g.Input("unused", DType::kFloat32, Shape{-1});
  g.Op("Relu", {x}, {}, "dead");
  g.Op("Tanh", {x}, {}, "y");
  Signature sig = OneInOneOut("x", Shape{-1}, "y", Shape{-1});
  sig.inputs.push_back({"unused", "unused", DType::kFloat32, Shape{-1}});
  g.AddSignature(sig);
  Model m = std::move(g).Build();
  ASSERT_TRUE(EliminateDeadNodes(m).ok());
  EXPECT_EQ(m.graph.FindNode("dead"), nullptr);
  EXPECT_NE(m.graph.FindNode("unused"), nullptr);
  EXPECT_NE(m.graph.FindNode("y"), nullptr);
}

}  // namespace
}  // namespace lockstep
