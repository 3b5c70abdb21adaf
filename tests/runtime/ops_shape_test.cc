// The shape ops an ONNX importer translates onto: Shape, Reshape's shape input, Expand, Tile,
// Range, ConstantOfShape, Slice and Pad. Answers are worked by hand or by a reference loop
// written from the ONNX definition; every op is also fed hostile shape values, which must be
// errors and not allocations.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "runtime/bfloat16.h"
#include "runtime/op_registry.h"
#include "tests/runtime/op_test_util.h"

namespace lockstep {
namespace {

using op_test::KernelStatus;

using op_test::ExpectError;
using op_test::Infer;
using op_test::RandomTensor;
using op_test::RunOk;

constexpr int64_t kBig = int64_t{1} << 40;
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();

using op_test::Values;

using op_test::I64;
Tensor I32(std::vector<int32_t> v) { return Tensor::FromVector<int32_t>(Shape{static_cast<int64_t>(v.size())}, v); }

// 0, 1, 2, ... in a float tensor of `shape`.
Tensor Iota(const Shape& shape) {
  std::vector<float> v(static_cast<size_t>(shape.num_elements()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  return Tensor::FromVector<float>(shape, v);
}

// Runs the kernel alone, as the executor does (no shape inference first): its own checks
// must catch what inference would.

Shape ShapeOpInferredShape(const char* op, std::vector<TensorSpec> in, const AttrMap& attrs = {}) {
  auto out = Infer(op, in, attrs);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return out.ok() ? (*out)[0].shape : Shape{-2};
}

// ---- Shape ----

TEST(OpsShapeTest, ShapeWithStartAndEnd) {
  Tensor x = RandomTensor({2, 3, 4}, 1);
  EXPECT_EQ(Values<int64_t>(RunOk("Shape", {x}).at(0)), (std::vector<int64_t>{2, 3, 4}));
  auto sliced = [&](AttrMap attrs) { return Values<int64_t>(RunOk("Shape", {x}, attrs).at(0)); };
  EXPECT_EQ(sliced({{"start", int64_t{1}}}), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(sliced({{"end", int64_t{-1}}}), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(sliced({{"start", int64_t{-2}}, {"end", int64_t{-1}}}), (std::vector<int64_t>{3}));
  EXPECT_EQ(sliced({{"start", int64_t{-10}}, {"end", int64_t{10}}}), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(sliced({{"start", int64_t{5}}}), (std::vector<int64_t>{}));
  EXPECT_EQ(sliced({{"start", int64_t{2}}, {"end", int64_t{1}}}), (std::vector<int64_t>{}));
  // Any dtype; a scalar has no dimensions; an empty tensor has its zeros.
  Tensor s = Tensor::FromVector<std::string>({1, 2}, {"a", "b"});
  EXPECT_EQ(Values<int64_t>(RunOk("Shape", {s}).at(0)), (std::vector<int64_t>{1, 2}));
  Tensor scalar_shape = RunOk("Shape", {Tensor::Scalar<int32_t>(3)}).at(0);
  EXPECT_EQ(scalar_shape.shape(), (Shape{0}));
  EXPECT_EQ(Values<int64_t>(RunOk("Shape", {RandomTensor({0, 5}, 2)}).at(0)), (std::vector<int64_t>{0, 5}));
  // Inference knows the length even when the dimensions are not known.
  auto spec = Infer("Shape", {{DType::kFloat32, {-1, -1, 8}}});
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ((*spec)[0], (TensorSpec{DType::kInt64, Shape{3}}));
  EXPECT_EQ(ShapeOpInferredShape("Shape", {{DType::kFloat32, {-1, -1, 8}}}, {{"start", int64_t{1}}}), (Shape{2}));
}

// ---- Reshape with a shape input ----

TEST(OpsShapeTest, ReshapeFromShapeInput) {
  Tensor x = Iota({2, 3, 4});
  auto reshaped = [&](Tensor target, AttrMap attrs = {}) {
    std::vector<Tensor> out = RunOk("Reshape", {x, target}, attrs);
    return out.empty() ? Shape{-2} : out[0].shape();
  };
  EXPECT_EQ(reshaped(I64({0, -1})), (Shape{2, 12}));  // 0 copies x's dimension
  EXPECT_EQ(reshaped(I64({0, 0, -1})), (Shape{2, 3, 4}));
  EXPECT_EQ(reshaped(I32({-1, 4})), (Shape{6, 4}));
  EXPECT_EQ(reshaped(I64({4, 0, 2})), (Shape{4, 3, 2}));
  EXPECT_EQ(reshaped(I64({24})), (Shape{24}));
  Tensor out = RunOk("Reshape", {x, I64({6, 4})}).at(0);
  EXPECT_EQ(out.raw_data(), x.raw_data());  // aliases, as the attr form does
  // allowzero: a 0 is a 0.
  Tensor empty = RandomTensor({2, 0}, 1);
  EXPECT_EQ(RunOk("Reshape", {empty, I64({0, 5})}, {{"allowzero", true}}).at(0).shape(), (Shape{0, 5}));
  ExpectError(KernelStatus("Reshape", {empty, I64({0, 5})}), StatusCode::kInvalidArgument, "cannot reshape [2,0]");
  EXPECT_EQ(RunOk("Reshape", {RandomTensor({0, 3}, 1), I64({0, 3})}).at(0).shape(), (Shape{0, 3}));
  // Scalars both ways.
  EXPECT_EQ(RunOk("Reshape", {Tensor::Scalar<float>(2), I64({1, 1})}).at(0).shape(), (Shape{1, 1}));
  EXPECT_EQ(RunOk("Reshape", {RandomTensor({1, 1}, 3), I64({})}).at(0).shape(), (Shape{}));

  ExpectError(KernelStatus("Reshape", {x, I64({5, -1})}), StatusCode::kInvalidArgument, "cannot reshape");
  ExpectError(KernelStatus("Reshape", {x, I64({-1, -1})}), StatusCode::kInvalidArgument, "more than one -1");
  ExpectError(KernelStatus("Reshape", {x, I64({-2, 12})}), StatusCode::kInvalidArgument, "negative");
  ExpectError(KernelStatus("Reshape", {x, I64({1, 1, 1, 0})}), StatusCode::kInvalidArgument,
              "a 0 at position 3, where [2,3,4] has no dimension");
  ExpectError(KernelStatus("Reshape", {x, I64({kBig, kBig})}), StatusCode::kInvalidArgument, "more than");
  ExpectError(KernelStatus("Reshape", {x, I64({kBig, kBig, 0})}, {{"allowzero", true}}), StatusCode::kInvalidArgument,
              "more than");
  ExpectError(KernelStatus("Reshape", {x, I64({1, 1, 1, 1, 1, 1, 1, 1, 24})}), StatusCode::kInvalidArgument, "more than");
  ExpectError(KernelStatus("Reshape", {x, RandomTensor({2}, 1)}), StatusCode::kInvalidArgument, "int32 or int64");
  ExpectError(KernelStatus("Reshape", {x, Tensor::FromVector<int64_t>({1, 2}, {6, 4})}), StatusCode::kInvalidArgument,
              "vector");

  EXPECT_EQ(ShapeOpInferredShape("Reshape", {{DType::kFloat32, {-1, 8}}, {DType::kInt64, {3}}}), (Shape{-1, -1, -1}));
  ExpectError(Infer("Reshape", {{DType::kFloat32, {-1, 8}}, {DType::kInt64, {-1}}}).status(),
              StatusCode::kInvalidArgument, "must be known");
  EXPECT_TRUE(OpRegistry::Global().Find("Reshape")->aliases_input);
}

// ---- Expand ----

TEST(OpsShapeTest, ExpandBroadcastsBothWays) {
  Tensor col = Tensor::FromVector<float>({3, 1}, {1, 2, 3});
  Tensor out = RunOk("Expand", {col, I64({2, 1, 4})}).at(0);
  ASSERT_EQ(out.shape(), (Shape{2, 3, 4}));
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t i = 0; i < 3; ++i) {
      for (int64_t j = 0; j < 4; ++j) EXPECT_EQ(out.data<float>()[(b * 3 + i) * 4 + j], i + 1.0f);
    }
  }
  // A 1 in the target keeps data's dimension (bidirectional, unlike numpy's broadcast_to).
  Tensor row = Tensor::FromVector<int64_t>({1, 3}, {7, 8, 9});
  EXPECT_EQ(Values<int64_t>(RunOk("Expand", {row, I64({2, 1})}).at(0)), (std::vector<int64_t>{7, 8, 9, 7, 8, 9}));
  EXPECT_EQ(RunOk("Expand", {row, I64({3})}).at(0).shape(), (Shape{1, 3}));
  EXPECT_EQ(RunOk("Expand", {row, I64({})}).at(0).shape(), (Shape{1, 3}));
  EXPECT_EQ(Values<float>(RunOk("Expand", {Tensor::Scalar<float>(5), I64({2, 2})}).at(0)),
            (std::vector<float>{5, 5, 5, 5}));
  Tensor words = Tensor::FromVector<std::string>({2, 1}, {"a", "b"});
  EXPECT_EQ(Values<std::string>(RunOk("Expand", {words, I32({2, 2})}).at(0)),
            (std::vector<std::string>{"a", "a", "b", "b"}));
  EXPECT_EQ(RunOk("Expand", {RandomTensor({0, 1}, 1), I64({0, 6})}).at(0).shape(), (Shape{0, 6}));

  ExpectError(KernelStatus("Expand", {row, I64({2})}), StatusCode::kInvalidArgument, "cannot be broadcast");
  ExpectError(KernelStatus("Expand", {row, I64({-1, 3})}), StatusCode::kInvalidArgument, "negative");
  ExpectError(KernelStatus("Expand", {row, I64({kBig, kBig})}), StatusCode::kInvalidArgument, "more than");
  // Each dimension allowed, the product not.
  EXPECT_NE(KernelStatus("Expand", {RandomTensor({kBig >> 20, 1}, 1), I64({1, kBig >> 10})}).code(), StatusCode::kOk);

  EXPECT_EQ(ShapeOpInferredShape("Expand", {{DType::kFloat32, {-1, 1, 4}}, {DType::kInt64, {3}}}), (Shape{-1, -1, 4}));
  EXPECT_EQ(ShapeOpInferredShape("Expand", {{DType::kFloat32, {3}}, {DType::kInt64, {2}}}), (Shape{-1, 3}));
}

// ---- Tile ----

TEST(OpsShapeTest, TileRepeatsEachAxis) {
  Tensor x = Iota({2, 3});  // [[0,1,2],[3,4,5]]
  Tensor out = RunOk("Tile", {x, I64({2, 2})}).at(0);
  ASSERT_EQ(out.shape(), (Shape{4, 6}));
  EXPECT_EQ(Values<float>(out), (std::vector<float>{0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5,  //
                                                    0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5}));
  // Against the definition on a 3-D case: out[i,j,k] = x[i % 2, j % 1, k % 3].
  Tensor y = Iota({2, 1, 3});
  Tensor tiled = RunOk("Tile", {y, I32({3, 4, 2})}).at(0);
  ASSERT_EQ(tiled.shape(), (Shape{6, 4, 6}));
  for (int64_t i = 0; i < 6; ++i) {
    for (int64_t j = 0; j < 4; ++j) {
      for (int64_t k = 0; k < 6; ++k) {
        ASSERT_EQ(tiled.data<float>()[(i * 4 + j) * 6 + k], y.data<float>()[(i % 2) * 3 + k % 3]);
      }
    }
  }
  EXPECT_EQ(RunOk("Tile", {x, I64({1, 0})}).at(0).shape(), (Shape{2, 0}));
  EXPECT_EQ(RunOk("Tile", {Tensor::Scalar<float>(4), I64({})}).at(0).shape(), (Shape{}));
  Tensor flags = Tensor::FromVector<bool>({2}, {true, false});
  EXPECT_EQ(Values<bool>(RunOk("Tile", {flags, I64({2})}).at(0)), (std::vector<bool>{true, false, true, false}));

  ExpectError(KernelStatus("Tile", {x, I64({2})}), StatusCode::kInvalidArgument, "does not fit an input of rank 2");
  ExpectError(KernelStatus("Tile", {x, I64({2, -1})}), StatusCode::kInvalidArgument, "negative");
  ExpectError(KernelStatus("Tile", {x, I64({kBig, kBig})}), StatusCode::kInvalidArgument, "more than");
  ExpectError(KernelStatus("Tile", {x, I64({kInt64Max, 2})}), StatusCode::kInvalidArgument, "too large");
  EXPECT_EQ(ShapeOpInferredShape("Tile", {{DType::kFloat32, {-1, 0, 3}}, {DType::kInt64, {3}}}), (Shape{-1, 0, -1}));
  ExpectError(Infer("Tile", {{DType::kFloat32, {2, 3}}, {DType::kInt64, {3}}}).status(), StatusCode::kInvalidArgument,
              "3 values for an input of rank 2");
}

// ---- Range ----

TEST(OpsShapeTest, RangeCountsAndValues) {
  auto range = [](Tensor a, Tensor b, Tensor c) { return RunOk("Range", {a, b, c}).at(0); };
  EXPECT_EQ(Values<int32_t>(range(Tensor::Scalar<int32_t>(0), Tensor::Scalar<int32_t>(5), Tensor::Scalar<int32_t>(1))),
            (std::vector<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(
      Values<int64_t>(range(Tensor::Scalar<int64_t>(10), Tensor::Scalar<int64_t>(0), Tensor::Scalar<int64_t>(-3))),
      (std::vector<int64_t>{10, 7, 4, 1}));
  EXPECT_EQ(Values<float>(range(Tensor::Scalar<float>(0), Tensor::Scalar<float>(1), Tensor::Scalar<float>(0.25f))),
            (std::vector<float>{0, 0.25f, 0.5f, 0.75f}));
  EXPECT_EQ(Values<double>(range(Tensor::Scalar<double>(1), Tensor::Scalar<double>(2.5), Tensor::Scalar<double>(0.5))),
            (std::vector<double>{1, 1.5, 2}));
  EXPECT_EQ(range(Tensor::Scalar<double>(1), Tensor::Scalar<double>(1), Tensor::Scalar<double>(1)).shape(), (Shape{0}));
  EXPECT_EQ(range(Tensor::Scalar<int32_t>(5), Tensor::Scalar<int32_t>(0), Tensor::Scalar<int32_t>(1)).shape(),
            (Shape{0}));
  // The whole int64 line in four steps: no overflow on the way.
  EXPECT_EQ(Values<int64_t>(range(Tensor::Scalar<int64_t>(kInt64Min), Tensor::Scalar<int64_t>(kInt64Max),
                                  Tensor::Scalar<int64_t>(int64_t{1} << 62))),
            (std::vector<int64_t>{kInt64Min, -(int64_t{1} << 62), 0, int64_t{1} << 62}));
  // A long one, filled in parallel.
  Tensor longer = range(Tensor::Scalar<int64_t>(3), Tensor::Scalar<int64_t>(100003), Tensor::Scalar<int64_t>(2));
  ASSERT_EQ(longer.shape(), (Shape{50000}));
  for (int64_t i = 0; i < 50000; ++i) ASSERT_EQ(longer.data<int64_t>()[i], 3 + 2 * i);

  auto error = [](Tensor a, Tensor b, Tensor c, const char* fragment) {
    ExpectError(KernelStatus("Range", {a, b, c}), StatusCode::kInvalidArgument, fragment);
  };
  error(Tensor::Scalar<int64_t>(0), Tensor::Scalar<int64_t>(5), Tensor::Scalar<int64_t>(0), "delta is 0");
  error(Tensor::Scalar<float>(0), Tensor::Scalar<float>(5), Tensor::Scalar<float>(0), "delta is 0");
  error(Tensor::Scalar<int64_t>(0), Tensor::Scalar<int64_t>(kInt64Max), Tensor::Scalar<int64_t>(1), "more than");
  error(Tensor::Scalar<float>(0), Tensor::Scalar<float>(INFINITY), Tensor::Scalar<float>(1), "more than");
  error(Tensor::Scalar<float>(0), Tensor::Scalar<float>(NAN), Tensor::Scalar<float>(1), "NaN");
  error(Tensor::Scalar<int64_t>(0), Tensor::Scalar<int32_t>(5), Tensor::Scalar<int64_t>(1), "limit must be int64");
  error(Tensor::Scalar<int64_t>(0), I64({5}), Tensor::Scalar<int64_t>(1), "limit must have rank 0");
  error(Tensor::Scalar<bool>(false), Tensor::Scalar<bool>(true), Tensor::Scalar<bool>(true), "not supported");
  EXPECT_EQ(ShapeOpInferredShape("Range", {{DType::kInt64, {}}, {DType::kInt64, {}}, {DType::kInt64, {}}}), (Shape{-1}));
}

// ---- ConstantOfShape ----

TEST(OpsShapeTest, ConstantOfShapeFills) {
  Tensor zeros = RunOk("ConstantOfShape", {I64({2, 3})}).at(0);
  EXPECT_EQ(zeros.dtype(), DType::kFloat32);
  EXPECT_EQ(Values<float>(zeros), std::vector<float>(6, 0.0f));
  EXPECT_EQ(Values<int64_t>(RunOk("ConstantOfShape", {I64({3})}, {{"dtype", DType::kInt64}, {"value", 7.0}}).at(0)),
            (std::vector<int64_t>{7, 7, 7}));
  EXPECT_EQ(Values<bool>(RunOk("ConstantOfShape", {I32({2})}, {{"dtype", DType::kBool}, {"value", 1.0}}).at(0)),
            (std::vector<bool>{true, true}));
  EXPECT_EQ(Values<int32_t>(RunOk("ConstantOfShape", {I64({1})}, {{"dtype", DType::kInt32}, {"value", 1e12}}).at(0)),
            (std::vector<int32_t>{std::numeric_limits<int32_t>::max()}));
  Tensor bf = RunOk("ConstantOfShape", {I64({2})}, {{"dtype", DType::kBFloat16}, {"value", 1.5}}).at(0);
  EXPECT_EQ(Bfloat16ToFloat(bf.data<bfloat16>()[1]), 1.5f);
  Tensor scalar = RunOk("ConstantOfShape", {I64({})}, {{"value", -2.0}}).at(0);
  EXPECT_EQ(scalar.shape(), (Shape{}));
  EXPECT_EQ(scalar.data<float>()[0], -2.0f);
  EXPECT_EQ(RunOk("ConstantOfShape", {I64({0, 5})}).at(0).shape(), (Shape{0, 5}));
  Tensor big = RunOk("ConstantOfShape", {I64({300, 300})}, {{"value", 0.5}}).at(0);
  for (float v : big.data<float>()) ASSERT_EQ(v, 0.5f);

  ExpectError(KernelStatus("ConstantOfShape", {I64({kBig, kBig})}), StatusCode::kInvalidArgument, "more than");
  ExpectError(KernelStatus("ConstantOfShape", {I64({2, -1})}), StatusCode::kInvalidArgument, "negative");
  ExpectError(KernelStatus("ConstantOfShape", {I64({2})}, {{"dtype", DType::kString}}), StatusCode::kInvalidArgument,
              "not supported");
  EXPECT_EQ(ShapeOpInferredShape("ConstantOfShape", {{DType::kInt64, {2}}}), (Shape{-1, -1}));
}

// ---- Slice ----

// Slice on a 1-D iota of 10: the values taken.
std::vector<float> Slice1D(std::vector<int64_t> starts, std::vector<int64_t> ends, std::vector<int64_t> steps) {
  std::vector<Tensor> out = RunOk("Slice", {Iota({10}), I64(starts), I64(ends), I64({0}), I64(steps)});
  return out.empty() ? std::vector<float>{-1} : Values<float>(out[0]);
}

TEST(OpsShapeTest, SliceStepsAndClamping) {
  EXPECT_EQ(Slice1D({2}, {8}, {1}), (std::vector<float>{2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(Slice1D({2}, {8}, {3}), (std::vector<float>{2, 5}));
  EXPECT_EQ(Slice1D({-3}, {kInt64Max}, {1}), (std::vector<float>{7, 8, 9}));
  EXPECT_EQ(Slice1D({-100}, {100}, {4}), (std::vector<float>{0, 4, 8}));
  EXPECT_EQ(Slice1D({5}, {2}, {1}), (std::vector<float>{}));
  // Negative steps: a start is clamped to [0, 9], an end to [-1, 9].
  EXPECT_EQ(Slice1D({-1}, {kInt64Min}, {-1}), (std::vector<float>{9, 8, 7, 6, 5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(Slice1D({8}, {2}, {-2}), (std::vector<float>{8, 6, 4}));
  EXPECT_EQ(Slice1D({100}, {-100}, {-3}), (std::vector<float>{9, 6, 3, 0}));
  EXPECT_EQ(Slice1D({2}, {5}, {-1}), (std::vector<float>{}));
  EXPECT_EQ(Slice1D({-100}, {-100}, {-1}), (std::vector<float>{0}));  // the spec's start clamp to 0
  EXPECT_EQ(Slice1D({9}, {kInt64Max}, {-1}), (std::vector<float>{}));  // an end clamped to 9
  EXPECT_EQ(Slice1D({5}, {0}, {kInt64Min}), (std::vector<float>{5}));
  EXPECT_EQ(Slice1D({0}, {10}, {kInt64Max}), (std::vector<float>{0}));
}

TEST(OpsShapeTest, SliceAxesAndDTypes) {
  Tensor x = Iota({3, 4});  // [[0,1,2,3],[4,5,6,7],[8,9,10,11]]
  // Without axes: the first len(starts) axes.
  EXPECT_EQ(Values<float>(RunOk("Slice", {x, I64({1, 0}), I64({3, 2})}).at(0)), (std::vector<float>{4, 5, 8, 9}));
  EXPECT_EQ(Values<float>(RunOk("Slice", {x, I64({1}), I64({2})}).at(0)), (std::vector<float>{4, 5, 6, 7}));
  EXPECT_EQ(Values<float>(RunOk("Slice", {x, I32({1}), I32({3}), I32({1})}).at(0)),
            (std::vector<float>{1, 2, 5, 6, 9, 10}));
  // axes -1 and 0 with steps -1 and 2: columns reversed, rows 0 and 2.
  Tensor out = RunOk("Slice", {x, I64({-1, 0}), I64({kInt64Min, 3}), I64({-1, 0}), I64({-1, 2})}).at(0);
  ASSERT_EQ(out.shape(), (Shape{2, 4}));
  EXPECT_EQ(Values<float>(out), (std::vector<float>{3, 2, 1, 0, 11, 10, 9, 8}));
  // Rows reversed by 2 and columns stepped by 3, into a larger input for the parallel path.
  Tensor big = Iota({300, 200});
  Tensor strided = RunOk("Slice", {big, I64({-1, 1}), I64({0, 200}), I64({0, 1}), I64({-2, 3})}).at(0);
  ASSERT_EQ(strided.shape(), (Shape{150, 67}));
  for (int64_t i = 0; i < 150; ++i) {
    for (int64_t j = 0; j < 67; ++j) {
      ASSERT_EQ(strided.data<float>()[i * 67 + j], static_cast<float>((299 - 2 * i) * 200 + 1 + 3 * j));
    }
  }
  Tensor words = Tensor::FromVector<std::string>({4}, {"a", "b", "c", "d"});
  EXPECT_EQ(Values<std::string>(RunOk("Slice", {words, I64({3}), I64({0}), I64({0}), I64({-2})}).at(0)),
            (std::vector<std::string>{"d", "b"}));
  Tensor shape = I64({8, 16, 32});  // x.shape[1:] as exported graphs compute it
  EXPECT_EQ(Values<int64_t>(RunOk("Slice", {shape, I64({1}), I64({kInt64Max})}).at(0)), (std::vector<int64_t>{16, 32}));
  EXPECT_EQ(RunOk("Slice", {RandomTensor({0, 3}, 1), I64({1}), I64({2}), I64({1})}).at(0).shape(), (Shape{0, 1}));
  EXPECT_EQ(RunOk("Slice", {RandomTensor({0, 3}, 1), I64({-1}), I64({kInt64Min}), I64({0}), I64({-1})}).at(0).shape(),
            (Shape{0, 3}));

  ExpectError(KernelStatus("Slice", {x, I64({0}), I64({1}), I64({0}), I64({0})}), StatusCode::kInvalidArgument, "has a 0");
  ExpectError(KernelStatus("Slice", {x, I64({0, 0}), I64({1, 1}), I64({1, -1})}), StatusCode::kInvalidArgument,
              "repeat an axis");
  ExpectError(KernelStatus("Slice", {x, I64({0}), I64({1}), I64({2})}), StatusCode::kInvalidArgument, "out of range");
  ExpectError(KernelStatus("Slice", {x, I64({0, 0}), I64({1})}), StatusCode::kInvalidArgument, "have 2, 1");
  ExpectError(KernelStatus("Slice", {x, RandomTensor({1}, 1), I64({1})}), StatusCode::kInvalidArgument, "int32 or int64");

  EXPECT_EQ(ShapeOpInferredShape("Slice", {{DType::kFloat32, {5, 6, 7}}, {DType::kInt64, {2}}, {DType::kInt64, {2}}}),
            (Shape{-1, -1, 7}));
  EXPECT_EQ(ShapeOpInferredShape("Slice", {{DType::kFloat32, {5, 0, 7}}, {DType::kInt64, {1}}, {DType::kInt64, {1}},
                                    {DType::kInt64, {1}}}),
            (Shape{-1, 0, -1}));
  ExpectError(Infer("Slice", {{DType::kFloat32, {5}}, {DType::kInt64, {2}}, {DType::kInt64, {2}}}).status(),
              StatusCode::kInvalidArgument, "2 axes to slice in an input of rank 1");
  ExpectError(Infer("Slice", {{DType::kFloat32, {5}}, {DType::kInt64, {1}}, {DType::kInt64, {2}}}).status(),
              StatusCode::kInvalidArgument, "ends has 2 values");
}

// ---- Pad ----

std::vector<float> Pad1D(std::vector<float> x, std::vector<int64_t> pads, const char* mode, double value = 0) {
  Tensor in = Tensor::FromVector<float>(Shape{static_cast<int64_t>(x.size())}, x);
  std::vector<Tensor> out = RunOk("Pad", {in, I64(pads)}, {{"mode", std::string(mode)}, {"value", value}});
  return out.empty() ? std::vector<float>{-1} : Values<float>(out[0]);
}

TEST(OpsShapeTest, PadModesAndNegativePads) {
  const std::vector<float> x = {1, 2, 3, 4};
  EXPECT_EQ(Pad1D(x, {2, 1}, "constant", 9), (std::vector<float>{9, 9, 1, 2, 3, 4, 9}));
  EXPECT_EQ(Pad1D(x, {2, 3}, "reflect"), (std::vector<float>{3, 2, 1, 2, 3, 4, 3, 2, 1}));
  EXPECT_EQ(Pad1D(x, {2, 1}, "edge"), (std::vector<float>{1, 1, 1, 2, 3, 4, 4}));
  // Longer than the axis: numpy's reflect goes on mirroring.
  EXPECT_EQ(Pad1D({1, 2, 3}, {5, 0}, "reflect"), (std::vector<float>{2, 1, 2, 3, 2, 1, 2, 3}));
  EXPECT_EQ(Pad1D({7}, {2, 1}, "reflect"), (std::vector<float>{7, 7, 7, 7}));
  // Negative pads crop first; the padding then works from what remains.
  const std::vector<float> five = {1, 2, 3, 4, 5};
  EXPECT_EQ(Pad1D(five, {-1, 2}, "constant"), (std::vector<float>{2, 3, 4, 5, 0, 0}));
  EXPECT_EQ(Pad1D(five, {-2, -1}, "constant"), (std::vector<float>{3, 4}));
  EXPECT_EQ(Pad1D(five, {-1, 2}, "edge"), (std::vector<float>{2, 3, 4, 5, 5, 5}));
  EXPECT_EQ(Pad1D(five, {-1, 2}, "reflect"), (std::vector<float>{2, 3, 4, 5, 4, 3}));
  EXPECT_EQ(Pad1D(five, {2, -5}, "constant", 1), (std::vector<float>{1, 1}));
  EXPECT_EQ(Pad1D({}, {1, 2}, "constant", 3), (std::vector<float>{3, 3, 3}));

  Tensor m = Tensor::FromVector<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(Values<float>(RunOk("Pad", {m, I64({1, 1, 1, 1})}, {{"mode", std::string("reflect")}}).at(0)),
            (std::vector<float>{5, 4, 5, 6, 5, 2, 1, 2, 3, 2, 5, 4, 5, 6, 5, 2, 1, 2, 3, 2}));
  Tensor padded = RunOk("Pad", {m, I64({1, 0, 0, 2})}, {{"value", 9.0}}).at(0);
  ASSERT_EQ(padded.shape(), (Shape{3, 5}));
  EXPECT_EQ(Values<float>(padded), (std::vector<float>{9, 9, 9, 9, 9, 1, 2, 3, 9, 9, 4, 5, 6, 9, 9}));
  EXPECT_EQ(Values<float>(RunOk("Pad", {m, I64({0, -1, -1, 0})}, {{"mode", std::string("edge")}}).at(0)),
            (std::vector<float>{2, 3}));
  Tensor ints = Tensor::FromVector<int64_t>({2}, {5, 6});
  EXPECT_EQ(Values<int64_t>(RunOk("Pad", {ints, I32({1, 1})}, {{"value", -1.0}}).at(0)),
            (std::vector<int64_t>{-1, 5, 6, -1}));
  Tensor flags = Tensor::FromVector<bool>({1}, {false});
  EXPECT_EQ(Values<bool>(RunOk("Pad", {flags, I64({1, 0})}, {{"value", 1.0}}).at(0)), (std::vector<bool>{true, false}));
  EXPECT_EQ(RunOk("Pad", {Tensor::Scalar<float>(3), I64({})}).at(0).data<float>()[0], 3.0f);
  // NCHW padding of an image batch, against the definition.
  Tensor image = Iota({2, 3, 17, 19});
  Tensor framed = RunOk("Pad", {image, I64({0, 0, 2, 1, 0, 0, 1, 3})}, {{"mode", std::string("edge")}}).at(0);
  ASSERT_EQ(framed.shape(), (Shape{2, 3, 20, 23}));
  for (int64_t nc = 0; nc < 6; ++nc) {
    for (int64_t h = 0; h < 20; ++h) {
      for (int64_t w = 0; w < 23; ++w) {
        const int64_t sh = std::clamp<int64_t>(h - 2, 0, 16), sw = std::clamp<int64_t>(w - 1, 0, 18);
        ASSERT_EQ(framed.data<float>()[(nc * 20 + h) * 23 + w], image.data<float>()[(nc * 17 + sh) * 19 + sw]);
      }
    }
  }

  ExpectError(KernelStatus("Pad", {m, I64({0, -2, 0, -2})}), StatusCode::kInvalidArgument, "remove more than");
  ExpectError(KernelStatus("Pad", {m, I64({0, -4, 0, 0})}), StatusCode::kInvalidArgument, "do not fit");
  ExpectError(KernelStatus("Pad", {m, I64({kBig, 0, kBig, 0})}), StatusCode::kInvalidArgument, "more than");
  ExpectError(KernelStatus("Pad", {m, I64({kInt64Max, 0, 0, 0})}), StatusCode::kInvalidArgument, "do not fit");
  ExpectError(KernelStatus("Pad", {m, I64({kInt64Min, 0, 0, 0})}), StatusCode::kInvalidArgument, "do not fit");
  ExpectError(KernelStatus("Pad", {m, I64({1, 1})}), StatusCode::kInvalidArgument, "two per axis");
  ExpectError(KernelStatus("Pad", {RandomTensor({0}, 1), I64({1, 0})}, {{"mode", std::string("reflect")}}),
              StatusCode::kInvalidArgument, "at least one element");
  ExpectError(KernelStatus("Pad", {m, I64({0, 0, 0, 0})}, {{"mode", std::string("wrap")}}), StatusCode::kInvalidArgument,
              "mode");
  ExpectError(KernelStatus("Pad", {Tensor::FromVector<std::string>({1}, {"a"}), I64({1, 0})}),
              StatusCode::kInvalidArgument, "string");
  EXPECT_EQ(ShapeOpInferredShape("Pad", {{DType::kFloat32, {-1, 3}}, {DType::kInt64, {4}}}), (Shape{-1, -1}));
  ExpectError(Infer("Pad", {{DType::kFloat32, {-1, 3}}, {DType::kInt64, {3}}}).status(), StatusCode::kInvalidArgument,
              "two per axis");
}

TEST(OpsShapeTest, SplitSizesOfADimensionKnownAtRunTime) {
  const AttrMap equal{{"axis", int64_t{1}}, {"parts", int64_t{3}}};
  EXPECT_EQ(Values<int64_t>(RunOk("SplitSizes", {I64({2, 9})}, equal).at(0)), (std::vector<int64_t>{3, 3, 3}));
  ExpectError(KernelStatus("SplitSizes", {I64({2, 7})}, equal), StatusCode::kInvalidArgument,
              "dimension 1 of [2,7] (7) does not split into 3 equal parts");
  // Opset 18's num_outputs: the last part is what remains.
  AttrMap uneven = equal;
  uneven.Set("uneven", true);
  EXPECT_EQ(Values<int64_t>(RunOk("SplitSizes", {I64({2, 7})}, uneven).at(0)), (std::vector<int64_t>{3, 3, 1}));
  EXPECT_EQ(Values<int64_t>(RunOk("SplitSizes", {I64({2, 6})}, uneven).at(0)), (std::vector<int64_t>{2, 2, 2}));
  ExpectError(KernelStatus("SplitSizes", {I64({2, 1})}, AttrMap{{"axis", int64_t{-1}}, {"parts", int64_t{3}}, {"uneven", true}}),
              StatusCode::kInvalidArgument, "does not split into 3 parts");
  ExpectError(KernelStatus("SplitSizes", {I64({2, -3})}, equal), StatusCode::kInvalidArgument, "negative dimension");
}

TEST(OpsShapeTest, WindowPadsAsOnnxPadsForTheImageOfTheRun) {
  AttrMap same{{"extents", std::vector<int64_t>{3, 3}}, {"strides", std::vector<int64_t>{2, 2}},
               {"pads", std::vector<int64_t>{0, 0, 0, 0}}, {"auto_pad", std::string("SAME_LOWER")}};
  // Height 7: out 4, total 2 -> 1 and 1; width 8: out 4, total 1 -> the odd one before (LOWER).
  EXPECT_EQ(Values<int64_t>(RunOk("WindowPads", {I64({1, 2, 7, 8})}, same).at(0)),
            (std::vector<int64_t>{0, 0, 1, 1, 0, 0, 1, 0}));
  same.Set("auto_pad", std::string("SAME_UPPER"));
  EXPECT_EQ(Values<int64_t>(RunOk("WindowPads", {I64({1, 2, 7, 8})}, same).at(0)),
            (std::vector<int64_t>{0, 0, 1, 0, 0, 0, 1, 1}));
  // ceil_mode over 6 with extent 3 and stride 2: the last window needs 1 more.
  const AttrMap ceil{{"extents", std::vector<int64_t>{3}}, {"strides", std::vector<int64_t>{2}},
                     {"pads", std::vector<int64_t>{0, 0}}, {"ceil_mode", true}};
  EXPECT_EQ(Values<int64_t>(RunOk("WindowPads", {I64({1, 1, 6})}, ceil).at(0)), (std::vector<int64_t>{0, 0, 0, 0, 0, 1}));
  // A window that would lie in the end's padding alone is dropped: 4 with pads 0 and 2, extent
  // 2, stride 2 has two windows, and the end's padding is trimmed to none.
  const AttrMap all_padding{{"extents", std::vector<int64_t>{2}}, {"strides", std::vector<int64_t>{2}},
                            {"pads", std::vector<int64_t>{0, 2}}, {"ceil_mode", true}};
  EXPECT_EQ(Values<int64_t>(RunOk("WindowPads", {I64({1, 1, 4})}, all_padding).at(0)),
            (std::vector<int64_t>{0, 0, 0, 0, 0, 0}));
  ExpectError(KernelStatus("WindowPads", {I64({1, 1, 1})}, ceil), StatusCode::kInvalidArgument,
              "a window of extent 3 is larger than dimension 2 of the image [1,1,1] padded by 0 and 0");
  ExpectError(KernelStatus("WindowPads", {I64({4})}, same), StatusCode::kInvalidArgument, "no 2 spatial axes");
}

TEST(OpsShapeTest, NewOpsAreRegistered) {
  for (const char* op : {"Shape", "Expand", "Tile", "Range", "ConstantOfShape", "Slice", "Pad", "Transpose", "Max",
                         "Min", "Prod", "ArgMin"}) {
    const OpDef* def = OpRegistry::Global().Find(op);
    ASSERT_NE(def, nullptr) << op;
    EXPECT_NE(def->compute, nullptr) << op;
    EXPECT_TRUE(def->deterministic) << op;  // constant folding may evaluate them
  }
}

}  // namespace
}  // namespace lockstep
