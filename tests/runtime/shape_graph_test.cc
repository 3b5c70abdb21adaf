// Shape computations in whole graphs, as an ONNX export with dynamic axes makes them:
// Shape -> Gather -> ExpandDims -> Concat -> Reshape -> Transpose run per request with the
// request's sizes, and constant folding turns the same subgraph into constants when the
// input's shape is static.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "runtime/graph_analysis.h"
#include "runtime/graph_builder.h"
#include "runtime/passes/passes.h"
#include "runtime/session.h"
#include "tests/runtime/gradient_check_util.h"
#include "tests/runtime/op_test_util.h"

namespace lockstep {
namespace {

using op_test::I64;

int CountShapeOps(const Model& m, const std::string& op) {
  int n = 0;
  for (const NodeDef& node : m.graph.nodes) n += node.op == op;
  return n;
}

std::unique_ptr<Session> MakeSession(Model model, bool optimize = true) {
  SessionOptions options;
  options.optimize = optimize;
  auto session = Session::Create(std::move(model), options);
  EXPECT_TRUE(session.ok()) << session.status().ToString();
  return session.ok() ? std::move(session).value() : nullptr;
}

Tensor RunOne(const Session& session, const Tensor& x) {
  std::vector<NamedTensor> out;
  Status status = session.Run(kDefaultSignature, std::vector<NamedTensor>{{"x", x}}, &out);
  EXPECT_TRUE(status.ok()) << status.ToString();
  return status.ok() ? out[0].tensor : Tensor();
}

// x [B, S, 8] -> heads [B, 2, S, 4]: x reshaped to [B, S, 2, 4] with B and S read from x's
// shape at run time, then the middle axes swapped (attention's split into heads).
Model SplitHeads(const Shape& x_shape) {
  GraphBuilder g;
  std::string x = g.Input("x", DType::kFloat32, x_shape);
  std::string shape = g.Op("Shape", {x});
  std::string b = g.Op("Gather", {shape, g.Const("zero", Tensor::Scalar<int64_t>(0))});
  std::string s = g.Op("Gather", {shape, g.Const("one", Tensor::Scalar<int64_t>(1))});
  AttrMap at0{{"axis", int64_t{0}}};
  std::string target = g.Op("Concat", {g.Op("ExpandDims", {b}, at0), g.Op("ExpandDims", {s}, at0),
                                       g.Const("heads", I64({2, 4}))},
                            at0);
  std::string y = g.Op("Transpose", {g.Op("Reshape", {x, target})}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  g.AddSignature({std::string(kDefaultSignature), "", {{"x", x, DType::kFloat32, x_shape}},
                  {{"y", y, DType::kFloat32, Shape{-1, 2, -1, 4}}}});
  return std::move(g).Build();
}

// heads[b, h, s, k] = x[b, s, h * 4 + k].
void ExpectHeads(const Tensor& x, const Tensor& y) {
  const int64_t batch = x.shape()[0], seq = x.shape()[1];
  ASSERT_EQ(y.shape(), (Shape{batch, 2, seq, 4}));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < 2; ++h) {
      for (int64_t s = 0; s < seq; ++s) {
        for (int64_t k = 0; k < 4; ++k) {
          ASSERT_EQ(y.data<float>()[((b * 2 + h) * seq + s) * 4 + k], x.data<float>()[(b * seq + s) * 8 + h * 4 + k]);
        }
      }
    }
  }
}

TEST(ShapeGraphTest, DynamicBatchAndSequence) {
  for (bool optimize : {true, false}) {
    std::unique_ptr<Session> session = MakeSession(SplitHeads(Shape{-1, -1, 8}), optimize);
    ASSERT_NE(session, nullptr);
    // The shape subgraph stays: its values change per request.
    EXPECT_EQ(CountShapeOps(session->model(), "Shape"), 1);
    uint64_t seed = 1;
    for (auto [batch, seq] : {std::pair<int64_t, int64_t>{1, 1}, {2, 3}, {3, 5}, {1, 7}, {4, 1}, {2, 0}}) {
      Tensor x = op_test::RandomTensor({batch, seq, 8}, seed++);
      ExpectHeads(x, RunOne(*session, x));
    }
    // A request of the wrong width fails in the kernel, cleanly.
    std::vector<NamedTensor> out;
    const std::vector<NamedTensor> wrong = {{"x", op_test::RandomTensor({2, 3, 6}, 9)}};
    Status status = session->Run(kDefaultSignature, wrong, &out);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.ToString();
  }
}

TEST(ShapeGraphTest, StaticShapesFoldAtLoad) {
  Model model = SplitHeads(Shape{2, 3, 8});
  ThreadPool pool(2);
  ASSERT_TRUE(OptimizeGraph(model, pool).ok());
  // Shape, Gather, ExpandDims and Concat are gone; the Reshape took the folded target as its
  // attr, so inference knows every dimension.
  for (const char* op : {"Shape", "Gather", "ExpandDims", "Concat"}) EXPECT_EQ(CountShapeOps(model, op), 0) << op;
  const NodeDef* reshape = nullptr;
  const NodeDef* transpose = nullptr;
  for (const NodeDef& node : model.graph.nodes) {
    if (node.op == "Reshape") reshape = &node;
    if (node.op == "Transpose") transpose = &node;
  }
  ASSERT_NE(reshape, nullptr);
  ASSERT_NE(transpose, nullptr);
  EXPECT_EQ(reshape->inputs.size(), 1u);
  auto analysis = AnalyzeGraph(model);
  ASSERT_TRUE(analysis.ok()) << analysis.status().ToString();
  EXPECT_EQ(analysis->Spec(*analysis->Resolve(transpose->name)).shape, (Shape{2, 2, 3, 4}));
  std::unique_ptr<Session> session = MakeSession(std::move(model));
  ASSERT_NE(session, nullptr);
  Tensor x = op_test::RandomTensor({2, 3, 8}, 3);
  ExpectHeads(x, RunOne(*session, x));
}

// x [N, 4] -> Reshape(x, [N, 2, 2]) with N = Gather(Shape(x), 0): folded when N is static,
// computed per request when it is not.
Model BatchReshape(const Shape& x_shape, bool any_shape = false) {
  GraphBuilder g;
  std::string x = g.Input("x", DType::kFloat32, x_shape);
  std::string n = g.Op("Gather", {g.Op("Shape", {x}), g.Const("zero", I64({0}))});
  std::string y = g.Op("Reshape", {x, g.Op("Concat", {n, g.Const("tail", I64({2, 2}))}, {{"axis", int64_t{0}}})});
  TensorBinding in{"x", x, DType::kFloat32, x_shape};
  in.any_shape = any_shape;
  g.AddSignature({std::string(kDefaultSignature), "", {in}, {{"y", y, DType::kFloat32, Shape{-1, 2, 2}}}});
  return std::move(g).Build();
}

TEST(ShapeGraphTest, FoldConstantsTakesStaticShapesOnly) {
  ThreadPool pool(2);
  Model fixed = BatchReshape(Shape{3, 4});
  ASSERT_TRUE(FoldConstants(fixed, pool).ok());
  EXPECT_EQ(CountShapeOps(fixed, "Shape"), 0);
  EXPECT_EQ(CountShapeOps(fixed, "Gather"), 0);
  EXPECT_EQ(CountShapeOps(fixed, "Concat"), 0);

  Model dynamic = BatchReshape(Shape{-1, 4});
  ASSERT_TRUE(FoldConstants(dynamic, pool).ok());
  EXPECT_EQ(CountShapeOps(dynamic, "Shape"), 1);
  EXPECT_EQ(CountShapeOps(dynamic, "Gather"), 1);
  std::unique_ptr<Session> session = MakeSession(std::move(dynamic));
  ASSERT_NE(session, nullptr);
  for (int64_t batch : {1, 3}) {
    Tensor x = op_test::RandomTensor({batch, 4}, static_cast<uint64_t>(batch));
    Tensor y = RunOne(*session, x);
    EXPECT_EQ(y.shape(), (Shape{batch, 2, 2}));
    EXPECT_TRUE(y.Reshaped(x.shape()).BitwiseEqual(x));
  }

  // A signature that takes any shape may be fed another one than declared: its Shape stays.
  Model loose = BatchReshape(Shape{3, 4}, /*any_shape=*/true);
  ASSERT_TRUE(FoldConstants(loose, pool).ok());
  EXPECT_EQ(CountShapeOps(loose, "Shape"), 1);
  std::unique_ptr<Session> loose_session = MakeSession(std::move(loose));
  ASSERT_NE(loose_session, nullptr);
  EXPECT_EQ(RunOne(*loose_session, op_test::RandomTensor({5, 4}, 1)).shape(), (Shape{5, 2, 2}));
}

TEST(ShapeGraphTest, FoldingRepeatsThroughReshapes) {
  // t = Reshape(x, [Shape(x)[0], 3, 2]); y = Reshape(t, Shape(t)[1:] with -1 in front): the
  // second Shape is static only once the first Reshape has taken its folded target.
  GraphBuilder g;
  std::string x = g.Input("x", DType::kFloat32, Shape{2, 6});
  AttrMap at0{{"axis", int64_t{0}}};
  std::string n = g.Op("Gather", {g.Op("Shape", {x}), g.Const("zero", I64({0}))});
  std::string t = g.Op("Reshape", {x, g.Op("Concat", {n, g.Const("three_two", I64({3, 2}))}, at0)});
  std::string tail = g.Op("Shape", {t}, {{"start", int64_t{1}}});
  std::string y = g.Op("Reshape", {t, g.Op("Concat", {g.Const("minus_one", I64({-1})), tail}, at0)});
  // A constant whose size inference cannot tell folds too, within the bound; a huge one stays.
  std::string zeros = g.Op("ConstantOfShape", {g.Op("Shape", {y})});
  std::string huge = g.Op("ConstantOfShape", {g.Const("huge_shape", I64({1 << 20, 1 << 20}))});
  g.AddSignature({std::string(kDefaultSignature), "", {{"x", x, DType::kFloat32, Shape{2, 6}}},
                  {{"y", g.Op("Add", {y, zeros}), DType::kFloat32, Shape{2, 3, 2}},
                   {"huge", huge, DType::kFloat32, Shape{-1, -1}}}});
  Model model = std::move(g).Build();
  ThreadPool pool(2);
  ASSERT_TRUE(FoldConstants(model, pool).ok());
  EXPECT_EQ(CountShapeOps(model, "Shape"), 0);
  EXPECT_EQ(CountShapeOps(model, "ConstantOfShape"), 1);  // the huge one
  for (const NodeDef& node : model.graph.nodes) {
    if (node.op == "Reshape") {
      EXPECT_EQ(node.inputs.size(), 1u) << node.name;
    }
  }
  std::unique_ptr<Session> session = MakeSession(std::move(model));
  ASSERT_NE(session, nullptr);
  std::vector<NamedTensor> out;
  Tensor in = op_test::RandomTensor({2, 6}, 5);
  Status status = session->Run(kDefaultSignature, std::vector<NamedTensor>{{"x", in}}, &out);
  EXPECT_EQ(status.code(), StatusCode::kResourceExhausted) << status.ToString();  // the huge output
}

TEST(ShapeGraphTest, GradientsThroughComputedReshapeAndGather) {
  using grad_test::CheckGradients;
  CheckGradients({"Reshape(x, shape)", {Shape{2, 3}}, [](GraphBuilder& g, const std::vector<std::string>& x) {
                    std::string y = g.Op("Reshape", {x[0], g.Op("Shape", {g.Op("Transpose", {x[0]})})});
                    return std::make_pair(y, Shape{3, 2});
                  }});
  CheckGradients({"Gather negative", {Shape{4, 3}}, [](GraphBuilder& g, const std::vector<std::string>& x) {
                    std::string y = g.Op("Gather", {x[0], g.Const("idx", I64({-1, 0, -1}))}, {{"negative_indices", true}});
                    return std::make_pair(y, Shape{3, 3});
                  }});
}

}  // namespace
}  // namespace lockstep
