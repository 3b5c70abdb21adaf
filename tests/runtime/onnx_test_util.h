// Builds small ONNX models in code for the importer's tests and the end-to-end tests, with
// ONNX's own protobuf classes: what PyTorch's exporter writes, node by node.
#pragma once

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "onnx/onnx_pb.h"
#include "runtime/bfloat16.h"
#include "runtime/onnx/onnx_model.h"
#include "runtime/session.h"
#include "tests/common/run_command.h"
#include "runtime/tensor.h"

namespace lockstep::testing_onnx {

// A dimension known only at run time and to no other (its own dim_param), where -1 in the
// builder's dims is the shared "batch".
inline constexpr int64_t kRunTimeDim = -2;

class OnnxModelBuilder {
 public:
  explicit OnnxModelBuilder(int opset = 13) {
    model_.set_ir_version(8);
    model_.set_producer_name("lockstep-tests");
    auto* o = model_.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    model_.mutable_graph()->set_name("test");
  }

  // A float32 (or `elem`) graph input; -1 dimensions get a dim_param ("batch"), each kRunTimeDim
  // one of its own.
  void Input(const std::string& name, std::vector<int64_t> dims, int elem = onnx::TensorProto::FLOAT) {
    SetType(model_.mutable_graph()->add_input(), name, dims, elem);
  }
  void Output(const std::string& name, std::vector<int64_t> dims, int elem = onnx::TensorProto::FLOAT) {
    SetType(model_.mutable_graph()->add_output(), name, dims, elem);
  }
  onnx::TensorProto* Initializer(const std::string& name, std::vector<int64_t> dims, const std::vector<float>& values) {
    onnx::TensorProto* t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    for (float v : values) t->add_float_data(v);
    return t;
  }
  void Int64Initializer(const std::string& name, std::vector<int64_t> dims, const std::vector<int64_t>& values) {
    onnx::TensorProto* t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    for (int64_t d : dims) t->add_dims(d);
    for (int64_t v : values) t->add_int64_data(v);
  }
  onnx::NodeProto* Node(const std::string& op, std::vector<std::string> inputs, std::vector<std::string> outputs,
                        const std::string& name = "") {
    onnx::NodeProto* n = model_.mutable_graph()->add_node();
    n->set_op_type(op);
    n->set_name(name.empty() ? op + "_" + std::to_string(model_.graph().node_size()) : name);
    for (const auto& i : inputs) n->add_input(i);
    for (const auto& o : outputs) n->add_output(o);
    return n;
  }
  static void IntAttr(onnx::NodeProto* n, const std::string& name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void FloatAttr(onnx::NodeProto* n, const std::string& name, float v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void StringAttr(onnx::NodeProto* n, const std::string& name, const std::string& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
  }
  static void IntsAttr(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }

  onnx::ModelProto& proto() { return model_; }
  std::string Serialized() const { return model_.SerializeAsString(); }
  // Writes `dir`/model.onnx (creating `dir`).
  void Write(const std::filesystem::path& dir) const {
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "model.onnx", std::ios::binary) << Serialized();
  }

 private:
  static void SetType(onnx::ValueInfoProto* vi, const std::string& name, const std::vector<int64_t>& dims, int elem) {
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    auto* shape = tt->mutable_shape();
    for (size_t i = 0; i < dims.size(); ++i) {
      auto* dim = shape->add_dim();
      if (dims[i] == kRunTimeDim) dim->set_dim_param(name + "_d" + std::to_string(i));
      else if (dims[i] < 0) dim->set_dim_param("batch");
      else dim->set_dim_value(dims[i]);
    }
  }
  onnx::ModelProto model_;
};

// A float32 tensor of `shape` whose values, in [-1, 1] by eighths, differ with `seed`.
inline Tensor Pattern(const Shape& shape, int seed) {
  Tensor t(DType::kFloat32, shape);
  auto v = t.mutable_data<float>();
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = static_cast<float>(static_cast<int>((i * 7919 + static_cast<size_t>(seed) * 104729) % 17) - 8) / 8.0f;
  }
  return t;
}

// A case made by a prepare script of the source tree (tests/real_models/*/prepare: exports and
// references cached by hash), its ONNX model (`model_file`, in the directory the script prints)
// read and compiled. `error` says what failed, else `dir` and `session` are set.
struct PreparedOnnxCase {
  std::filesystem::path dir;
  std::unique_ptr<Session> session;
  std::string error;
};
inline PreparedOnnxCase PrepareOnnxCase(const std::string& script, const std::string& model_file) {
  PreparedOnnxCase c;
  const test::CommandResult made = test::RunCommand(std::string(LOCKSTEP_SOURCE_DIR) + "/" + script);
  if (made.exit_code != 0) {
    c.error = script + " failed:\n" + made.output;
    return c;
  }
  c.dir = test::LastLine(made.output);
  StatusOr<Model> model = ReadOnnxModelFile(c.dir / model_file);
  if (!model.ok()) {
    c.error = model.status().ToString();
    return c;
  }
  StatusOr<std::unique_ptr<Session>> session = Session::Create(std::move(*model));
  if (!session.ok()) {
    c.error = session.status().ToString();
    return c;
  }
  c.session = std::move(*session);
  return c;
}

// The MLP of the serving tests: x [batch, 4] -> Gemm(W1 [3, 4], transB, b1) -> Relu ->
// MatMul(W2 [3, 2]) -> Add(b2) -> Softmax -> "probabilities" [batch, 2]; as torch.onnx.export
// writes an nn.Linear / nn.ReLU / nn.Linear / nn.Softmax stack (the second Linear unfused).
inline OnnxModelBuilder MakeMlp() {
  OnnxModelBuilder b;
  b.Input("x", {-1, 4});
  b.Output("probabilities", {-1, 2});
  b.Initializer("W1", {3, 4}, {0.5f, -0.25f, 0.125f, 1.0f, -1.0f, 0.75f, 0.5f, 0.25f, 0.1f, 0.2f, -0.3f, 0.4f});
  b.Initializer("b1", {3}, {0.1f, -0.2f, 0.3f});
  b.Initializer("W2", {3, 2}, {1.0f, -1.0f, 0.5f, 0.25f, -0.75f, 2.0f});
  b.Initializer("b2", {2}, {0.05f, -0.05f});
  auto* gemm = b.Node("Gemm", {"x", "W1", "b1"}, {"h"}, "/fc1/Gemm");
  OnnxModelBuilder::IntAttr(gemm, "transB", 1);
  b.Node("Relu", {"h"}, {"onnx::MatMul_7"}, "/relu/Relu");
  b.Node("MatMul", {"onnx::MatMul_7", "W2"}, {"z"}, "/fc2/MatMul");
  b.Node("Add", {"z", "b2"}, {"logits"}, "/fc2/Add");
  auto* softmax = b.Node("Softmax", {"logits"}, {"probabilities"}, "/softmax/Softmax");
  OnnxModelBuilder::IntAttr(softmax, "axis", -1);
  return b;
}

// The same MLP's answer for one row, computed here in double; with `bf16_products`, each
// product's operands rounded to bfloat16 first, as the bf16 matmul core computes.
inline std::vector<double> MlpReference(const std::vector<float>& x, bool bf16_products = false) {
  auto operand = [bf16_products](double v) {
    return bf16_products ? static_cast<double>(Bfloat16ToFloat(FloatToBfloat16(static_cast<float>(v)))) : v;
  };
  const float w1[3][4] = {{0.5f, -0.25f, 0.125f, 1.0f}, {-1.0f, 0.75f, 0.5f, 0.25f}, {0.1f, 0.2f, -0.3f, 0.4f}};
  const float b1[3] = {0.1f, -0.2f, 0.3f};
  const float w2[3][2] = {{1.0f, -1.0f}, {0.5f, 0.25f}, {-0.75f, 2.0f}};
  const float b2[2] = {0.05f, -0.05f};
  double h[3], z[2];
  for (int j = 0; j < 3; ++j) {
    h[j] = b1[j];
    for (int k = 0; k < 4; ++k) h[j] += operand(x[k]) * operand(w1[j][k]);
    h[j] = h[j] > 0 ? h[j] : 0;
  }
  for (int j = 0; j < 2; ++j) {
    z[j] = b2[j];
    // The hidden layer reaches the second product as float32.
    for (int k = 0; k < 3; ++k) z[j] += operand(static_cast<float>(h[k])) * operand(w2[k][j]);
  }
  const double m = std::max(z[0], z[1]);
  const double e0 = std::exp(z[0] - m), e1 = std::exp(z[1] - m);
  return {e0 / (e0 + e1), e1 / (e0 + e1)};
}

}  // namespace lockstep::testing_onnx
