// The ops the real-model suite and ONNX's operator set brought: Trilu, EyeLike, Mod and FMod, the
// gathers and scatters by index tensors, Resize, dilated Conv2D, shape inference that reads
// constant inputs, and the errors of the losses, selections, Einsum and the recurrent layers.
// ONNX's backend suite checks their values case by case (onnx_conformance_test.cc); these
// check what it does not: the errors that keep a bad index or divisor from reading past a
// tensor or trapping, and the exact shapes inference now gives.
#include <gtest/gtest.h>

#include <vector>

#include "runtime/op_registry.h"
#include "runtime/ops/window.h"
#include "tests/runtime/op_test_util.h"

namespace lockstep {
namespace {

using op_test::ExpectNear;
using op_test::ToDouble;
using op_test::I64;
using op_test::RandomTensor;
using op_test::Run1;
using op_test::Values;

// An op that must fail at run time with `fragment` in its message.
void ExpectIndexOpError(std::string_view op, const std::vector<Tensor>& inputs, const AttrMap& attrs,
                        std::string_view fragment) {
  op_test::ExpectError(RunOp(op, inputs, attrs).status(), StatusCode::kInvalidArgument, fragment);
}

Tensor F32(const Shape& shape, std::vector<float> v) { return Tensor::FromVector<float>(shape, v); }
Tensor I32(const Shape& shape, std::vector<int32_t> v) { return Tensor::FromVector<int32_t>(shape, v); }

TEST(OpsIndexTest, TriluKeepsATriangleOfEveryMatrixWhateverK) {
  const Tensor x = F32(Shape{2, 2, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  EXPECT_EQ(Values<float>(Run1("Trilu", {x})), (std::vector<float>{1, 2, 3, 0, 5, 6, 7, 8, 9, 0, 11, 12}));
  EXPECT_EQ(Values<float>(Run1("Trilu", {x}, AttrMap{{"upper", false}})),
            (std::vector<float>{1, 0, 0, 4, 5, 0, 7, 0, 0, 10, 11, 0}));
  EXPECT_EQ(Values<float>(Run1("Trilu", {x, Tensor::Scalar<int64_t>(1)})),
            (std::vector<float>{0, 2, 3, 0, 0, 6, 0, 8, 9, 0, 0, 12}));
  // Offsets far past either corner keep all or nothing, without overflowing.
  EXPECT_EQ(Values<float>(Run1("Trilu", {x, Tensor::Scalar<int64_t>(INT64_MIN)})), Values<float>(x));
  EXPECT_EQ(Values<float>(Run1("Trilu", {x, Tensor::Scalar<int64_t>(INT64_MAX)})), std::vector<float>(12, 0.0f));
  ExpectIndexOpError("Trilu", {F32(Shape{3}, {1, 2, 3})}, {}, "rank 2 or more");
}

TEST(OpsIndexTest, EyeLikeOnAnyDiagonalAndDType) {
  const Tensor x = Tensor(DType::kFloat32, Shape{2, 3});
  EXPECT_EQ(Values<float>(Run1("EyeLike", {x})), (std::vector<float>{1, 0, 0, 0, 1, 0}));
  EXPECT_EQ(Values<int64_t>(Run1("EyeLike", {x}, AttrMap{{"k", int64_t{-1}}, {"dtype", DType::kInt64}})),
            (std::vector<int64_t>{0, 0, 0, 1, 0, 0}));
  EXPECT_EQ(Values<float>(Run1("EyeLike", {x}, AttrMap{{"k", int64_t{1} << 62}})), std::vector<float>(6, 0.0f));
}

TEST(OpsIndexTest, ModTakesTheDivisorsSignAndFModTheDividends) {
  const Tensor a = I32(Shape{4}, {7, -7, 7, INT32_MIN});
  const Tensor b = I32(Shape{4}, {3, 3, -3, -1});
  EXPECT_EQ(Values<int32_t>(Run1("Mod", {a, b})), (std::vector<int32_t>{1, 2, -2, 0}));
  EXPECT_EQ(Values<int32_t>(Run1("FMod", {a, b})), (std::vector<int32_t>{1, -1, 1, 0}));
  EXPECT_EQ(Values<float>(Run1("FMod", {F32(Shape{2}, {-5.5f, 5.5f}), F32(Shape{}, {2})})),
            (std::vector<float>{-1.5f, 1.5f}));
  EXPECT_EQ(Values<float>(Run1("Mod", {F32(Shape{2}, {-5.5f, 5.5f}), F32(Shape{}, {2})})),
            (std::vector<float>{0.5f, 1.5f}));
  ExpectIndexOpError("Mod", {a, I32(Shape{}, {0})}, {}, "division by zero");
  ExpectIndexOpError("FMod", {a, I32(Shape{}, {0})}, {}, "division by zero");
}

TEST(OpsIndexTest, GathersAndScattersRefuseAnIndexOutOfRange) {
  const Tensor data = F32(Shape{2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(Values<float>(Run1("GatherElements", {data, I64({-1, 0, 1}).Reshaped(Shape{1, 3})}, {{"axis", int64_t{0}}})),
            (std::vector<float>{4, 2, 6}));
  ExpectIndexOpError("GatherElements", {data, I64({2, 0, 1}).Reshaped(Shape{1, 3})}, {{"axis", int64_t{0}}}, "out of range");
  ExpectIndexOpError("ScatterElements", {data, I64({0, 3}).Reshaped(Shape{1, 2}), F32(Shape{1, 2}, {9, 9})},
              {{"axis", int64_t{1}}}, "out of range");
  EXPECT_EQ(Values<float>(Run1("ScatterElements", {data, I64({0, 0}).Reshaped(Shape{1, 2}), F32(Shape{1, 2}, {9, 7})},
                               {{"axis", int64_t{1}}, {"reduction", std::string("add")}})),
            (std::vector<float>{17, 2, 3, 4, 5, 6}));
  // GatherND and ScatterND: whole rows by one index each.
  EXPECT_EQ(Values<float>(Run1("GatherND", {data, I64({1, 0}).Reshaped(Shape{2, 1})})),
            (std::vector<float>{4, 5, 6, 1, 2, 3}));
  ExpectIndexOpError("GatherND", {data, I64({-3}).Reshaped(Shape{1, 1})}, {}, "out of range");
  EXPECT_EQ(Values<float>(Run1("ScatterND", {data, I64({1}).Reshaped(Shape{1, 1}), F32(Shape{1, 3}, {7, 8, 9})})),
            (std::vector<float>{1, 2, 3, 7, 8, 9}));
  ExpectIndexOpError("ScatterND", {data, I64({1}).Reshaped(Shape{1, 1}), F32(Shape{1, 2}, {7, 8})}, {}, "updates must have shape");
  ExpectIndexOpError("ScatterND", {data, I64({0}).Reshaped(Shape{1, 1}), F32(Shape{1, 3}, {7, 8, 9})},
              {{"reduction", std::string("average")}}, "reduction");
}

TEST(OpsIndexTest, ElementsOpsWalkIndicesSmallerThanTheirDataOnEveryAxis) {
  // data [2, 3, 4], indices [2, 2, 3] on axis 1: each index element's coordinates but the axis's
  // address the data directly, as a walk over the indices' shape must find them.
  const Tensor data = RandomTensor(Shape{2, 3, 4}, 5);
  const std::vector<int64_t> at = {0, 2, 1, 2, 2, 0, 1, 0, 0, 2, 1, 1};
  const Tensor indices = I64(at).Reshaped(Shape{2, 2, 3});
  const Tensor updates = RandomTensor(Shape{2, 2, 3}, 6);
  std::vector<float> gathered, scattered = Values<float>(data);
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t j = 0; j < 2; ++j) {
      for (int64_t k = 0; k < 3; ++k) {
        const int64_t e = (i * 2 + j) * 3 + k, d = (i * 3 + at[static_cast<size_t>(e)]) * 4 + k;
        gathered.push_back(data.data<float>()[static_cast<size_t>(d)]);
        scattered[static_cast<size_t>(d)] = updates.data<float>()[static_cast<size_t>(e)];
      }
    }
  }
  EXPECT_EQ(Values<float>(Run1("GatherElements", {data, indices}, {{"axis", int64_t{1}}})), gathered);
  EXPECT_EQ(Values<float>(Run1("ScatterElements", {data, indices, updates}, {{"axis", int64_t{1}}})), scattered);
}

TEST(OpsIndexTest, RoiAlignAveragesBilinearSamplesAndRefusesUnboundedSampling) {
  const Tensor image = F32(Shape{1, 1, 2, 2}, {0, 1, 2, 3});
  const Tensor first = I64({0});
  const AttrMap one_sample{{"output_height", int64_t{1}}, {"output_width", int64_t{1}}, {"sampling_ratio", int64_t{1}}};
  // half_pixel: the region [0, 2) is [-0.5, 1.5) in pixel centres, sampled at (0.5, 0.5).
  EXPECT_EQ(Values<float>(Run1("RoiAlign", {image, F32(Shape{1, 4}, {0, 0, 2, 2}), first}, one_sample)),
            (std::vector<float>{1.5f}));
  // An inverted region takes no samples (adaptive sampling): 0, as onnxruntime gives.
  EXPECT_EQ(Values<float>(Run1("RoiAlign", {image, F32(Shape{1, 4}, {6, 6, 0, 0}), first},
                               {{"output_height", int64_t{2}}, {"output_width", int64_t{2}}})),
            (std::vector<float>(4, 0.0f)));
  // An empty image reads nothing.
  EXPECT_EQ(Values<float>(Run1("RoiAlign", {Tensor(DType::kFloat32, Shape{1, 1, 0, 2}), F32(Shape{1, 4}, {0, 0, 1, 1}), first},
                               one_sample)),
            (std::vector<float>{0.0f}));
  // Adaptive sampling of an enormous region would run for ever.
  ExpectIndexOpError("RoiAlign", {image, F32(Shape{1, 4}, {0, 0, 1e7f, 1e7f}), first},
                     {{"output_height", int64_t{1}}, {"output_width", int64_t{1}}}, "samples per bin");
}

AttrMap ResizeAttrs(const char* mode, const char* coordinates) {
  return AttrMap{{"mode", std::string(mode)}, {"coordinate_transformation_mode", std::string(coordinates)}};
}

TEST(OpsIndexTest, ResizeBilinearHalfPixelAndItsErrors) {
  const Tensor x = F32(Shape{1, 1, 2, 2}, {1, 2, 3, 4});
  const Tensor no_sizes(DType::kInt64, Shape{0}), no_roi(DType::kFloat32, Shape{0});
  const Tensor y = Run1("Resize", {x, F32(Shape{4}, {1, 1, 2, 2}), no_sizes, no_roi}, ResizeAttrs("linear", "half_pixel"));
  EXPECT_EQ(y.shape(), (Shape{1, 1, 4, 4}));
  // Row 0 of PyTorch's bilinear upsampling (align_corners=False) of [[1, 2], [3, 4]].
  const std::vector<float> v = Values<float>(y);
  EXPECT_EQ(std::vector<float>(v.begin(), v.begin() + 4), (std::vector<float>{1, 1.25f, 1.75f, 2}));
  // sizes win over scales; nearest copies any dtype.
  const Tensor ints = Run1("Resize", {I32(Shape{1, 2}, {5, 6}), Tensor(DType::kFloat32, Shape{0}), I64({1, 4}), no_roi},
                           ResizeAttrs("nearest", "asymmetric"));
  EXPECT_EQ(Values<int32_t>(ints), (std::vector<int32_t>{5, 5, 6, 6}));
  ExpectIndexOpError("Resize", {x, F32(Shape{4}, {1, 1, 0, 2}), no_sizes, no_roi}, ResizeAttrs("linear", "half_pixel"),
              "not a positive number");
  ExpectIndexOpError("Resize", {x, F32(Shape{3}, {1, 1, 2}), no_sizes, no_roi}, ResizeAttrs("linear", "half_pixel"),
              "scales has 3 values");
  ExpectIndexOpError("Resize", {x, F32(Shape{4}, {1, 1, 2, 2}), no_sizes, no_roi}, ResizeAttrs("linear", "sideways"),
              "coordinate_transformation_mode");
  ExpectIndexOpError("Resize", {I32(Shape{1, 2}, {5, 6}), F32(Shape{2}, {1, 2}), no_sizes, no_roi},
              ResizeAttrs("linear", "half_pixel"), "not supported");
}

TEST(OpsIndexTest, ResizeInfersExactSizesFromConstantInputs) {
  const Tensor scales = F32(Shape{4}, {1, 1, 2, 0.5f}), sizes(DType::kInt64, Shape{0}), roi(DType::kFloat32, Shape{0});
  const std::vector<TensorSpec> in{{DType::kFloat32, Shape{-1, 3, 8, 8}},
                                   {DType::kFloat32, Shape{4}},
                                   {DType::kInt64, Shape{0}},
                                   {DType::kFloat32, Shape{0}}};
  const std::vector<const Tensor*> values{nullptr, &scales, &sizes, &roi};
  const AttrMap attrs = ResizeAttrs("nearest", "asymmetric");
  StatusOr<std::vector<TensorSpec>> out = OpRegistry::Global().Find("Resize")->infer({in, attrs, values});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape, (Shape{-1, 3, 16, 4}));
  // Without the values, the rank.
  out = OpRegistry::Global().Find("Resize")->infer({in, attrs});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{-1, -1, -1, -1}));
}

TEST(OpsIndexTest, SliceInfersExactLengthsFromConstantBounds) {
  // Shape(x) -> Slice [0:1]: what paddle2onnx computes before every Reshape.
  const Tensor starts = I64({0}), ends = I64({1}), axes = I64({0});
  const std::vector<TensorSpec> in{{DType::kInt64, Shape{4}}, {DType::kInt64, Shape{1}}, {DType::kInt64, Shape{1}},
                                   {DType::kInt64, Shape{1}}};
  const std::vector<const Tensor*> values{nullptr, &starts, &ends, &axes};
  StatusOr<std::vector<TensorSpec>> out = OpRegistry::Global().Find("Slice")->infer({in, AttrMap{}, values});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape, (Shape{1}));
  // An unknown dimension stays unknown.
  const std::vector<TensorSpec> unknown{{DType::kInt64, Shape{-1}}, in[1], in[2], in[3]};
  out = OpRegistry::Global().Find("Slice")->infer({unknown, AttrMap{}, values});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{-1}));
}

TEST(OpsIndexTest, DilatedConv2DIsTheConvolutionOfTheSpreadFilter) {
  const Tensor x = RandomTensor(Shape{2, 9, 11, 3}, 1);
  const Tensor f = RandomTensor(Shape{3, 2, 3, 4}, 2);
  // The same filter with its taps spread 2 rows and 3 columns apart, zeros between.
  Tensor spread(DType::kFloat32, Shape{5, 4, 3, 4});
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < 2; ++j) {
      for (int64_t k = 0; k < 12; ++k) {
        spread.mutable_data<float>()[static_cast<size_t>(((i * 2) * 4 + j * 3) * 12 + k)] =
            f.data<float>()[static_cast<size_t>((i * 2 + j) * 12 + k)];
      }
    }
  }
  for (const char* padding : {"SAME", "VALID"}) {
    const AttrMap attrs{{"padding", std::string(padding)}, {"strides", std::vector<int64_t>{1, 2}}};
    AttrMap dilated = attrs;
    dilated.Set("dilations", std::vector<int64_t>{2, 3});
    const Tensor a = Run1("Conv2D", {x, f}, dilated);
    const Tensor b = Run1("Conv2D", {x, spread}, attrs);
    // The same products, summed in another grouping: within a few float32 roundings.
    ExpectNear(a, b.shape(), ToDouble(b), 1e-5, 1e-5, padding);
  }
}

TEST(OpsIndexTest, LossSelectionEinsumAndRecurrentErrorsNameTheProblem) {
  const Tensor log_prob = F32(Shape{2, 3}, {-1, -2, -3, -4, -5, -6});
  EXPECT_EQ(Values<float>(Run1("NegativeLogLikelihoodLoss", {log_prob, I64({2, 0})})), (std::vector<float>{3.5f}));
  EXPECT_EQ(Values<float>(Run1("NegativeLogLikelihoodLoss", {log_prob, I64({2, 7})},
                               {{"ignore_index", int64_t{7}}, {"reduction", std::string("sum")}})),
            (std::vector<float>{3}));
  ExpectIndexOpError("NegativeLogLikelihoodLoss", {log_prob, I64({2, 3})}, {}, "not a class");
  const Tensor x = F32(Shape{5}, {3, 1, 3, 2, 0});
  const std::vector<Tensor> top = op_test::RunOk("TopK", {x, I64({2})});
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(Values<float>(top[0]), (std::vector<float>{3, 3}));
  EXPECT_EQ(Values<int64_t>(top[1]), (std::vector<int64_t>{0, 2}));  // ties: the lower index first
  ExpectIndexOpError("TopK", {x, I64({6})}, {}, "outside [0, 5]");
  const Tensor a = F32(Shape{2, 3}, {1, 2, 3, 4, 5, 6}), b = F32(Shape{3, 2}, {1, 0, 0, 1, 1, 1});
  EXPECT_EQ(Values<float>(Run1("Einsum", {a, b}, {{"equation", std::string("ij,jk->ik")}})),
            (std::vector<float>{4, 5, 10, 11}));
  EXPECT_EQ(Values<float>(Run1("Einsum", {a}, {{"equation", std::string("ij->")}})), (std::vector<float>{21}));
  ExpectIndexOpError("Einsum", {a, b}, {{"equation", std::string("ij,jk,kl->il")}}, "3 terms for 2 operands");
  ExpectIndexOpError("Einsum", {a, b}, {{"equation", std::string("ij,ik->jk")}}, "dimensions differ");
  ExpectIndexOpError("Einsum", {a}, {{"equation", std::string("i$->i")}}, "is not a label");
  // An LSTM whose W does not fit its hidden size.
  const Tensor none(DType::kFloat32, Shape{0});
  ExpectIndexOpError("LSTM", {Tensor(DType::kFloat32, Shape{2, 1, 3}), Tensor(DType::kFloat32, Shape{1, 8, 3}),
                              Tensor(DType::kFloat32, Shape{1, 8, 2}), none, Tensor(DType::kInt32, Shape{0}), none, none, none},
                     {{"hidden_size", int64_t{4}}}, "do not fit");
  ExpectIndexOpError("GRU", {Tensor(DType::kFloat32, Shape{2, 1, 3}), Tensor(DType::kFloat32, Shape{1, 6, 3}),
                             Tensor(DType::kFloat32, Shape{1, 6, 2}), none, Tensor(DType::kInt32, Shape{0}), none},
                     {{"hidden_size", int64_t{2}}, {"activations", std::string("Sigmoid,Cosine")}}, "not one of ONNX's");
}

}  // namespace
}  // namespace lockstep
