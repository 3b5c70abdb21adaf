// Models exported from PyTorch with torch.onnx.export (tests/data/onnx/pytorch/, made by
// bench/onnx/export_models.py): an MLP, a CNN with batch normalisation, depthwise and residual
// blocks, a GELU residual block with LayerNorm, a 2-layer transformer encoder with dynamic
// batch and sequence length, and MobileNetV3's and EfficientNet's pieces (SiLU, HardSwish,
// squeeze-and-excitation). Each answers as PyTorch did, on every batch size and sequence
// length of its data sets; and keeps the runtime's promises on them: a batched row is its
// batch-1 answer bit for bit, whatever the thread count.
#include <gtest/gtest.h>

#include <map>

#include "runtime/onnx/onnx_model.h"
#include "runtime/passes/passes.h"
#include "runtime/thread_pool.h"
#include "tests/runtime/onnx_case_runner.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
using testing_onnx::ReadInputs;
using testing_onnx::RunDataSet;
using testing_onnx::TestDataSets;

const fs::path kModels = fs::path(LOCKSTEP_SOURCE_DIR) / "tests/data/onnx/pytorch";
const char* kNames[] = {"mlp", "cnn", "residual_gelu", "transformer", "mobile_block"};

std::unique_ptr<Session> Load(const std::string& name, ThreadPool* pool) {
  StatusOr<Model> model = ReadOnnxModel(kModels / name);
  EXPECT_TRUE(model.ok()) << name << ": " << model.status().ToString();
  if (!model.ok()) return nullptr;
  SessionOptions options;
  options.pool = pool;
  StatusOr<std::unique_ptr<Session>> session = Session::Create(std::move(*model), options);
  EXPECT_TRUE(session.ok()) << name << ": " << session.status().ToString();
  return session.ok() ? std::move(*session) : nullptr;
}

TEST(OnnxPyTorchTest, EveryModelAnswersAsPyTorchDid) {
  for (const char* name : kNames) {
    std::unique_ptr<Session> session = Load(name, &ThreadPool::Default());
    ASSERT_NE(session, nullptr);
    const std::vector<fs::path> sets = TestDataSets(kModels / name);
    ASSERT_GE(sets.size(), 3u) << name;
    for (const fs::path& set : sets) {
      std::string diff;
      const Status read = RunDataSet(*session, set, &diff);
      ASSERT_TRUE(read.ok()) << read.ToString();
      EXPECT_EQ(diff, "") << name << "/" << set.filename().string();
    }
  }
}

// The exported CNN, once optimised, keeps one Transpose into NHWC at its input and one back
// before its NCHW head (GlobalAveragePool): those between its convolutions cancel.
TEST(OnnxPyTorchTest, TheCnnsLayoutChangesCancelBetweenConvolutions) {
  StatusOr<Model> model = ReadOnnxModel(kModels / "cnn");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto transposes = [](const Model& m) {
    int n = 0;
    for (const NodeDef& node : m.graph.nodes) n += node.op == "Transpose";
    return n;
  };
  const int before = transposes(*model);
  ASSERT_TRUE(OptimizeGraph(*model, ThreadPool::Default()).ok());
  EXPECT_GT(before, 8);
  std::string where;
  for (const NodeDef& node : model->graph.nodes) {
    for (const std::string& in : node.inputs) {
      const NodeDef* producer = model->graph.FindNode(in);
      if (node.op == "Transpose" || (producer != nullptr && producer->op == "Transpose")) {
        where += " " + (producer ? producer->op : in) + "->" + node.op + "(" + node.name + ")";
      }
    }
  }
  EXPECT_LE(transposes(*model), 2) << "of " << before << ":" << where;
}

// MobileNetV3's and EfficientNet's blocks, once optimised: every SiLU (PyTorch's x * sigmoid(x))
// and HardSwish after a convolution, depthwise or not, is in its epilogue; the squeeze-and-excitation's pooling and
// channel scale run in NHWC, so that no Transpose is left between the stem and the pooling head
// (the head's own pooling runs in NHWC too, and the Transpose of its [N, 1, 1, C] is a Reshape:
// one Transpose is left, at the input).
TEST(OnnxPyTorchTest, MobileBlocksActivationsFuseAndTheirLayoutChangesCancel) {
  StatusOr<Model> model = ReadOnnxModel(kModels / "mobile_block");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ASSERT_TRUE(OptimizeGraph(*model, ThreadPool::Default()).ok());
  std::map<std::string, int> ops, activations;
  for (const NodeDef& node : model->graph.nodes) {
    ++ops[node.op];
    if (node.op == "FusedConv2D") ++activations[std::get<std::string>(node.attrs.values().at("activation"))];
  }
  EXPECT_EQ(ops["Transpose"], 1);
  EXPECT_EQ(ops["Mul"], 1);                // the channel scale
  EXPECT_EQ(activations["sigmoid"], 1);    // the excitation's gate
  EXPECT_EQ(activations["silu"], 2);       // the expansion and the squeeze
  EXPECT_EQ(activations["hard_swish"], 2);  // the stem and the head
  // The depthwise convolution's bias (its BatchNorm) and SiLU are in its own epilogue.
  EXPECT_EQ(ops["Silu"] + ops["BiasAdd"] + ops["DepthwiseConv2D"], 0);
  ASSERT_EQ(ops["FusedDepthwiseConv2D"], 1);
  for (const NodeDef& node : model->graph.nodes) {
    if (node.op == "FusedDepthwiseConv2D") {
      EXPECT_EQ(std::get<std::string>(node.attrs.values().at("activation")), "silu");
    }
  }
}

// The transformer's GELUs and LayerNorms, which PyTorch spells out in primitive ops, run as
// Gelu (in its matmul's epilogue) and LayerNormalize (with its scale and offset); every dense
// layer is one FusedMatMul.
TEST(OnnxPyTorchTest, TheTransformersGeluAndLayerNormRunAsOneOpEach) {
  StatusOr<Model> model = ReadOnnxModel(kModels / "transformer");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ASSERT_TRUE(OptimizeGraph(*model, ThreadPool::Default()).ok());
  std::map<std::string, int> ops;
  for (const NodeDef& node : model->graph.nodes) ++ops[node.op];
  EXPECT_EQ(ops["LayerNormalize"], 4);
  EXPECT_EQ(ops["Erf"] + ops["Sqrt"] + ops["Gelu"] + ops["MatMul"], 0);
  for (const NodeDef& node : model->graph.nodes) {
    if (node.op == "LayerNormalize") {
      EXPECT_EQ(node.inputs.size(), 3u) << node.name;  // its scale and offset fused
    }
  }
  int gelu = 0;
  for (const NodeDef& node : model->graph.nodes) {
    if (node.op == "FusedMatMul" && std::get<std::string>(node.attrs.values().at("activation")) == "gelu") ++gelu;
  }
  EXPECT_EQ(gelu, 2);
  EXPECT_EQ(ops["FusedMatMul"], 2 * 4 + 1);  // per layer: q/k/v, out, two feed-forward; the head
}

// Every row of every data set run alone (batch 1), on one thread and on three: the same bits as
// its row of the batched answer on one thread.
TEST(OnnxPyTorchTest, ABatchedRowIsItsBatchOneAnswerOnAnyThreadCount) {
  ThreadPool one(1), three(3);
  for (const char* name : kNames) {
    std::unique_ptr<Session> serial = Load(name, &one), parallel = Load(name, &three);
    ASSERT_NE(serial, nullptr);
    ASSERT_NE(parallel, nullptr);
    const std::string signature = serial->signatures()[0].name;
    for (const fs::path& set : TestDataSets(kModels / name)) {
      StatusOr<std::vector<NamedTensor>> inputs = ReadInputs(*serial, set);
      ASSERT_TRUE(inputs.ok()) << inputs.status().ToString();
      std::vector<NamedTensor> batched, row_answer;
      ASSERT_TRUE(serial->Run(signature, *inputs, &batched).ok());
      const int64_t rows = (*inputs)[0].tensor.shape().dim(0);
      for (int64_t r = 0; r < rows; ++r) {
        std::vector<NamedTensor> row{{(*inputs)[0].name, (*inputs)[0].tensor.Rows(r, 1)}};
        for (Session* session : {serial.get(), parallel.get()}) {
          ASSERT_TRUE(session->Run(signature, row, &row_answer).ok());
          for (size_t k = 0; k < batched.size(); ++k) {
            EXPECT_TRUE(row_answer[k].tensor.BitwiseEqual(batched[k].tensor.Rows(r, 1)))
                << name << "/" << set.filename().string() << " row " << r << " output " << batched[k].name
                << (session == serial.get() ? " (1 thread)" : " (3 threads)");
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace lockstep
