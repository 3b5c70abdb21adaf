// A stateful ONNX model served by the real binary as speech pipelines call it: Silero VAD v5
// (tests/real_models/silero_vad/prepare) as PyTorch 2.9 exports it (opset 18, IR 10) and as
// Silero ships it for 8 and 16 kHz (Ifs on dimensions and on the sample rate, so that its graph
// is made per input: runtime/onnx/onnx_per_input.h), whose state [2, 1, 128] is an input
// and an output that the client feeds back, and whose sample rate `sr` is a scalar. Over TF
// Serving's REST predict, TF Serving's gRPC Predict and the Open Inference Protocol's binary
// extension, the first chunks of the minute of audio each answer onnxruntime-node's
// probability.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>

#include "tests/common/run_command.h"
#include "tests/e2e/grpc_test_util.h"
#include "tests/e2e/rest_test_util.h"

namespace lockstep::e2e {
namespace {

constexpr size_t kChunks = 40;

struct SileroCase {
  fs::path model;  // a version directory's model.onnx
  std::vector<float> audio;
  int64_t window = 0, context = 0;
  std::vector<double> probabilities;
};

// `name`: the prepared model's directory ("model" is the opset-18 export).
SileroCase ReadCase(const std::string& name) {
  SileroCase c;
  const test::CommandResult made =
      test::RunCommand(std::string(LOCKSTEP_SOURCE_DIR) + "/tests/real_models/silero_vad/prepare");
  EXPECT_EQ(made.exit_code, 0) << made.output;
  if (made.exit_code != 0) return c;
  const fs::path dir = test::LastLine(made.output);
  c.model = dir / name / "model.onnx";
  std::ifstream in(dir / "audio.f32", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  c.audio.resize(bytes.size() / sizeof(float));
  std::memcpy(c.audio.data(), bytes.data(), c.audio.size() * sizeof(float));
  const json reference = json::parse(std::ifstream(name == "model" ? dir / "reference.json" : dir / name / "reference.json"));
  c.window = reference.at("window");
  c.context = reference.at("context");
  c.probabilities = reference.at("probabilities").get<std::vector<double>>();
  return c;
}

// One protocol's way of running a chunk: (input [1, context + window], state [2 * 128]) ->
// (probability, next state).
using RunChunk = std::function<void(const std::vector<float>& input, const std::vector<float>& state, double* probability,
                                    std::vector<float>* next)>;

// Runs the first kChunks chunks as a caller does (the context, the state fed back) and checks
// each probability against onnxruntime's.
void ExpectChunksAgree(const SileroCase& c, const std::string& protocol, const RunChunk& run) {
  std::vector<float> input(static_cast<size_t>(c.context + c.window), 0.0f), state(2 * 128, 0.0f);
  for (size_t chunk = 0; chunk < kChunks && !::testing::Test::HasFatalFailure(); ++chunk) {
    std::memmove(input.data(), input.data() + c.window, static_cast<size_t>(c.context) * sizeof(float));
    std::memcpy(input.data() + c.context, c.audio.data() + chunk * static_cast<size_t>(c.window),
                static_cast<size_t>(c.window) * sizeof(float));
    double probability = -1;
    std::vector<float> next;
    run(input, state, &probability, &next);
    ASSERT_EQ(next.size(), state.size()) << protocol << " chunk " << chunk;
    const double want = c.probabilities[chunk];
    ASSERT_LE(std::abs(probability - want), 1e-4 * std::abs(want) + 1e-6)
        << protocol << " chunk " << chunk << ": " << probability << ", onnxruntime " << want;
    state = next;
  }
}

class StatefulModelTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    case_ = ReadCase(GetParam());
    ASSERT_FALSE(case_.model.empty());
    ASSERT_GE(case_.probabilities.size(), kChunks);
    const fs::path base = dir_.path() / "models" / "vad";
    fs::create_directories(base / "1");
    fs::copy_file(case_.model, base / "1" / "model.onnx");
    server_ = std::make_unique<ServerProcess>(dir_.path(),
                                              std::vector<std::string>{"--model_name=vad", "--model_base_path=" + base.string()});
  }

  SileroCase case_;
  ScratchDir dir_;
  std::unique_ptr<ServerProcess> server_;
};

TEST_P(StatefulModelTest, TfServingRestPredictWithAScalarSampleRate) {
  ExpectChunksAgree(case_, "REST predict", [&](const std::vector<float>& input, const std::vector<float>& state,
                                               double* probability, std::vector<float>* next) {
    json planes = json::array();
    for (int p = 0; p < 2; ++p) planes.push_back({std::vector<float>(state.begin() + p * 128, state.begin() + (p + 1) * 128)});
    const json body{{"inputs", {{"input", {input}}, {"state", planes}, {"sr", 16000}}}};
    const HttpResult r = HttpClient(server_->rest_port()).Post("/v1/models/vad:predict", body.dump());
    ASSERT_EQ(r.status, 200) << r.body.substr(0, 1000) << server_->Log();
    const json outputs = ParseBody(r)["outputs"];
    *probability = outputs["output"][0][0].get<double>();
    for (const json& plane : outputs["stateN"]) {
      for (const json& v : plane[0]) next->push_back(v.get<float>());
    }
  });
}

TEST_P(StatefulModelTest, TfServingGrpcPredictWithAScalarSampleRate) {
  auto stub = tfs::PredictionService::NewStub(MakeChannel(server_->grpc_target()));
  ExpectChunksAgree(case_, "gRPC Predict", [&](const std::vector<float>& input, const std::vector<float>& state,
                                               double* probability, std::vector<float>* next) {
    tfs::PredictRequest request;
    request.mutable_model_spec()->set_name("vad");
    auto tensor = [&](const char* name, std::vector<int64_t> dims, const std::vector<float>& values) {
      tensorflow::TensorProto& t = (*request.mutable_inputs())[name];
      t.set_dtype(tensorflow::DT_FLOAT);
      for (int64_t d : dims) t.mutable_tensor_shape()->add_dim()->set_size(d);
      t.set_tensor_content(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
    };
    tensor("input", {1, case_.context + case_.window}, input);
    tensor("state", {2, 1, 128}, state);
    tensorflow::TensorProto& sr = (*request.mutable_inputs())["sr"];
    sr.set_dtype(tensorflow::DT_INT64);
    sr.mutable_tensor_shape();  // a scalar: a shape with no dimensions
    sr.add_int64_val(16000);
    tfs::PredictResponse response;
    grpc::ClientContext context;
    const grpc::Status status = stub->Predict(&context, request, &response);
    ASSERT_TRUE(status.ok()) << Describe(status) << server_->Log();
    const std::vector<float> p = FloatsOf(response.outputs().at("output"));
    ASSERT_EQ(p.size(), 1u);
    *probability = p[0];
    *next = FloatsOf(response.outputs().at("stateN"));
  });
}

TEST_P(StatefulModelTest, OpenInferenceProtocolBinaryWithAScalarSampleRate) {
  ExpectChunksAgree(case_, "v2 infer (binary)", [&](const std::vector<float>& input, const std::vector<float>& state,
                                                    double* probability, std::vector<float>* next) {
    const int64_t sr = 16000;
    const json header{
        {"inputs",
         {{{"name", "input"}, {"datatype", "FP32"}, {"shape", {1, case_.context + case_.window}},
           {"parameters", {{"binary_data_size", input.size() * sizeof(float)}}}},
          {{"name", "state"}, {"datatype", "FP32"}, {"shape", {2, 1, 128}},
           {"parameters", {{"binary_data_size", state.size() * sizeof(float)}}}},
          {{"name", "sr"}, {"datatype", "INT64"}, {"shape", json::array()}, {"parameters", {{"binary_data_size", sizeof(sr)}}}}}},
        {"parameters", {{"binary_data_output", true}}}};
    const std::string text = header.dump();
    std::string body = text;
    body.append(reinterpret_cast<const char*>(input.data()), input.size() * sizeof(float));
    body.append(reinterpret_cast<const char*>(state.data()), state.size() * sizeof(float));
    body.append(reinterpret_cast<const char*>(&sr), sizeof(sr));
    const HttpResult r = HttpClient(server_->rest_port())
                             .Request("POST", "/v2/models/vad/infer", body,
                                      {{"Inference-Header-Content-Length", std::to_string(text.size())},
                                       {"Content-Type", "application/octet-stream"}});
    ASSERT_EQ(r.status, 200) << r.body.substr(0, 1000) << server_->Log();
    const size_t json_length = std::stoul(r.headers.at("inference-header-content-length"));
    const json answer = json::parse(r.body.substr(0, json_length));
    size_t offset = json_length;
    for (const json& out : answer["outputs"]) {
      const size_t size = out["parameters"]["binary_data_size"].get<size_t>();
      ASSERT_LE(offset + size, r.body.size());
      std::vector<float> values(size / sizeof(float));
      std::memcpy(values.data(), r.body.data() + offset, size);
      offset += size;
      if (out["name"] == "output") {
        ASSERT_EQ(values.size(), 1u);
        *probability = values[0];
      } else if (out["name"] == "stateN") {
        *next = values;
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Silero, StatefulModelTest, ::testing::Values("model", "v5_8k_16k"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace lockstep::e2e
