// Nodes whose translation needs a size that the model leaves to run time (Flatten's products,
// an equal Split, normalised or softmaxed dimensions from an axis on, SAME and ceil_mode
// padding, the image a padded average leaves out): each is imported with every dimension
// unknown and answers, on inputs of several shapes, what the same node answers when its input's
// shape is written into the model. A shape that does not fit at run time is an InvalidArgument
// naming the node and the shape.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>

#include "runtime/onnx/onnx_model.h"
#include "runtime/session.h"
#include "tests/runtime/onnx_test_util.h"

namespace lockstep {
namespace {

using testing_onnx::kRunTimeDim;
using testing_onnx::OnnxModelBuilder;
using testing_onnx::Pattern;

// Filter values in [-0.75, 0.75].
std::vector<float> Ramp(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(static_cast<int>(i % 7) - 3) / 4.0f;
  return v;
}

// Adds the node(s) under test, reading "x" and writing "y0".."y<outputs-1>".
using AddNodes = std::function<void(OnnxModelBuilder&)>;

// The outputs are of the input's rank (`output_rank` -1) or of `output_rank`, every dimension
// left to inference.
StatusOr<std::vector<NamedTensor>> RunNodes(int opset, const std::vector<int64_t>& input_dims, int outputs,
                                            const AddNodes& add, const Tensor& x, int output_rank = -1) {
  OnnxModelBuilder b(opset);
  b.Input("x", input_dims);
  const size_t rank = output_rank < 0 ? input_dims.size() : static_cast<size_t>(output_rank);
  for (int k = 0; k < outputs; ++k) b.Output("y" + std::to_string(k), std::vector<int64_t>(rank, kRunTimeDim));
  add(b);
  LS_ASSIGN_OR_RETURN(Model model, ImportOnnxModel(b.proto(), std::filesystem::temp_directory_path()));
  LS_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Create(std::move(model)));
  std::vector<NamedTensor> out;
  const std::vector<NamedTensor> feed{{"x", x}};
  LS_RETURN_IF_ERROR(session->Run("serving_default", feed, &out));
  return out;
}

// The node imported with an input of rank `rank`, every dimension unknown, answers on each of
// `shapes` as it does imported with that shape written into the model.
void ExpectSameAsKnownShapes(int opset, int rank, int outputs, const AddNodes& add, const std::vector<Shape>& shapes,
                             int output_rank = -1) {
  for (size_t s = 0; s < shapes.size(); ++s) {
    const Tensor x = Pattern(shapes[s], static_cast<int>(s));
    StatusOr<std::vector<NamedTensor>> dynamic = RunNodes(opset, std::vector<int64_t>(static_cast<size_t>(rank), kRunTimeDim),
                                                     outputs, add, x, output_rank);
    ASSERT_TRUE(dynamic.ok()) << dynamic.status().ToString();
    const std::vector<int64_t> known(shapes[s].dims().begin(), shapes[s].dims().end());
    StatusOr<std::vector<NamedTensor>> fixed = RunNodes(opset, known, outputs, add, x, output_rank);
    ASSERT_TRUE(fixed.ok()) << fixed.status().ToString();
    ASSERT_EQ(dynamic->size(), fixed->size());
    for (size_t k = 0; k < fixed->size(); ++k) {
      const Tensor& got = (*dynamic)[k].tensor;
      const Tensor& want = (*fixed)[k].tensor;
      ASSERT_EQ(got.shape(), want.shape()) << "output " << k << " for input " << shapes[s].ToString();
      ASSERT_GT(want.num_elements(), 0);
      for (int64_t i = 0; i < want.num_elements(); ++i) {
        ASSERT_NEAR(got.data<float>()[i], want.data<float>()[i], 1e-6) << "output " << k << " at " << i;
      }
    }
  }
}

TEST(OnnxRunTimeShapesTest, FlattenMultipliesDimensionsOnBothSidesOfTheAxisAtRunTime) {
  const AddNodes add = [](OnnxModelBuilder& b) {
    OnnxModelBuilder::IntAttr(b.Node("Flatten", {"x"}, {"y0"}), "axis", 2);
  };
  ExpectSameAsKnownShapes(13, 4, 1, add, {Shape{2, 3, 4, 5}, Shape{1, 1, 6, 2}}, 2);
  StatusOr<std::vector<NamedTensor>> out = RunNodes(13, {kRunTimeDim, kRunTimeDim, kRunTimeDim, kRunTimeDim}, 1, add,
                                                    Pattern(Shape{2, 3, 4, 5}, 0), 2);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].tensor.shape(), (Shape{6, 20}));
}

TEST(OnnxRunTimeShapesTest, AnEqualSplitOfAnUnknownDimensionIsSizedPerRunAndAnUnevenOneIsRefusedByName) {
  const AddNodes add = [](OnnxModelBuilder& b) {
    OnnxModelBuilder::IntAttr(b.Node("Split", {"x"}, {"y0", "y1", "y2"}, "thirds"), "axis", 1);
  };
  ExpectSameAsKnownShapes(13, 2, 3, add, {Shape{2, 6}, Shape{3, 9}});
  StatusOr<std::vector<NamedTensor>> uneven = RunNodes(13, {kRunTimeDim, kRunTimeDim}, 3, add, Pattern(Shape{2, 7}, 0));
  ASSERT_FALSE(uneven.ok());
  EXPECT_EQ(uneven.status().code(), StatusCode::kInvalidArgument) << uneven.status().ToString();
  EXPECT_NE(uneven.status().message().find("thirds"), std::string::npos) << uneven.status().ToString();
  EXPECT_NE(uneven.status().message().find("[2,7]"), std::string::npos) << uneven.status().ToString();
}

TEST(OnnxRunTimeShapesTest, LayerNormalizationAndOldSoftmaxOverSeveralUnknownAxes) {
  ExpectSameAsKnownShapes(
      17, 3, 1,
      [](OnnxModelBuilder& b) {
        b.Initializer("scale", {}, {1.5f});
        b.Initializer("bias", {}, {-0.25f});
        OnnxModelBuilder::IntAttr(b.Node("LayerNormalization", {"x", "scale", "bias"}, {"y0"}), "axis", 1);
      },
      {Shape{2, 3, 4}, Shape{3, 2, 5}});
  ExpectSameAsKnownShapes(
      11, 3, 1, [](OnnxModelBuilder& b) { OnnxModelBuilder::IntAttr(b.Node("Softmax", {"x"}, {"y0"}), "axis", 1); },
      {Shape{2, 3, 4}, Shape{1, 5, 2}});
}

AddNodes PoolNode(const std::string& op, std::vector<int64_t> kernel, std::vector<int64_t> strides, const std::string& auto_pad,
              int64_t ceil_mode, std::vector<int64_t> pads = {}) {
  return [=](OnnxModelBuilder& b) {
    onnx::NodeProto* n = b.Node(op, {"x"}, {"y0"}, "pool");
    OnnxModelBuilder::IntsAttr(n, "kernel_shape", kernel);
    OnnxModelBuilder::IntsAttr(n, "strides", strides);
    if (!auto_pad.empty()) OnnxModelBuilder::StringAttr(n, "auto_pad", auto_pad);
    if (!pads.empty()) OnnxModelBuilder::IntsAttr(n, "pads", pads);
    if (ceil_mode != 0) OnnxModelBuilder::IntAttr(n, "ceil_mode", ceil_mode);
  };
}

TEST(OnnxRunTimeShapesTest, PoolsPadForSameAndCeilModeFromTheImageOfEachRun) {
  const std::vector<Shape> images{Shape{1, 2, 7, 7}, Shape{2, 3, 8, 5}, Shape{1, 1, 4, 6}};
  ExpectSameAsKnownShapes(13, 4, 1, PoolNode("MaxPool", {3, 3}, {2, 2}, "", 1), images);
  ExpectSameAsKnownShapes(13, 4, 1, PoolNode("MaxPool", {3, 2}, {2, 2}, "SAME_LOWER", 0), images);
  ExpectSameAsKnownShapes(13, 4, 1, PoolNode("AveragePool", {3, 3}, {2, 2}, "SAME_LOWER", 0), images);
  ExpectSameAsKnownShapes(13, 4, 1, PoolNode("AveragePool", {3, 3}, {2, 2}, "", 1, {1, 0, 0, 1}), images);
  ExpectSameAsKnownShapes(13, 4, 1, PoolNode("AveragePool", {2, 3}, {1, 2}, "SAME_UPPER", 1), images);
  // The image a padded average leaves out of its count, from the run's shape.
  ExpectSameAsKnownShapes(13, 4, 1, PoolNode("AveragePool", {3, 3}, {1, 1}, "", 0, {1, 1, 1, 1}), images);
  // 1-D, as a 2-D pool of height 1.
  ExpectSameAsKnownShapes(13, 3, 1, PoolNode("MaxPool", {3}, {2}, "", 1), {Shape{1, 2, 8}, Shape{2, 1, 5}});
}

TEST(OnnxRunTimeShapesTest, ConvolutionsPadSameLowerFromTheImageOfEachRun) {
  const std::vector<float> filter = Ramp(4 * 2 * 3 * 3);
  const AddNodes add = [&](OnnxModelBuilder& b) {
    b.Initializer("w", {4, 2, 3, 3}, filter);
    onnx::NodeProto* n = b.Node("Conv", {"x", "w"}, {"y0"});
    OnnxModelBuilder::IntsAttr(n, "strides", {2, 2});
    OnnxModelBuilder::StringAttr(n, "auto_pad", "SAME_LOWER");
  };
  // The channels are the filter's, known; the batch and the image are not.
  for (const Shape& image : {Shape{1, 2, 7, 7}, Shape{2, 2, 6, 9}}) {
    const Tensor x = Pattern(image, 3);
    StatusOr<std::vector<NamedTensor>> dynamic = RunNodes(13, {kRunTimeDim, 2, kRunTimeDim, kRunTimeDim}, 1, add, x);
    ASSERT_TRUE(dynamic.ok()) << dynamic.status().ToString();
    StatusOr<std::vector<NamedTensor>> fixed =
        RunNodes(13, std::vector<int64_t>(image.dims().begin(), image.dims().end()), 1, add, x);
    ASSERT_TRUE(fixed.ok()) << fixed.status().ToString();
    const Tensor& got = (*dynamic)[0].tensor;
    const Tensor& want = (*fixed)[0].tensor;
    ASSERT_EQ(got.shape(), want.shape());
    for (int64_t i = 0; i < want.num_elements(); ++i) ASSERT_NEAR(got.data<float>()[i], want.data<float>()[i], 1e-5) << i;
  }
}

TEST(OnnxRunTimeShapesTest, ThreeDimensionalPoolsAndConvolutionsOfAnImageKnownAtRunTime) {
  const std::vector<Shape> volumes{Shape{1, 2, 5, 6, 7}, Shape{2, 2, 4, 4, 5}};
  ExpectSameAsKnownShapes(13, 5, 1, PoolNode("MaxPool", {2, 3, 2}, {2, 1, 2}, "", 1), volumes);
  ExpectSameAsKnownShapes(13, 5, 1, PoolNode("AveragePool", {3, 2, 2}, {1, 2, 2}, "SAME_LOWER", 0), volumes);
  ExpectSameAsKnownShapes(13, 5, 1, PoolNode("AveragePool", {2, 2, 3}, {1, 1, 2}, "", 0, {1, 0, 1, 0, 1, 1}), volumes);
  const std::vector<float> filter = Ramp(3 * 2 * 2 * 3 * 2);
  for (const std::string auto_pad : {"NOTSET", "SAME_LOWER"}) {
    ExpectSameAsKnownShapes(13, 5, 1,
                            [&](OnnxModelBuilder& b) {
                              b.Initializer("w", {3, 2, 2, 3, 2}, filter);
                              onnx::NodeProto* n = b.Node("Conv", {"x", "w"}, {"y0"});
                              OnnxModelBuilder::IntsAttr(n, "strides", {2, 1, 2});
                              OnnxModelBuilder::StringAttr(n, "auto_pad", auto_pad);
                            },
                            volumes);
  }
}

TEST(OnnxRunTimeShapesTest, TransposedSamePaddingAndMaxUnpoolOfAnImageKnownAtRunTime) {
  const std::vector<float> filter = Ramp(2 * 3 * 3 * 3);
  ExpectSameAsKnownShapes(13, 4, 1,
                          [&](OnnxModelBuilder& b) {
                            b.Initializer("w", {2, 3, 3, 3}, filter);
                            onnx::NodeProto* n = b.Node("ConvTranspose", {"x", "w"}, {"y0"});
                            OnnxModelBuilder::IntsAttr(n, "strides", {2, 2});
                            OnnxModelBuilder::StringAttr(n, "auto_pad", "SAME_UPPER");
                          },
                          {Shape{1, 2, 3, 4}, Shape{2, 2, 5, 2}});
  ExpectSameAsKnownShapes(13, 4, 1,
                          [](OnnxModelBuilder& b) {
                            onnx::NodeProto* pool = b.Node("MaxPool", {"x"}, {"pooled", "indices"});
                            OnnxModelBuilder::IntsAttr(pool, "kernel_shape", {2, 2});
                            OnnxModelBuilder::IntsAttr(pool, "strides", {2, 2});
                            onnx::NodeProto* unpool = b.Node("MaxUnpool", {"pooled", "indices"}, {"y0"});
                            OnnxModelBuilder::IntsAttr(unpool, "kernel_shape", {2, 2});
                            OnnxModelBuilder::IntsAttr(unpool, "strides", {2, 2});
                          },
                          {Shape{1, 2, 4, 6}, Shape{2, 1, 6, 2}});
}

TEST(OnnxRunTimeShapesTest, AThreeDimensionalFilterDeeperThanTheRunsImageIsRefusedNotAnsweredEmpty) {
  const std::vector<float> filter = Ramp(1 * 1 * 3 * 2 * 2);
  StatusOr<std::vector<NamedTensor>> out = RunNodes(
      13, {kRunTimeDim, 1, kRunTimeDim, kRunTimeDim, kRunTimeDim}, 1,
      [&](OnnxModelBuilder& b) {
        b.Initializer("w", {1, 1, 3, 2, 2}, filter);
        b.Node("Conv", {"x", "w"}, {"y0"}, "conv3d");
      },
      Pattern(Shape{1, 1, 2, 4, 4}, 0));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument) << out.status().ToString();
  EXPECT_NE(out.status().message().find("conv3d"), std::string::npos) << out.status().ToString();
  EXPECT_NE(out.status().message().find("[1,1,2,4,4]"), std::string::npos) << out.status().ToString();
}

TEST(OnnxRunTimeShapesTest, AWindowLargerThanTheRunsPaddedImageIsRefusedNamingTheNodeAndTheShape) {
  StatusOr<std::vector<NamedTensor>> out = RunNodes(13, {kRunTimeDim, kRunTimeDim, kRunTimeDim, kRunTimeDim}, 1,
                                               PoolNode("MaxPool", {5, 5}, {2, 2}, "", 1), Pattern(Shape{1, 1, 3, 3}, 0));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument) << out.status().ToString();
  EXPECT_NE(out.status().message().find("pool"), std::string::npos) << out.status().ToString();
  EXPECT_NE(out.status().message().find("[1,1,3,3]"), std::string::npos) << out.status().ToString();
}

}  // namespace
}  // namespace lockstep
