// The ONNX importer on models built here: what it translates (an MLP as PyTorch exports it),
// what the compiled session makes of it (the matmul core's fusions, batch invariance), and
// every kind of broken file, each a clear error naming the file or the node.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "runtime/graph_analysis.h"
#include "runtime/model_dir.h"
#include "runtime/onnx/onnx_model.h"
#include "runtime/onnx/onnx_tensor.h"
#include "runtime/session.h"
#include "tests/runtime/onnx_test_util.h"

namespace lockstep {
namespace {

// A tensor of `shape` with values in [-1, 1], different for every shape.
Tensor PatternTensor(const Shape& shape) {
  Tensor t(DType::kFloat32, shape);
  auto v = t.mutable_data<float>();
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 7919 + static_cast<size_t>(shape.num_elements())) % 200) / 100.0f - 1.0f;
  return t;
}

// The one input "x" of a signature.
std::vector<NamedTensor> Feed(Tensor x) { return {{"x", std::move(x)}}; }

namespace fs = std::filesystem;
using testing_onnx::MakeMlp;
using testing_onnx::MlpReference;
using testing_onnx::OnnxModelBuilder;

class OnnxImportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("onnx_import_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The error of reading dir_ as a model directory ("" when it loads and compiles).
  std::string LoadError() {
    StatusOr<Model> model = ReadModelDir(dir_);
    if (!model.ok()) return model.status().message();
    StatusOr<std::unique_ptr<Session>> session = Session::Create(std::move(*model));
    return session.ok() ? "" : session.status().message();
  }
  void WriteBytes(const std::string& bytes) { std::ofstream(dir_ / "model.onnx", std::ios::binary) << bytes; }

  fs::path dir_;
};

bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST_F(OnnxImportTest, MlpAsPyTorchExportsItAnswersAsComputedByHand) {
  MakeMlp().Write(dir_);
  ASSERT_EQ(DetectModelFormat(dir_), ModelFormat::kOnnx);
  StatusOr<Model> model = ReadModelDir(dir_);
  ASSERT_TRUE(model.ok()) << model.status().message();
  EXPECT_EQ(model->graph.metadata.at("format"), "onnx");
  EXPECT_EQ(model->graph.metadata.at("onnx_opset"), "13");
  ASSERT_EQ(model->graph.signatures.size(), 1u);
  const Signature& sig = model->graph.signatures[0];
  EXPECT_EQ(sig.name, "serving_default");
  ASSERT_EQ(sig.inputs.size(), 1u);
  EXPECT_EQ(sig.inputs[0].key, "x");
  EXPECT_EQ(sig.inputs[0].shape, (Shape{-1, 4}));
  ASSERT_EQ(sig.outputs.size(), 1u);
  EXPECT_EQ(sig.outputs[0].key, "probabilities");
  EXPECT_EQ(sig.outputs[0].shape, (Shape{-1, 2}));

  auto session = Session::Create(std::move(*model));
  ASSERT_TRUE(session.ok()) << session.status().message();
  // Gemm + Relu, and MatMul + Add of a row vector, run in the matmul core's epilogue.
  int fused = 0;
  for (const NodeDef& n : (*session)->model().graph.nodes) fused += n.op == "FusedMatMul";
  EXPECT_EQ(fused, 2);

  const std::vector<std::vector<float>> rows = {{1, 2, 3, 4}, {-1, 0.5f, 2, -3}, {0, 0, 0, 0}};
  std::vector<float> flat;
  for (const auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
  std::vector<NamedTensor> out;
  ASSERT_TRUE((*session)->Run("serving_default", Feed(Tensor::FromVector<float>(Shape{3, 4}, flat)), &out).ok());
  ASSERT_EQ(out[0].tensor.shape(), (Shape{3, 2}));
  for (size_t r = 0; r < rows.size(); ++r) {
    const std::vector<double> want = MlpReference(rows[r]);
    for (size_t j = 0; j < 2; ++j) EXPECT_NEAR(out[0].tensor.data<float>()[r * 2 + j], want[j], 1e-6);
    // A row of the batch is its batch-of-one answer, bit for bit.
    std::vector<NamedTensor> one;
    ASSERT_TRUE((*session)->Run("serving_default", Feed(Tensor::FromVector<float>(Shape{1, 4}, rows[r])), &one).ok());
    EXPECT_EQ(std::memcmp(one[0].tensor.data<float>().data(), out[0].tensor.data<float>().data() + r * 2, 8), 0);
  }
  // The declared feature dimension is held: [1, 5] is refused before any kernel runs.
  Status bad = (*session)->Run("serving_default", Feed(Tensor(DType::kFloat32, Shape{1, 5})), &out);
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
}

TEST_F(OnnxImportTest, ExternalDataBesideTheModelIsRead) {
  OnnxModelBuilder b = MakeMlp();
  // W2 moves to a file of its own, at an offset, as onnx.save_model(..., save_as_external_data) does.
  for (auto& init : *b.proto().mutable_graph()->mutable_initializer()) {
    if (init.name() != "W2") continue;
    std::string bytes(16, 'x');
    for (float v : init.float_data()) bytes.append(reinterpret_cast<const char*>(&v), sizeof v);
    init.clear_float_data();
    init.set_data_location(onnx::TensorProto::EXTERNAL);
    auto add = [&](const char* k, const std::string& v) {
      auto* e = init.add_external_data();
      e->set_key(k);
      e->set_value(v);
    };
    add("location", "weights/w2.bin");
    add("offset", "16");
    add("length", "24");
    fs::create_directories(dir_ / "weights");
    std::ofstream(dir_ / "weights/w2.bin", std::ios::binary) << bytes;
  }
  b.Write(dir_);
  EXPECT_EQ(LoadError(), "");
}

TEST_F(OnnxImportTest, BrokenFilesAreClearErrors) {
  // Garbage, and a truncated model.
  WriteBytes("this is not a protocol buffer \xff\xff\xff");
  std::string error = LoadError();
  EXPECT_TRUE(Contains(error, "model.onnx") && Contains(error, "not an ONNX ModelProto")) << error;
  const std::string whole = MakeMlp().Serialized();
  WriteBytes(whole.substr(0, whole.size() / 2));
  error = LoadError();
  EXPECT_TRUE(Contains(error, "model.onnx")) << error;
  EXPECT_NE(error, "");
}

TEST_F(OnnxImportTest, AnOpOutsideTheTableNamesTheNodeAndTheOp) {
  OnnxModelBuilder b;
  b.Input("x", {2, 2});
  b.Output("y", {2, 2});
  b.Node("RandomUniformLike", {"x"}, {"d"}, "my_noise");
  b.Node("Identity", {"x"}, {"y"});
  b.Write(dir_);
  const std::string error = LoadError();
  EXPECT_TRUE(Contains(error, "node 'my_noise' (RandomUniformLike)") && Contains(error, "not supported")) << error;
}

TEST_F(OnnxImportTest, ACycleIsRefusedByTheChecker) {
  OnnxModelBuilder b;
  b.Input("x", {2});
  b.Output("y", {2});
  b.Node("Add", {"x", "z"}, {"y"});
  b.Node("Relu", {"y"}, {"z"});
  b.Write(dir_);
  const std::string error = LoadError();
  EXPECT_TRUE(Contains(error, "model.onnx") && Contains(error, "not a valid ONNX model")) << error;
}

TEST_F(OnnxImportTest, ATensorWhoseDataDisagreesWithItsShapeIsRefused) {
  OnnxModelBuilder b = MakeMlp();
  auto* w1 = b.proto().mutable_graph()->mutable_initializer(0);
  w1->clear_float_data();
  w1->set_raw_data(std::string(44, '\0'));  // 11 floats for a [3, 4] tensor
  b.Write(dir_);
  const std::string error = LoadError();
  EXPECT_TRUE(Contains(error, "W1") && Contains(error, "44 bytes")) << error;
}

TEST_F(OnnxImportTest, AHugeShapeIsRefusedBeforeAnythingIsAllocated) {
  OnnxModelBuilder b = MakeMlp();
  auto* w1 = b.proto().mutable_graph()->mutable_initializer(0);
  w1->clear_dims();
  w1->add_dims(int64_t{1} << 62);
  b.Write(dir_);
  const std::string error = LoadError();
  EXPECT_TRUE(Contains(error, "model.onnx")) << error;
  EXPECT_NE(error, "");
}

TEST_F(OnnxImportTest, AConstantRangeOfAHugeLengthIsNeitherFoldedNorRun) {
  // Range(0, 2^39, 1) of constants: folding it at load would ask for 4 TiB; it stays a node,
  // and a run asks for more than a run's budget, which is refused.
  OnnxModelBuilder b(11);
  b.Input("x", {1});
  b.Output("y", {-1});
  b.Int64Initializer("start", {}, {0});
  b.Int64Initializer("limit", {}, {int64_t{1} << 39});
  b.Int64Initializer("delta", {}, {1});
  b.Node("Range", {"start", "limit", "delta"}, {"r"});
  b.Node("Cast", {"r"}, {"rf"});
  OnnxModelBuilder::IntAttr(b.proto().mutable_graph()->mutable_node(1), "to", onnx::TensorProto::FLOAT);
  b.Node("Add", {"rf", "x"}, {"y"});
  b.Write(dir_);
  StatusOr<Model> model = ReadModelDir(dir_);
  ASSERT_TRUE(model.ok()) << model.status().message();
  auto session = Session::Create(std::move(*model));
  ASSERT_TRUE(session.ok()) << session.status().message();
  std::vector<NamedTensor> out;
  const Status run = (*session)->Run("serving_default", Feed(Tensor::FromVector<float>(Shape{1}, {1})), &out);
  EXPECT_EQ(run.code(), StatusCode::kResourceExhausted) << run.message();
}

TEST_F(OnnxImportTest, AFewBytesClaimingGigabytesAreRefusedBeforeAllocating) {
  OnnxModelBuilder b = MakeMlp();
  auto* w1 = b.proto().mutable_graph()->mutable_initializer(0);
  w1->clear_float_data();
  w1->clear_dims();
  w1->add_dims(int64_t{1} << 30);  // 4 GiB of float32, backed by 4 bytes
  w1->set_raw_data(std::string(4, '\0'));
  b.Write(dir_);
  const std::string error = LoadError();
  EXPECT_TRUE(Contains(error, "W1") && Contains(error, "holds 4 bytes")) << error;
}

// ONNX 1.12's shape inference divides by a convolution's strides unchecked (a SIGFPE no catch
// stops): the importer refuses such attributes first.
TEST_F(OnnxImportTest, AZeroStrideIsRefusedBeforeShapeInference) {
  OnnxModelBuilder b;
  b.Input("x", {1, 1, 4, 4});
  b.Output("y", {1, 1, 4, 4});
  b.Initializer("w", {1, 1, 1, 1}, {1.0f});
  OnnxModelBuilder::IntsAttr(b.Node("Conv", {"x", "w"}, {"y"}, "conv0"), "strides", {0, 1});
  b.Write(dir_);
  const std::string error = LoadError();
  EXPECT_TRUE(Contains(error, "node 'conv0' (Conv): attribute 'strides' holds 0")) << error;
}

TEST_F(OnnxImportTest, ExternalDataOutsideTheDirectoryIsRefused) {
  fs::create_directories(dir_ / "v");
  std::ofstream(dir_ / "secret.bin", std::ios::binary) << std::string(24, '\0');
  for (const std::string& location : std::vector<std::string>{"../secret.bin", (dir_ / "secret.bin").string(), "link.bin"}) {
    OnnxModelBuilder b = MakeMlp();
    for (auto& init : *b.proto().mutable_graph()->mutable_initializer()) {
      if (init.name() != "W2") continue;
      init.clear_float_data();
      init.set_data_location(onnx::TensorProto::EXTERNAL);
      auto* e = init.add_external_data();
      e->set_key("location");
      e->set_value(location);
    }
    b.Write(dir_ / "v");
    fs::remove(dir_ / "v/link.bin");
    fs::create_symlink(dir_ / "secret.bin", dir_ / "v/link.bin");
    StatusOr<Model> model = ReadModelDir(dir_ / "v");
    ASSERT_FALSE(model.ok()) << location;
    EXPECT_TRUE(Contains(model.status().message(), "model.onnx")) << model.status().message();
  }
}

TEST(OnnxTensorTest, FourBitValuesUnpackFromTheLowNibbleFirstSignExtendedForInt4) {
  onnx::TensorProto packed;
  packed.set_name("w");
  packed.add_dims(5);
  // -8, 7, -1, 0, 3 as nibbles 8, 7, 15, 0, 3; the sixth nibble pads the last byte.
  packed.set_raw_data(std::string{static_cast<char>(0x78), static_cast<char>(0x0f), static_cast<char>(0x03)});
  packed.set_data_type(kOnnxInt4);
  StatusOr<Tensor> signed_values = TensorFromOnnx(packed, nullptr);
  ASSERT_TRUE(signed_values.ok()) << signed_values.status().ToString();
  ASSERT_EQ(signed_values->dtype(), DType::kInt8);
  EXPECT_EQ(std::vector<int8_t>(signed_values->data<int8_t>().begin(), signed_values->data<int8_t>().end()),
            (std::vector<int8_t>{-8, 7, -1, 0, 3}));
  packed.set_data_type(kOnnxUInt4);
  StatusOr<Tensor> unsigned_values = TensorFromOnnx(packed, nullptr);
  ASSERT_TRUE(unsigned_values.ok()) << unsigned_values.status().ToString();
  EXPECT_EQ(std::vector<uint8_t>(unsigned_values->data<uint8_t>().begin(), unsigned_values->data<uint8_t>().end()),
            (std::vector<uint8_t>{8, 7, 15, 0, 3}));
  packed.add_dims(2);  // [5, 2]: ten values need five bytes, not three
  StatusOr<Tensor> short_data = TensorFromOnnx(packed, nullptr);
  ASSERT_FALSE(short_data.ok());
  EXPECT_NE(short_data.status().message().find("holds 3 bytes of 4-bit data, but shape [5,2] needs 5"), std::string::npos)
      << short_data.status().ToString();
}

TEST_F(OnnxImportTest, AQuantizeLinearToFourBitsIsRefusedNotSaturatedToEight) {
  OnnxModelBuilder b(21);
  b.proto().set_ir_version(10);
  b.Input("x", {4});
  b.Output("y", {4}, kOnnxInt4);
  b.Initializer("scale", {}, {0.5f});
  OnnxModelBuilder::IntAttr(b.Node("QuantizeLinear", {"x", "scale"}, {"y"}), "output_dtype", kOnnxInt4);
  b.Write(dir_);
  const std::string error = LoadError();
  EXPECT_TRUE(Contains(error, "value 'y' is of type INT4: 4-bit weights are read, 4-bit values are not computed")) << error;
}

TEST_F(OnnxImportTest, AnOpsetOrIrVersionNewerThanOnnx118sIsRefused) {
  OnnxModelBuilder b(24);
  b.Input("x", {2});
  b.Output("y", {2});
  b.Node("Relu", {"x"}, {"y"});
  b.Write(dir_);
  std::string error = LoadError();
  EXPECT_TRUE(Contains(error, "opset 24; Lockstep reads opsets 1 to 23")) << error;
  OnnxModelBuilder newer_ir(23);
  newer_ir.proto().set_ir_version(12);
  newer_ir.Input("x", {2});
  newer_ir.Output("y", {2});
  newer_ir.Node("Relu", {"x"}, {"y"});
  newer_ir.Write(dir_);
  error = LoadError();
  EXPECT_TRUE(Contains(error, "ir_version 12 is newer than the newest Lockstep reads (11)")) << error;
}

TEST_F(OnnxImportTest, ReshapeWithPyTorchsZerosAndADynamicBatch) {
  // x [batch, 2, 3] -> Reshape(x, [0, -1]) -> [batch, 6]: 0 copies the batch dimension.
  OnnxModelBuilder b;
  b.Input("x", {-1, 2, 3});
  b.Output("y", {-1, 6});
  b.Int64Initializer("shape", {2}, {0, -1});
  b.Node("Reshape", {"x", "shape"}, {"y"});
  b.Write(dir_);
  auto model = ReadModelDir(dir_);
  ASSERT_TRUE(model.ok()) << model.status().message();
  auto session = Session::Create(std::move(*model));
  ASSERT_TRUE(session.ok()) << session.status().message();
  for (int64_t batch : {1, 3}) {
    std::vector<float> values(static_cast<size_t>(batch * 6));
    for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
    std::vector<NamedTensor> out;
    ASSERT_TRUE((*session)->Run("serving_default", Feed(Tensor::FromVector<float>(Shape{batch, 2, 3}, values)), &out).ok());
    EXPECT_EQ(out[0].tensor.shape(), (Shape{batch, 6}));
    EXPECT_EQ(out[0].tensor.data<float>()[values.size() - 1], static_cast<float>(values.size() - 1));
  }
}

// Self-attention as a transformer encoder exports it, with dynamic batch and sequence axes:
// projections over the sequence, scores by a batched product, softmax, and the heads split by
// a Reshape whose target is computed from the input's shape (Shape -> Gather -> Unsqueeze ->
// Concat). Any batch and sequence length answers, and a batch row is its batch-of-one answer.
TEST_F(OnnxImportTest, AttentionWithDynamicBatchAndSequence) {
  OnnxModelBuilder b;
  b.Input("x", {-1, -1, 4});
  b.proto().mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(1)->set_dim_param("sequence");
  b.Output("heads", {-1, 2, -1, 2});
  std::vector<float> wq(16), wk(16), wv(16);
  for (int i = 0; i < 16; ++i) {
    wq[i] = 0.1f * static_cast<float>(i % 5) - 0.2f;
    wk[i] = 0.05f * static_cast<float>(i % 7) - 0.1f;
    wv[i] = 0.2f * static_cast<float>(i % 3) - 0.15f;
  }
  b.Initializer("Wq", {4, 4}, wq);
  b.Initializer("Wk", {4, 4}, wk);
  b.Initializer("Wv", {4, 4}, wv);
  b.Initializer("scale", {}, {2.0f});
  b.Int64Initializer("zero", {1}, {0});
  b.Int64Initializer("one", {1}, {1});
  b.Int64Initializer("head_dims", {2}, {2, 2});
  b.Node("MatMul", {"x", "Wq"}, {"q"});
  b.Node("MatMul", {"x", "Wk"}, {"k"});
  b.Node("MatMul", {"x", "Wv"}, {"v"});
  OnnxModelBuilder::IntsAttr(b.Node("Transpose", {"k"}, {"kt"}), "perm", {0, 2, 1});
  b.Node("MatMul", {"q", "kt"}, {"scores"});
  b.Node("Div", {"scores", "scale"}, {"scaled"});
  OnnxModelBuilder::IntAttr(b.Node("Softmax", {"scaled"}, {"probs"}), "axis", -1);
  b.Node("MatMul", {"probs", "v"}, {"attended"});
  b.Node("Shape", {"x"}, {"dims"});
  b.Node("Gather", {"dims", "zero"}, {"batch"});
  b.Node("Gather", {"dims", "one"}, {"sequence"});
  OnnxModelBuilder::IntAttr(b.Node("Concat", {"batch", "sequence", "head_dims"}, {"split_shape"}), "axis", 0);
  b.Node("Reshape", {"attended", "split_shape"}, {"split"});
  OnnxModelBuilder::IntsAttr(b.Node("Transpose", {"split"}, {"heads"}), "perm", {0, 2, 1, 3});
  b.Write(dir_);
  auto model = ReadModelDir(dir_);
  ASSERT_TRUE(model.ok()) << model.status().message();
  auto session = Session::Create(std::move(*model));
  ASSERT_TRUE(session.ok()) << session.status().message();

  // The float64 answer for one sequence [s, 4], as [2 heads, s, 2].
  auto reference = [&](const float* x, int64_t s) {
    auto project = [&](const std::vector<float>& w) {
      std::vector<double> p(static_cast<size_t>(s * 4));
      for (int64_t i = 0; i < s; ++i)
        for (int j = 0; j < 4; ++j)
          for (int t = 0; t < 4; ++t) p[i * 4 + j] += static_cast<double>(x[i * 4 + t]) * w[t * 4 + j];
      return p;
    };
    const auto q = project(wq), k = project(wk), v = project(wv);
    std::vector<double> out(static_cast<size_t>(s * 4));
    for (int64_t i = 0; i < s; ++i) {
      std::vector<double> e(static_cast<size_t>(s));
      double m = -1e300, total = 0;
      for (int64_t j = 0; j < s; ++j) {
        for (int t = 0; t < 4; ++t) e[j] += q[i * 4 + t] * k[j * 4 + t];
        e[j] /= 2;
        m = std::max(m, e[j]);
      }
      for (int64_t j = 0; j < s; ++j) total += (e[j] = std::exp(e[j] - m));
      for (int64_t j = 0; j < s; ++j)
        for (int t = 0; t < 4; ++t) out[(t / 2) * s * 2 + i * 2 + t % 2] += e[j] / total * v[j * 4 + t];
    }
    return out;
  };
  for (auto [batch, seq] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {2, 3}, {3, 5}}) {
    const Tensor x = PatternTensor(Shape{batch, seq, 4});
    std::vector<NamedTensor> out;
    ASSERT_TRUE((*session)->Run("serving_default", Feed(x), &out).ok());
    ASSERT_EQ(out[0].tensor.shape(), (Shape{batch, 2, seq, 2}));
    for (int64_t r = 0; r < batch; ++r) {
      const std::vector<double> want = reference(x.data<float>().data() + r * seq * 4, seq);
      for (size_t e = 0; e < want.size(); ++e) {
        EXPECT_NEAR(out[0].tensor.data<float>()[r * seq * 4 + e], want[e], 1e-5) << batch << "x" << seq;
      }
      std::vector<NamedTensor> one;
      ASSERT_TRUE((*session)->Run("serving_default", Feed(x.Rows(r, 1).Clone()), &one).ok());
      EXPECT_EQ(std::memcmp(one[0].tensor.data<float>().data(), out[0].tensor.data<float>().data() + r * seq * 4,
                            static_cast<size_t>(seq * 4 * 4)), 0)
          << "row " << r << " of " << batch << "x" << seq;
    }
  }
}

}  // namespace
}  // namespace lockstep
