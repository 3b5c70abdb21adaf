// Detectors as torchvision exports them (opset 11), random weights made to score boxes
// differently (tests/real_models/detection/): SSDlite320 with MobileNetV3-Large (the anchors'
// decoding, per-class NonMaxSuppression, TopK and the gathers of computed indices after it), and
// Faster R-CNN with MobileNetV3-Large FPN at 320 (the region proposals, MultiScaleRoIAlign,
// whose levels' `squeeze`s are Ifs on data-dependent dimensions, so that its graph is made per
// input shape: runtime/onnx/onnx_per_input.h).
// Its boxes, scores and labels are onnxruntime-node's on the same image, matched as sets of
// rows: a row of ours is matched by an unused row of onnxruntime's with the same label, box and
// score (to rounding); a row left unmatched must score what an unmatched row of onnxruntime's
// scores (within 1e-6), a tie that either runtime may break its own way.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "tests/runtime/onnx_test_util.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;

struct Detections {
  std::vector<std::array<double, 4>> boxes;
  std::vector<double> scores;
  std::vector<int64_t> labels;
};

class OnnxDetectionTest : public ::testing::TestWithParam<std::string> {};

TEST_P(OnnxDetectionTest, DetectionsAreOnnxRuntimesAsSetsOfRows) {
  const std::string& name = GetParam();
  testing_onnx::PreparedOnnxCase prepared =
      testing_onnx::PrepareOnnxCase("tests/real_models/detection/prepare", name + "/model.onnx");
  ASSERT_TRUE(prepared.error.empty()) << prepared.error;
  const fs::path dir = prepared.dir / name;
  Tensor image(DType::kFloat32, Shape{3, 320, 320});
  std::ifstream(dir / "image.f32", std::ios::binary)
      .read(static_cast<char*>(image.mutable_raw_data()), static_cast<std::streamsize>(image.byte_size()));
  std::vector<NamedTensor> outputs;
  const std::vector<NamedTensor> feed{{"image", image}};
  const Status run = prepared.session->Run("serving_default", feed, &outputs);
  ASSERT_TRUE(run.ok()) << run.ToString();

  Detections ours;
  for (const NamedTensor& out : outputs) {
    if (out.name == "boxes") {
      ASSERT_EQ(out.tensor.shape().rank(), 2);
      for (int64_t r = 0; r < out.tensor.shape().dim(0); ++r) {
        const float* b = out.tensor.data<float>().data() + r * 4;
        ours.boxes.push_back({b[0], b[1], b[2], b[3]});
      }
    } else if (out.name == "scores") {
      for (float s : out.tensor.data<float>()) ours.scores.push_back(s);
    } else if (out.name == "labels") {
      for (int64_t l : out.tensor.data<int64_t>()) ours.labels.push_back(l);
    }
  }
  const nlohmann::json ref_json = nlohmann::json::parse(std::ifstream(dir / "reference.json"));
  Detections want;
  const std::vector<double> flat_boxes = ref_json.at("boxes").at("data");
  for (size_t r = 0; r + 3 < flat_boxes.size(); r += 4) {
    want.boxes.push_back({flat_boxes[r], flat_boxes[r + 1], flat_boxes[r + 2], flat_boxes[r + 3]});
  }
  want.scores = ref_json.at("scores").at("data").get<std::vector<double>>();
  want.labels = ref_json.at("labels").at("data").get<std::vector<int64_t>>();
  ASSERT_EQ(ours.scores.size(), want.scores.size());
  ASSERT_EQ(ours.boxes.size(), want.boxes.size());
  ASSERT_EQ(ours.labels.size(), want.labels.size());
  // Scores that differ and several classes: a comparison of one repeated row would prove little.
  EXPECT_GE(std::set<double>(want.scores.begin(), want.scores.end()).size(), 10u);
  EXPECT_GE(std::set<int64_t>(want.labels.begin(), want.labels.end()).size(), 2u);

  const size_t n = want.scores.size();
  std::vector<bool> used(n, false);
  std::vector<size_t> unmatched;
  for (size_t i = 0; i < n; ++i) {
    bool found = false;
    for (size_t j = 0; j < n && !found; ++j) {
      if (used[j] || want.labels[j] != ours.labels[i]) continue;
      if (std::abs(want.scores[j] - ours.scores[i]) > 1e-4 * want.scores[j] + 1e-6) continue;
      bool same_box = true;
      for (int c = 0; c < 4; ++c) {
        same_box = same_box && std::abs(want.boxes[j][c] - ours.boxes[i][c]) <= 1e-3 * std::max(1.0, std::abs(want.boxes[j][c]));
      }
      if (same_box) used[j] = found = true;
    }
    if (!found) unmatched.push_back(i);
  }
  std::vector<double> left;  // onnxruntime's unmatched scores
  for (size_t j = 0; j < n; ++j) {
    if (!used[j]) left.push_back(want.scores[j]);
  }
  for (size_t i : unmatched) {
    const bool tied = std::any_of(left.begin(), left.end(), [&](double s) { return std::abs(s - ours.scores[i]) <= 1e-6; });
    EXPECT_TRUE(tied) << "row " << i << " (label " << ours.labels[i] << ", score " << ours.scores[i]
                      << ") is neither onnxruntime's nor tied with a row onnxruntime kept instead";
  }
  const double matched = static_cast<double>(n - unmatched.size()) / static_cast<double>(n);
  RecordProperty("rows_matched", std::to_string(matched));
  std::printf("%s: %zu of %zu rows matched, the rest tied\n", name.c_str(), n - unmatched.size(), n);
}

INSTANTIATE_TEST_SUITE_P(Torchvision, OnnxDetectionTest,
                         ::testing::Values("ssdlite320", "fasterrcnn_mobilenet_v3_320_fpn"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace lockstep
