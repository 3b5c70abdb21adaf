// Models whose graph is made per input (runtime/onnx/onnx_per_input.h, runtime/sessions_per_input.h):
// TorchScript's `squeeze(0)` exported as an If on "dimension 0 is 1" whose branches differ in rank,
// followed by a node that needs the rank (Unsqueeze at axis -1). Such a model loads, declares
// its signature as the graph does, answers each input shape with the graph made for it, keeps
// a bounded number of graphs, pins a scalar input's value where its shape alone does not decide
// a branch, and fails a run its graph cannot be made for with an InvalidArgument naming the node.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "runtime/onnx/onnx_model.h"
#include "runtime/session.h"
#include "tests/runtime/onnx_test_util.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
using testing_onnx::kRunTimeDim;
using testing_onnx::OnnxModelBuilder;
using testing_onnx::Pattern;

// A branch graph: `op` (Squeeze at axis 0, or Neg) of `x` into `name`'s output, whose type
// gives no shape.
onnx::GraphProto Branch(const std::string& name, const std::string& op, const std::string& x) {
  onnx::GraphProto g;
  g.set_name(name);
  onnx::NodeProto* n = g.add_node();
  n->set_op_type(op);
  n->set_name(name + "/" + op);
  n->add_input(x);
  if (op == "Squeeze") n->add_input("axis0");
  n->add_output(name + "_out");
  onnx::ValueInfoProto* out = g.add_output();
  out->set_name(name + "_out");
  out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  return g;
}

void GraphAttr(onnx::NodeProto* n, const std::string& name, onnx::GraphProto g) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::GRAPH);
  *a->mutable_g() = std::move(g);
}

// x [N, 3] -> If(cond; then Squeeze(x, 0), else Neg(x)) -> Unsqueeze(-1) -> [extra_op] ->
// Flatten(0) -> y [1, 3N]. cond: "N is 1" from x's shape, or with `by_scalar`, "mode is 1"
// from an int64 scalar input.
// `x_dims`: x's declared shape.
fs::path WriteSqueezeModel(const std::string& case_name, bool by_scalar, const std::string& extra_op = "",
                           std::vector<int64_t> x_dims = {kRunTimeDim, 3}) {
  OnnxModelBuilder b(13);
  b.Input("x", std::move(x_dims));
  if (by_scalar) b.Input("mode", {}, onnx::TensorProto::INT64);
  b.Output("y", {1, kRunTimeDim});
  b.Int64Initializer("axis0", {1}, {0});
  b.Int64Initializer("axis_last", {1}, {-1});
  b.Int64Initializer("zero", {}, {0});
  b.Int64Initializer("one", {}, {1});
  if (by_scalar) {
    b.Node("Equal", {"mode", "one"}, {"cond"}, "is_one");
  } else {
    b.Node("Shape", {"x"}, {"shape"}, "shape");
    b.Node("Gather", {"shape", "zero"}, {"n"}, "n");
    b.Node("Equal", {"n", "one"}, {"cond"}, "is_one");
  }
  onnx::NodeProto* branch = b.Node("If", {"cond"}, {"squeezed"}, "squeeze_if_one");
  GraphAttr(branch, "then_branch", Branch("then", "Squeeze", "x"));
  GraphAttr(branch, "else_branch", Branch("else", "Neg", "x"));
  b.Node("Unsqueeze", {"squeezed", "axis_last"}, {"u"}, "unsqueeze");
  if (!extra_op.empty()) {
    onnx::NodeProto* extra = b.Node(extra_op, {"u"}, {"v"}, "extra");
    if (extra_op == "DepthToSpace") OnnxModelBuilder::IntAttr(extra, "blocksize", 1);
    if (extra_op == "Transpose") OnnxModelBuilder::IntsAttr(extra, "perm", {1, 0});
  }
  onnx::NodeProto* flat = b.Node("Flatten", {extra_op.empty() ? "u" : "v"}, {"y"}, "flatten");
  OnnxModelBuilder::IntAttr(flat, "axis", 0);
  const fs::path dir = fs::temp_directory_path() / ("lockstep_per_input_" + case_name + "_" + std::to_string(::getpid()));
  b.Write(dir);
  return dir / "model.onnx";
}

std::unique_ptr<Session> Load(const fs::path& file, size_t max_graphs = 8) {
  StatusOr<Model> model = ReadOnnxModelFile(file);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  if (!model.ok()) return nullptr;
  EXPECT_NE(model->per_input, nullptr);
  SessionOptions options;
  options.max_graphs_per_input = max_graphs;
  StatusOr<std::unique_ptr<Session>> session = Session::Create(std::move(*model), options);
  EXPECT_TRUE(session.ok()) << session.status().ToString();
  return session.ok() ? std::move(*session) : nullptr;
}

// Runs x (and mode, if given) and checks y: x's values (squeezed) or their negation, in one row.
void ExpectAnswer(const Session& session, const Shape& x_shape, bool squeezed, int mode = -1) {
  const Tensor x = Pattern(x_shape, static_cast<int>(x_shape.num_elements()));
  const std::vector<NamedTensor> feed = mode >= 0
                                           ? std::vector<NamedTensor>{{"x", x}, {"mode", Tensor::Scalar<int64_t>(mode)}}
                                           : std::vector<NamedTensor>{{"x", x}};
  std::vector<NamedTensor> out;
  const Status run = session.Run("serving_default", feed, &out);
  ASSERT_TRUE(run.ok()) << x_shape.ToString() << ": " << run.ToString();
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].tensor.shape(), (Shape{1, x.num_elements()})) << "x " << x_shape.ToString();
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    ASSERT_EQ(out[0].tensor.data<float>()[i], squeezed ? x.data<float>()[i] : -x.data<float>()[i]) << x_shape.ToString();
  }
}

TEST(OnnxPerInputTest, AnIfOnADimensionTakesItsBranchPerInputShape) {
  std::unique_ptr<Session> session = Load(WriteSqueezeModel("shape", false));
  ASSERT_NE(session, nullptr);
  // The signature is the graph's: x [-1, 3].
  const Signature* sig = session->FindSignature("serving_default");
  ASSERT_NE(sig, nullptr);
  ASSERT_EQ(sig->inputs.size(), 1u);
  EXPECT_EQ(sig->inputs[0].shape, (Shape{-1, 3}));
  EXPECT_EQ(session->graphs_per_input(), 0u);
  ExpectAnswer(*session, Shape{1, 3}, true);
  ExpectAnswer(*session, Shape{2, 3}, false);
  ExpectAnswer(*session, Shape{1, 3}, true);
  EXPECT_EQ(session->graphs_per_input(), 2u);
  // A shape the signature refuses is refused before any graph is made.
  std::vector<NamedTensor> out;
  const std::vector<NamedTensor> wrong{{"x", Pattern(Shape{2, 4}, 0)}};
  const Status refused = session->Run("serving_default", wrong, &out);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("input 'x' must have shape"), std::string::npos) << refused.ToString();
  EXPECT_EQ(session->graphs_per_input(), 2u);
}

TEST(OnnxPerInputTest, TheGraphsKeptAreBoundedAndTheLeastRecentGoesFirst) {
  std::unique_ptr<Session> session = Load(WriteSqueezeModel("bounded", false), 2);
  ASSERT_NE(session, nullptr);
  for (int64_t n : {1, 2, 3, 4, 1, 5}) ExpectAnswer(*session, Shape{n, 3}, n == 1);
  EXPECT_EQ(session->graphs_per_input(), 2u);
}

TEST(OnnxPerInputTest, ConcurrentRunsOfNewAndKeptShapesEachGetTheirOwnGraph) {
  // Three shapes among four threads and two graphs kept: graphs are made, found and dropped
  // while other runs use them.
  std::unique_ptr<Session> session = Load(WriteSqueezeModel("threads", false), 2);
  ASSERT_NE(session, nullptr);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&session, t] {
      for (int i = 0; i < 12; ++i) {
        const int64_t n = 1 + (t + i) % 3;
        ExpectAnswer(*session, Shape{n, 3}, n == 1);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_LE(session->graphs_per_input(), 2u);
}

TEST(OnnxPerInputTest, AScalarInputThatDecidesABranchIsPinned) {
  // The shape [1, 3] does not decide the branch: mode does, and both branches run on it with
  // answers of different ranks, so the graph is made per mode.
  std::unique_ptr<Session> session = Load(WriteSqueezeModel("scalar", true));
  ASSERT_NE(session, nullptr);
  ExpectAnswer(*session, Shape{1, 3}, true, 1);
  ExpectAnswer(*session, Shape{1, 3}, false, 0);
  ExpectAnswer(*session, Shape{1, 3}, true, 1);
  ExpectAnswer(*session, Shape{2, 3}, false, 0);
}

TEST(OnnxPerInputTest, AGraphThatCannotBeMadeForAnInputFailsThatRunAlone) {
  // DepthToSpace reads rank 4 alone: after Unsqueeze's rank 2 or 3 no graph can be made, and
  // the error names the node and the input's shape.
  std::unique_ptr<Session> session = Load(WriteSqueezeModel("unmade", false, "DepthToSpace"));
  ASSERT_NE(session, nullptr);
  std::vector<NamedTensor> out;
  const std::vector<NamedTensor> feed{{"x", Pattern(Shape{2, 3}, 0)}};
  for (int attempt = 0; attempt < 2; ++attempt) {
    const Status run = session->Run("serving_default", feed, &out);
    EXPECT_EQ(run.code(), StatusCode::kInvalidArgument) << run.ToString();
    EXPECT_NE(run.message().find("[2,3]"), std::string::npos) << run.ToString();
    EXPECT_NE(run.message().find("extra"), std::string::npos) << run.ToString();
  }
}

TEST(OnnxPerInputTest, AnInputNoGraphCanBeMadeForLeavesTheOthersOfItsShapeAlone) {
  // Transpose by [1, 0] fits the squeezed branch's rank 2 (mode 1), not the other's rank 3
  // (mode 0): the failing value first, then the good one of the same shape, then the failing
  // one again, which fails again rather than run the good one's graph.
  std::unique_ptr<Session> session = Load(WriteSqueezeModel("poison", true, "Transpose"));
  ASSERT_NE(session, nullptr);
  std::vector<NamedTensor> out;
  const std::vector<NamedTensor> failing{{"x", Pattern(Shape{1, 3}, 0)}, {"mode", Tensor::Scalar<int64_t>(0)}};
  for (int attempt = 0; attempt < 2; ++attempt) {
    const Status run = session->Run("serving_default", failing, &out);
    EXPECT_EQ(run.code(), StatusCode::kInvalidArgument) << run.ToString();
    EXPECT_NE(run.message().find("extra"), std::string::npos) << run.ToString();
    if (attempt == 0) ExpectAnswer(*session, Shape{1, 3}, true, 1);
  }
  EXPECT_EQ(session->graphs_per_input(), 1u);
}

TEST(OnnxPerInputTest, AnOpLockstepDoesNotTranslateIsRefusedAtLoad) {
  // GlobalLpPool: valid ONNX, which Lockstep does not translate (yet).
  const fs::path file = WriteSqueezeModel("unknown_op", false, "GlobalLpPool");
  StatusOr<Model> model = ReadOnnxModelFile(file);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(model.status().message().find("op GlobalLpPool is not supported"), std::string::npos) << model.status().ToString();
}

TEST(OnnxPerInputTest, AModelWithShapesKnownAtLoadIsNotMadePerInput) {
  // The same If over a dimension known in the model: its branch is taken while loading.
  const fs::path file = WriteSqueezeModel("known", false, "", {1, 3});
  StatusOr<Model> model = ReadOnnxModelFile(file);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ(model->per_input, nullptr);
  for (const NodeDef& node : model->graph.nodes) EXPECT_NE(node.op, "If") << node.name;
  StatusOr<std::unique_ptr<Session>> session = Session::Create(std::move(*model));
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  ExpectAnswer(**session, Shape{1, 3}, true);
}

}  // namespace
}  // namespace lockstep
