// Control flow (If, Loop, Scan) and sequences: the runtime's ops on bodies built here, a bundle
// that holds one, and the ONNX importer's translation of subgraphs that read the enclosing
// graph (its inputs, its weights, a body nested in a body) and of sequences resolved at load.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <tuple>

#include "runtime/bundle/bundle.h"
#include "runtime/graph_builder.h"
#include "runtime/onnx/onnx_model.h"
#include "runtime/session.h"
#include "tests/runtime/onnx_test_util.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
using testing_onnx::OnnxModelBuilder;

std::vector<float> Floats(const Tensor& t) { return {t.data<float>().begin(), t.data<float>().end()}; }

// A body: `inputs` (name, dtype, shape) in order, the ops `build` adds, and its outputs.
SubgraphAttr Body(const std::vector<std::tuple<std::string, DType, Shape>>& inputs,
                  const std::function<std::vector<std::string>(GraphBuilder&)>& build) {
  GraphBuilder g;
  Signature sig{"body", "", {}, {}};
  for (const auto& [name, dtype, shape] : inputs) {
    sig.inputs.push_back({name, g.Input(name, dtype, shape), dtype, shape});
  }
  std::vector<std::string> outs = build(g);
  Model m = std::move(g).Build();
  for (size_t k = 0; k < outs.size(); ++k) {
    // The dtype and shape of each output, as the importer would declare them.
    const NodeDef* producer = m.graph.FindNode(outs[k]);
    DType dtype = DType::kFloat32;
    Shape shape{2};
    if (producer != nullptr && producer->op == "Less") {
      dtype = DType::kBool;
      shape = Shape{};
    }
    sig.outputs.push_back({std::to_string(k), outs[k], dtype, shape});
  }
  m.graph.signatures.push_back(std::move(sig));
  return std::make_shared<const Graph>(std::move(m.graph));
}

std::unique_ptr<Session> MustCreate(Model model) {
  StatusOr<std::unique_ptr<Session>> s = Session::Create(std::move(model));
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(*s) : nullptr;
}

// acc [2] and step [2] -> Loop: acc += step while the iteration number is below `limit`
// (3 runs for a limit of 2), at most `trips` times; also every acc, stacked.
Model AccumulatingLoop() {
  SubgraphAttr body = Body({{"i", DType::kInt64, Shape{}}, {"c", DType::kBool, Shape{}},
                            {"acc", DType::kFloat32, Shape{2}}, {"step", DType::kFloat32, Shape{2}},
                            {"limit", DType::kInt64, Shape{}}},
                           [](GraphBuilder& g) {
                             std::string more = g.Op("Less", {"i", "limit"});
                             std::string acc = g.Op("Add", {"acc", "step"});
                             return std::vector<std::string>{more, acc, g.Op("Identity", {acc})};
                           });
  GraphBuilder g;
  g.Input("trips", DType::kInt64, Shape{});
  g.Input("go", DType::kBool, Shape{});
  g.Input("acc0", DType::kFloat32, Shape{2});
  g.Input("step", DType::kFloat32, Shape{2});
  g.Input("limit", DType::kInt64, Shape{});
  std::string loop = g.Op("Loop", {"trips", "go", "acc0", "step", "limit"},
                          AttrMap{{"body", body}, {"has_trip_count", true}, {"has_condition", true},
                                  {"num_carried", int64_t{1}}, {"num_outputs", int64_t{2}}},
                          "loop");
  g.AddSignature({"serving_default", "",
                  {{"trips", "trips", DType::kInt64, Shape{}}, {"go", "go", DType::kBool, Shape{}},
                   {"acc0", "acc0", DType::kFloat32, Shape{2}}, {"step", "step", DType::kFloat32, Shape{2}},
                   {"limit", "limit", DType::kInt64, Shape{}}},
                  {{"acc", loop, DType::kFloat32, Shape{2}}, {"all", loop + ":1", DType::kFloat32, Shape{-1, 2}}}});
  return std::move(g).Build();
}

std::vector<NamedTensor> LoopFeed(int64_t trips, bool go, int64_t limit) {
  return {{"trips", Tensor::Scalar<int64_t>(trips)}, {"go", Tensor::Scalar<bool>(go)},
          {"acc0", Tensor::FromVector<float>(Shape{2}, {1, 2})}, {"step", Tensor::FromVector<float>(Shape{2}, {10, 20})},
          {"limit", Tensor::Scalar<int64_t>(limit)}};
}

TEST(ControlFlowTest, LoopStopsAtItsTripCountOrItsCondition) {
  auto session = MustCreate(AccumulatingLoop());
  ASSERT_NE(session, nullptr);
  std::vector<NamedTensor> out;
  // The condition stops it after 3 runs.
  ASSERT_TRUE(session->Run("serving_default", LoopFeed(10, true, 2), &out).ok());
  EXPECT_EQ(Floats(out[0].tensor), (std::vector<float>{31, 62}));
  EXPECT_EQ(out[1].tensor.shape(), (Shape{3, 2}));
  EXPECT_EQ(Floats(out[1].tensor), (std::vector<float>{11, 22, 21, 42, 31, 62}));
  // The trip count stops it first.
  ASSERT_TRUE(session->Run("serving_default", LoopFeed(1, true, 5), &out).ok());
  EXPECT_EQ(Floats(out[0].tensor), (std::vector<float>{11, 22}));
  // No iteration at all: the initial value, and an empty stack.
  ASSERT_TRUE(session->Run("serving_default", LoopFeed(5, false, 5), &out).ok());
  EXPECT_EQ(Floats(out[0].tensor), (std::vector<float>{1, 2}));
  EXPECT_EQ(out[1].tensor.shape(), (Shape{0, 2}));
}

TEST(ControlFlowTest, ABundleHoldsItsLoopAndAnswersTheSame) {
  const fs::path dir = fs::temp_directory_path() / ("control_flow_bundle_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  ASSERT_TRUE(WriteBundle(AccumulatingLoop(), dir).ok());
  StatusOr<Model> read = ReadBundle(dir);
  fs::remove_all(dir);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  auto session = MustCreate(std::move(*read));
  ASSERT_NE(session, nullptr);
  std::vector<NamedTensor> out;
  ASSERT_TRUE(session->Run("serving_default", LoopFeed(10, true, 2), &out).ok());
  EXPECT_EQ(Floats(out[0].tensor), (std::vector<float>{31, 62}));
}

TEST(ControlFlowTest, IfRunsTheBranchItsConditionPicksOnThatBranchsInputs) {
  SubgraphAttr twice = Body({{"a", DType::kFloat32, Shape{2}}},
                            [](GraphBuilder& g) { return std::vector<std::string>{g.Op("Add", {"a", "a"})}; });
  SubgraphAttr negated = Body({{"b", DType::kFloat32, Shape{2}}},
                              [](GraphBuilder& g) { return std::vector<std::string>{g.Op("Neg", {"b"})}; });
  GraphBuilder g;
  g.Input("cond", DType::kBool, Shape{});
  g.Input("x", DType::kFloat32, Shape{2});
  g.Input("y", DType::kFloat32, Shape{2});
  std::string out = g.Op("If", {"cond", "x", "y"},
                         AttrMap{{"then_branch", twice}, {"else_branch", negated}, {"num_outputs", int64_t{1}}});
  g.AddSignature({"serving_default", "",
                  {{"cond", "cond", DType::kBool, Shape{}}, {"x", "x", DType::kFloat32, Shape{2}},
                   {"y", "y", DType::kFloat32, Shape{2}}},
                  {{"z", out, DType::kFloat32, Shape{2}}}});
  auto session = MustCreate(std::move(g).Build());
  ASSERT_NE(session, nullptr);
  std::vector<NamedTensor> result;
  for (bool cond : {true, false}) {
    std::vector<NamedTensor> feed{{"cond", Tensor::Scalar<bool>(cond)},
                                  {"x", Tensor::FromVector<float>(Shape{2}, {1, 2})},
                                  {"y", Tensor::FromVector<float>(Shape{2}, {3, 4})}};
    ASSERT_TRUE(session->Run("serving_default", feed, &result).ok());
    EXPECT_EQ(Floats(result[0].tensor), cond ? (std::vector<float>{2, 4}) : (std::vector<float>{-3, -4}));
  }
}

TEST(ControlFlowTest, ScanWalksItsInputFromTheEndWhereItsDirectionSays) {
  SubgraphAttr body = Body({{"s", DType::kFloat32, Shape{2}}, {"x", DType::kFloat32, Shape{2}}},
                           [](GraphBuilder& g) {
                             std::string sum = g.Op("Add", {"s", "x"});
                             return std::vector<std::string>{sum, g.Op("Identity", {sum})};
                           });
  GraphBuilder g;
  g.Input("s0", DType::kFloat32, Shape{2});
  g.Input("xs", DType::kFloat32, Shape{3, 2});
  std::string scan = g.Op("Scan", {"s0", "xs"},
                          AttrMap{{"body", body}, {"num_states", int64_t{1}}, {"num_scan_inputs", int64_t{1}},
                                  {"scan_input_directions", std::vector<int64_t>{1}},
                                  {"scan_output_directions", std::vector<int64_t>{1}}, {"num_outputs", int64_t{2}}});
  g.AddSignature({"serving_default", "",
                  {{"s0", "s0", DType::kFloat32, Shape{2}}, {"xs", "xs", DType::kFloat32, Shape{3, 2}}},
                  {{"last", scan, DType::kFloat32, Shape{2}}, {"sums", scan + ":1", DType::kFloat32, Shape{3, 2}}}});
  auto session = MustCreate(std::move(g).Build());
  ASSERT_NE(session, nullptr);
  std::vector<NamedTensor> out;
  std::vector<NamedTensor> feed{{"s0", Tensor::FromVector<float>(Shape{2}, {0, 0})},
                                {"xs", Tensor::FromVector<float>(Shape{3, 2}, {1, 2, 3, 4, 5, 6})}};
  ASSERT_TRUE(session->Run("serving_default", feed, &out).ok());
  EXPECT_EQ(Floats(out[0].tensor), (std::vector<float>{9, 12}));
  // Sums from the end (5 6, 8 10, 9 12), stacked from the end again.
  EXPECT_EQ(Floats(out[1].tensor), (std::vector<float>{9, 12, 8, 10, 5, 6}));
}

TEST(ControlFlowTest, ABodyThatHoldsAWeightIsRefusedNamingTheNode) {
  GraphBuilder b;
  Signature sig{"body", "", {{"a", b.Input("a", DType::kFloat32, Shape{2}), DType::kFloat32, Shape{2}}}, {}};
  std::string w = b.Const("w", Tensor::FromVector<float>(Shape{2}, {1, 1}));
  sig.outputs.push_back({"0", b.Op("Add", {"a", w}), DType::kFloat32, Shape{2}});
  Model body = std::move(b).Build();
  body.graph.signatures.push_back(sig);
  auto graph = std::make_shared<const Graph>(body.graph);
  GraphBuilder g;
  g.Input("cond", DType::kBool, Shape{});
  g.Input("x", DType::kFloat32, Shape{2});
  std::string out = g.Op("If", {"cond", "x", "x"},
                         AttrMap{{"then_branch", graph}, {"else_branch", graph}, {"num_outputs", int64_t{1}}}, "branch");
  g.AddSignature({"serving_default", "",
                  {{"cond", "cond", DType::kBool, Shape{}}, {"x", "x", DType::kFloat32, Shape{2}}},
                  {{"z", out, DType::kFloat32, Shape{2}}}});
  StatusOr<std::unique_ptr<Session>> s = Session::Create(std::move(g).Build());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("node 'branch' (If) attr"), std::string::npos) << s.status().message();
}

// ---- ONNX ----

void SetType(onnx::ValueInfoProto* vi, const std::string& name, std::vector<int64_t> dims,
             int elem = onnx::TensorProto::FLOAT) {
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem);
  for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
}

onnx::NodeProto* AddNode(onnx::GraphProto& g, const std::string& op, std::vector<std::string> inputs,
                         std::vector<std::string> outputs) {
  onnx::NodeProto* n = g.add_node();
  n->set_op_type(op);
  n->set_name(op + "_" + std::to_string(g.node_size()));
  for (const auto& i : inputs) n->add_input(i);
  for (const auto& o : outputs) n->add_output(o);
  return n;
}

void GraphAttr(onnx::NodeProto* n, const std::string& name, onnx::GraphProto g) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::GRAPH);
  *a->mutable_g() = std::move(g);
}

StatusOr<std::vector<NamedTensor>> ImportAndRun(OnnxModelBuilder& b, std::vector<NamedTensor> feed) {
  LS_ASSIGN_OR_RETURN(Model model, ImportOnnxModel(b.proto(), fs::temp_directory_path()));
  LS_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Create(std::move(model)));
  std::vector<NamedTensor> out;
  LS_RETURN_IF_ERROR(session->Run("serving_default", feed, &out));
  return out;
}

// y = x; for i in range(n): y = y * w + (i % 2 == 0 ? x : -x), with w an initializer and x a
// graph input that the body (and the If nested in it) read from the enclosing graphs.
TEST(OnnxControlFlowTest, ALoopsBodyReadsTheOuterGraphsInputsAndWeightsThroughANestedIf) {
  OnnxModelBuilder b(13);
  b.Input("x", {2});
  b.Input("n", {}, onnx::TensorProto::INT64);
  b.Output("y", {2});
  b.Output("ys", {-1, 2});
  b.Initializer("w", {2}, {0.5f, 2.0f});
  b.Int64Initializer("two", {}, {2});
  b.Int64Initializer("zero", {}, {0});

  onnx::GraphProto then_branch;
  then_branch.set_name("then");
  AddNode(then_branch, "Identity", {"x"}, {"picked"});
  SetType(then_branch.add_output(), "picked", {2});
  onnx::GraphProto else_branch;
  else_branch.set_name("else");
  AddNode(else_branch, "Neg", {"x"}, {"negated"});
  SetType(else_branch.add_output(), "negated", {2});

  onnx::GraphProto body;
  body.set_name("body");
  SetType(body.add_input(), "i", {}, onnx::TensorProto::INT64);
  SetType(body.add_input(), "c", {}, onnx::TensorProto::BOOL);
  SetType(body.add_input(), "y_in", {2});
  AddNode(body, "Mod", {"i", "two"}, {"parity"});
  AddNode(body, "Equal", {"parity", "zero"}, {"even"});
  onnx::NodeProto* branch = AddNode(body, "If", {"even"}, {"term"});
  GraphAttr(branch, "then_branch", then_branch);
  GraphAttr(branch, "else_branch", else_branch);
  AddNode(body, "Mul", {"y_in", "w"}, {"scaled"});
  AddNode(body, "Add", {"scaled", "term"}, {"y_out"});
  AddNode(body, "Identity", {"c"}, {"c_out"});
  AddNode(body, "Identity", {"y_out"}, {"y_scan"});
  SetType(body.add_output(), "c_out", {}, onnx::TensorProto::BOOL);
  SetType(body.add_output(), "y_out", {2});
  SetType(body.add_output(), "y_scan", {2});
  GraphAttr(b.Node("Loop", {"n", "", "x"}, {"y", "ys"}), "body", body);

  StatusOr<std::vector<NamedTensor>> out =
      ImportAndRun(b, {{"x", Tensor::FromVector<float>(Shape{2}, {1, 3})}, {"n", Tensor::Scalar<int64_t>(3)}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  // y: [1 3] -> [1.5 9] -> [-0.25 -15+... ] computed step by step below.
  std::vector<float> y{1, 3};
  std::vector<float> ys;
  const std::vector<float> x{1, 3}, w{0.5f, 2.0f};
  for (int i = 0; i < 3; ++i) {
    for (int k = 0; k < 2; ++k) y[k] = y[k] * w[k] + (i % 2 == 0 ? x[k] : -x[k]);
    ys.insert(ys.end(), y.begin(), y.end());
  }
  EXPECT_EQ(Floats((*out)[0].tensor), y);
  EXPECT_EQ((*out)[1].tensor.shape(), (Shape{3, 2}));
  EXPECT_EQ(Floats((*out)[1].tensor), ys);
}

// y grows by one value per iteration (Concat of the iteration number), as a decoder's tokens do:
// the carried value's shape is the initial one's only at the first iteration.
TEST(OnnxControlFlowTest, ALoopsCarriedValueMayGrowFromOneIterationToTheNext) {
  OnnxModelBuilder b(13);
  b.Input("n", {}, onnx::TensorProto::INT64);
  b.Output("y", {-1});
  b.Initializer("empty", {0}, {});
  b.Int64Initializer("axes", {1}, {0});
  onnx::GraphProto body;
  body.set_name("body");
  SetType(body.add_input(), "i", {}, onnx::TensorProto::INT64);
  SetType(body.add_input(), "c", {}, onnx::TensorProto::BOOL);
  // The carried input's type without a shape, as exporters often leave it.
  onnx::ValueInfoProto* carried = body.add_input();
  carried->set_name("y_in");
  carried->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  AddNode(body, "Cast", {"i"}, {"i_float"})->add_attribute()->CopyFrom([] {
    onnx::AttributeProto a;
    a.set_name("to");
    a.set_type(onnx::AttributeProto::INT);
    a.set_i(onnx::TensorProto::FLOAT);
    return a;
  }());
  AddNode(body, "Unsqueeze", {"i_float", "axes"}, {"one"});
  onnx::NodeProto* concat = AddNode(body, "Concat", {"y_in", "one"}, {"y_out"});
  OnnxModelBuilder::IntAttr(concat, "axis", 0);
  AddNode(body, "Identity", {"c"}, {"c_out"});
  SetType(body.add_output(), "c_out", {}, onnx::TensorProto::BOOL);
  onnx::ValueInfoProto* out = body.add_output();
  out->set_name("y_out");
  out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  GraphAttr(b.Node("Loop", {"n", "", "empty"}, {"y"}), "body", body);
  StatusOr<std::vector<NamedTensor>> result = ImportAndRun(b, {{"n", Tensor::Scalar<int64_t>(4)}});
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(Floats((*result)[0].tensor), (std::vector<float>{0, 1, 2, 3}));
}

// A cumulative sum along axis 1 of x [2, 3], from the end, stacked back along axis 1.
TEST(OnnxControlFlowTest, ScanOnASecondAxisFromTheEnd) {
  OnnxModelBuilder b(11);
  b.Input("x", {2, 3});
  b.Input("s0", {2});
  b.Output("s", {2});
  b.Output("sums", {2, 3});
  onnx::GraphProto body;
  body.set_name("body");
  SetType(body.add_input(), "s_in", {2});
  SetType(body.add_input(), "col", {2});
  AddNode(body, "Add", {"s_in", "col"}, {"s_out"});
  AddNode(body, "Identity", {"s_out"}, {"running"});
  SetType(body.add_output(), "s_out", {2});
  SetType(body.add_output(), "running", {2});
  onnx::NodeProto* scan = b.Node("Scan", {"s0", "x"}, {"s", "sums"});
  GraphAttr(scan, "body", body);
  OnnxModelBuilder::IntAttr(scan, "num_scan_inputs", 1);
  OnnxModelBuilder::IntsAttr(scan, "scan_input_axes", {1});
  OnnxModelBuilder::IntsAttr(scan, "scan_input_directions", {1});
  OnnxModelBuilder::IntsAttr(scan, "scan_output_axes", {-1});
  StatusOr<std::vector<NamedTensor>> out =
      ImportAndRun(b, {{"x", Tensor::FromVector<float>(Shape{2, 3}, {1, 2, 3, 4, 5, 6})},
                       {"s0", Tensor::FromVector<float>(Shape{2}, {0, 100})}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Floats((*out)[0].tensor), (std::vector<float>{6, 115}));
  // Column sums from the end: [3 6], [5 11], [6 15] (+100 in row 1), placed in scan order.
  EXPECT_EQ(Floats((*out)[1].tensor), (std::vector<float>{3, 5, 6, 106, 111, 115}));
}

TEST(OnnxSequenceTest, SplitEraseAndConcatResolveWhileLoading) {
  OnnxModelBuilder b(12);
  b.Input("x", {2, 3});
  b.Output("y", {2, 2});
  b.Int64Initializer("first", {}, {0});
  onnx::NodeProto* split = b.Node("SplitToSequence", {"x"}, {"columns"});
  OnnxModelBuilder::IntAttr(split, "axis", 1);
  b.Node("SequenceErase", {"columns", "first"}, {"rest"});
  onnx::NodeProto* concat = b.Node("ConcatFromSequence", {"rest"}, {"y"});
  OnnxModelBuilder::IntAttr(concat, "axis", 1);
  StatusOr<std::vector<NamedTensor>> out =
      ImportAndRun(b, {{"x", Tensor::FromVector<float>(Shape{2, 3}, {1, 2, 3, 4, 5, 6})}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Floats((*out)[0].tensor), (std::vector<float>{2, 3, 5, 6}));
}

TEST(OnnxSequenceTest, APositionKnownOnlyAtRunTimeIsRefusedNamingTheNode) {
  OnnxModelBuilder b(12);
  b.Input("x", {2, 3});
  b.Input("at", {}, onnx::TensorProto::INT64);
  b.Output("y", {-1, 3});
  b.Node("SplitToSequence", {"x"}, {"rows"}, "split");
  b.Node("SequenceAt", {"rows", "at"}, {"y"}, "pick");
  StatusOr<std::vector<NamedTensor>> out =
      ImportAndRun(b, {{"x", Tensor(DType::kFloat32, Shape{2, 3})}, {"at", Tensor::Scalar<int64_t>(0)}});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("node 'pick' (SequenceAt)"), std::string::npos) << out.status().message();
  EXPECT_NE(out.status().message().find("position (input 1) must be a constant"), std::string::npos) << out.status().message();
}

}  // namespace
}  // namespace lockstep
