// Transpose, the reductions Max/Min/Prod, ArgMin and ArgMax's ONNX attrs, and Gather along any
// axis with negative indices. Results are exact, so they are compared with references written
// from the definitions (index loops), on shapes that reach each kernel's fast paths.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
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
using op_test::RandomIntTensor;
using op_test::RandomTensor;
using op_test::RunOk;

using op_test::Values;

using op_test::I64;

// Runs the kernel alone, as the executor does (no shape inference first): its own checks
// must catch what inference would.

// The coordinates of flat index `flat` in `shape`.
std::vector<int64_t> Coords(const Shape& shape, int64_t flat) {
  std::vector<int64_t> c(static_cast<size_t>(shape.rank()));
  for (int d = shape.rank() - 1; d >= 0; --d) {
    c[static_cast<size_t>(d)] = flat % shape[d];
    flat /= shape[d];
  }
  return c;
}

int64_t Flat(const Shape& shape, const std::vector<int64_t>& c) {
  int64_t flat = 0;
  for (int d = 0; d < shape.rank(); ++d) flat = flat * shape[d] + c[static_cast<size_t>(d)];
  return flat;
}

// Transpose by the definition: out[c] = in[c'] with c'[perm[k]] = c[k].
template <typename T>
std::vector<T> TransposeRef(const Tensor& in, const std::vector<int64_t>& perm) {
  Shape out_shape;
  for (int64_t p : perm) out_shape.AddDim(in.shape()[static_cast<int>(p)]);
  std::vector<T> out;
  for (int64_t flat = 0; flat < out_shape.num_elements(); ++flat) {
    const std::vector<int64_t> c = Coords(out_shape, flat);
    std::vector<int64_t> src(c.size());
    for (size_t k = 0; k < perm.size(); ++k) src[static_cast<size_t>(perm[k])] = c[k];
    out.push_back(in.data<T>()[Flat(in.shape(), src)]);
  }
  return out;
}

template <typename T>
void ExpectTransposeMatches(const Tensor& in, std::vector<int64_t> perm) {
  Tensor out = RunOk("Transpose", {in}, {{"perm", perm}}).at(0);
  for (size_t k = 0; k < perm.size(); ++k) {
    ASSERT_EQ(out.shape()[static_cast<int>(k)], in.shape()[static_cast<int>(perm[k])]);
  }
  EXPECT_TRUE(Values<T>(out) == TransposeRef<T>(in, perm))
      << in.shape().ToString() << " perm " << ::testing::PrintToString(perm) << " " << DTypeName(in.dtype());
}

// ---- Transpose ----

TEST(OpsTransposeTest, EveryPermutationOfFourAxes) {
  std::vector<int64_t> perm = {0, 1, 2, 3};
  // Distinct sizes, size-1 axes (dropped by the kernel) and a larger tensor that reaches the
  // tiled path with partial tiles on both sides.
  const Tensor inputs[] = {RandomTensor({2, 3, 4, 5}, 1), RandomTensor({1, 3, 1, 5}, 2),
                           RandomTensor({3, 37, 45, 19}, 3)};
  int count = 0;
  do {
    for (const Tensor& in : inputs) ExpectTransposeMatches<float>(in, perm);
    ++count;
  } while (std::next_permutation(perm.begin(), perm.end()));
  EXPECT_EQ(count, 24);
}

TEST(OpsTransposeTest, HotLayoutsAndDTypes) {
  // NCHW <-> NHWC and attention's swaps, on tensors larger than a tile block.
  Tensor nchw = RandomTensor({2, 3, 67, 301}, 4);
  ExpectTransposeMatches<float>(nchw, {0, 2, 3, 1});
  Tensor nhwc = RandomTensor({2, 67, 301, 3}, 5);
  ExpectTransposeMatches<float>(nhwc, {0, 3, 1, 2});
  Tensor heads = RandomTensor({2, 4, 70, 33}, 6);
  ExpectTransposeMatches<float>(heads, {0, 1, 3, 2});
  ExpectTransposeMatches<float>(heads, {0, 2, 1, 3});
  ExpectTransposeMatches<float>(RandomTensor({1, 600, 300}, 7), {0, 2, 1});  // one large 2-D transpose
  // Every element size: 1, 2, 4 and 8 bytes, and strings.
  Tensor ints = RandomIntTensor<int64_t>({5, 40, 36}, 8, -1000, 1000);
  ExpectTransposeMatches<int64_t>(ints, {2, 0, 1});
  ExpectTransposeMatches<int64_t>(ints, {1, 2, 0});
  Tensor i32 = RandomIntTensor<int32_t>({33, 65}, 9, -5, 5);
  ExpectTransposeMatches<int32_t>(i32, {1, 0});
  Tensor flags = RunOk("Cast", {i32}, {{"dtype", DType::kBool}}).at(0);
  ExpectTransposeMatches<bool>(flags, {1, 0});
  Tensor bf = RunOk("Cast", {RandomTensor({3, 50, 41}, 10)}, {{"dtype", DType::kBFloat16}}).at(0);
  Tensor bf_out = RunOk("Transpose", {bf}, {{"perm", std::vector<int64_t>{2, 1, 0}}}).at(0);
  for (int64_t flat = 0; flat < bf_out.num_elements(); ++flat) {
    const std::vector<int64_t> c = Coords(bf_out.shape(), flat);
    ASSERT_EQ(bf_out.data<bfloat16>()[flat].bits, bf.data<bfloat16>()[(c[2] * 50 + c[1]) * 41 + c[0]].bits);
  }
  Tensor words = Tensor::FromVector<std::string>({2, 3}, {"a", "b", "c", "d", "e", "f"});
  ExpectTransposeMatches<std::string>(words, {1, 0});
  Tensor doubles = RunOk("Cast", {RandomTensor({4, 70, 3}, 11)}, {{"dtype", DType::kFloat64}}).at(0);
  ExpectTransposeMatches<double>(doubles, {0, 2, 1});
}

TEST(OpsTransposeTest, DefaultsEdgesAndErrors) {
  Tensor x = RandomTensor({2, 3, 4}, 1);
  Tensor reversed = RunOk("Transpose", {x}).at(0);  // no perm: the axes reversed
  EXPECT_EQ(reversed.shape(), (Shape{4, 3, 2}));
  EXPECT_EQ(Values<float>(reversed), TransposeRef<float>(x, {2, 1, 0}));
  Tensor identity = RunOk("Transpose", {x}, {{"perm", std::vector<int64_t>{0, 1, 2}}}).at(0);
  EXPECT_TRUE(identity.BitwiseEqual(x));
  EXPECT_NE(identity.raw_data(), x.raw_data());  // writes its output: aliases nothing
  EXPECT_FALSE(OpRegistry::Global().Find("Transpose")->aliases_input);
  EXPECT_EQ(RunOk("Transpose", {Tensor::Scalar<float>(3)}).at(0).data<float>()[0], 3.0f);
  EXPECT_EQ(RunOk("Transpose", {RandomTensor({0, 3}, 1)}).at(0).shape(), (Shape{3, 0}));

  auto error = [&](std::vector<int64_t> perm, const char* fragment) {
    ExpectError(KernelStatus("Transpose", {x}, {{"perm", perm}}), StatusCode::kInvalidArgument, fragment);
  };
  error({0, 1}, "does not fit an input of rank 3");
  error({0, 1, 1}, "not a permutation");
  error({0, 1, 3}, "not a permutation");
  error({-1, 0, 1}, "not a permutation");
  auto spec = Infer("Transpose", {{DType::kFloat32, {-1, 3, -1, 8}}}, {{"perm", std::vector<int64_t>{0, 3, 1, 2}}});
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ((*spec)[0].shape, (Shape{-1, 8, 3, -1}));
}

// ---- Max, Min, Prod ----

// Values as doubles, float64 included.
std::vector<double> Doubles(const Tensor& t) {
  if (t.dtype() == DType::kFloat64) return Values<double>(t);
  return op_test::ToDouble(t);
}

// The reduction by the definition, over the axes in `reduced`, in float64.
std::vector<double> ReduceRef(const Tensor& x, const std::vector<bool>& reduced, const char* op) {
  const Shape& s = x.shape();
  Shape kept;
  for (int d = 0; d < s.rank(); ++d) kept.AddDim(reduced[static_cast<size_t>(d)] ? 1 : s[d]);
  const double init = std::string(op) == "Max" ? -INFINITY : std::string(op) == "Min" ? INFINITY : 1.0;
  std::vector<double> out(static_cast<size_t>(kept.num_elements()), init);
  const std::vector<double> v = Doubles(x);
  for (int64_t flat = 0; flat < s.num_elements(); ++flat) {
    std::vector<int64_t> c = Coords(s, flat);
    for (int d = 0; d < s.rank(); ++d) {
      if (reduced[static_cast<size_t>(d)]) c[static_cast<size_t>(d)] = 0;
    }
    double& o = out[static_cast<size_t>(Flat(kept, c))];
    const double e = v[static_cast<size_t>(flat)];
    o = std::string(op) == "Max" ? std::max(o, e) : std::string(op) == "Min" ? std::min(o, e) : o * e;
  }
  return out;
}

TEST(OpsReduceTest, HandWorked) {
  Tensor x = Tensor::FromVector<float>({2, 3}, {1, 5, 3, 4, 2, 6});
  auto reduce = [&](const char* op, AttrMap attrs) { return RunOk(op, {x}, attrs).at(0); };
  EXPECT_EQ(Values<float>(reduce("Max", {})), (std::vector<float>{6}));
  EXPECT_EQ(reduce("Max", {}).shape(), (Shape{}));
  EXPECT_EQ(Values<float>(reduce("Max", {{"axes", std::vector<int64_t>{0}}})), (std::vector<float>{4, 5, 6}));
  Tensor kept = reduce("Max", {{"axes", std::vector<int64_t>{1}}, {"keep_dims", true}});
  EXPECT_EQ(kept.shape(), (Shape{2, 1}));
  EXPECT_EQ(Values<float>(kept), (std::vector<float>{5, 6}));
  EXPECT_EQ(Values<float>(reduce("Min", {{"axes", std::vector<int64_t>{-1}}})), (std::vector<float>{1, 2}));
  EXPECT_EQ(Values<float>(reduce("Prod", {{"axes", std::vector<int64_t>{1}}})), (std::vector<float>{15, 48}));
  EXPECT_EQ(Values<float>(reduce("Prod", {{"keep_dims", true}})), (std::vector<float>{720}));
  Tensor none = reduce("Min", {{"axes", std::vector<int64_t>{}}});  // an empty list reduces nothing
  EXPECT_TRUE(none.BitwiseEqual(x));
  // Reducing nothing gives the identity.
  Tensor empty = RandomTensor({0, 3}, 1);
  EXPECT_EQ(Values<float>(RunOk("Max", {empty}, {{"axes", std::vector<int64_t>{0}}}).at(0)),
            std::vector<float>(3, -INFINITY));
  EXPECT_EQ(Values<float>(RunOk("Min", {empty}).at(0)), std::vector<float>{INFINITY});
  EXPECT_EQ(Values<float>(RunOk("Prod", {empty}).at(0)), std::vector<float>{1});
  Tensor empty_ints = RandomIntTensor<int32_t>({2, 0}, 1, 0, 1);
  EXPECT_EQ(Values<int32_t>(RunOk("Max", {empty_ints}, {{"axes", std::vector<int64_t>{1}}}).at(0)),
            std::vector<int32_t>(2, std::numeric_limits<int32_t>::min()));
  EXPECT_EQ(RunOk("Max", {empty_ints}, {{"axes", std::vector<int64_t>{0}}}).at(0).shape(), (Shape{0}));
  // NaN wins, as numpy's.
  Tensor nan = Tensor::FromVector<float>({3}, {1, NAN, 2});
  EXPECT_TRUE(std::isnan(RunOk("Max", {nan}).at(0).data<float>()[0]));
  EXPECT_TRUE(std::isnan(RunOk("Min", {nan}).at(0).data<float>()[0]));
  // Integer products wrap.
  Tensor big = Tensor::FromVector<int64_t>({2}, {int64_t{1} << 62, 4});
  EXPECT_EQ(Values<int64_t>(RunOk("Prod", {big}).at(0)), (std::vector<int64_t>{0}));
  EXPECT_EQ(Values<int64_t>(RunOk("Max", {Tensor::Scalar<int64_t>(-7)}).at(0)), (std::vector<int64_t>{-7}));

  ExpectError(KernelStatus("Max", {Tensor::FromVector<bool>({1}, {true})}), StatusCode::kInvalidArgument,
              "not supported");
  ExpectError(KernelStatus("Prod", {x}, {{"axes", std::vector<int64_t>{2}}}), StatusCode::kInvalidArgument,
              "Prod: axis 2 is out of range");
  auto spec = Infer("Min", {{DType::kInt64, {-1, 4, 5}}}, {{"axes", std::vector<int64_t>{1}}});
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ((*spec)[0], (TensorSpec{DType::kInt64, Shape{-1, 5}}));
}

TEST(OpsReduceTest, EveryAxisSetMatchesReference) {
  Tensor f = RandomTensor({4, 5, 6}, 2, 0.5f, 1.5f);
  Tensor ints = RandomIntTensor<int32_t>({4, 5, 6}, 3, -9, 9);
  Tensor longs = RandomIntTensor<int64_t>({4, 5, 6}, 4, -1, 1);  // products that stay exact
  Tensor doubles = RunOk("Cast", {f}, {{"dtype", DType::kFloat64}}).at(0);
  for (int mask = 0; mask < 8; ++mask) {
    std::vector<int64_t> axes;
    std::vector<bool> reduced(3);
    for (int d = 0; d < 3; ++d) {
      reduced[static_cast<size_t>(d)] = (mask >> d) & 1;
      if (reduced[static_cast<size_t>(d)]) axes.push_back(d);
    }
    for (const char* op : {"Max", "Min", "Prod"}) {
      for (const Tensor* x : {&f, &ints, &longs, &doubles}) {
        if (x == &ints && std::string(op) == "Prod") continue;  // would wrap: HandWorked checks that
        Tensor out = RunOk(op, {*x}, {{"axes", axes}, {"keep_dims", true}}).at(0);
        const std::vector<double> want = ReduceRef(*x, reduced, op);
        const std::vector<double> got = Doubles(out);
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < want.size(); ++i) {
          // A float32 product of k factors is rounded k times: within (k + 1) u, k <= 120 here.
          const double tol = x->dtype() == DType::kFloat32 && std::string(op) == "Prod" ? 121 * op_test::kU : 0;
          ASSERT_NEAR(got[i], want[i], tol * std::fabs(want[i]))
              << op << " mask " << mask << " " << DTypeName(x->dtype());
        }
      }
    }
  }
}

// Sum and Mean over middle axes (NHWC's global pooling) take the kept columns 64, 32 and 16 at
// a time and the rest one by one, in parallel over the column chunks: each output still adds
// its terms in the order they lie, the same bits as a plain loop, whatever the width, the
// depth, the batch and the thread count.
TEST(OpsReduceTest, MiddleAxisSumsAddInOrderForEveryWidth) {
  ThreadPool one(1), three(3);
  for (int64_t outer : {1, 3}) {
    for (int64_t middle : {41, 150}) {
      for (int64_t width : {1, 7, 16, 33, 64, 100, 150}) {
        const Tensor x = RandomTensor({outer, middle, width}, 7 + static_cast<uint64_t>(width), -2.0f, 2.0f);
        const auto v = x.data<float>();
        std::vector<float> want(static_cast<size_t>(outer * width));
        for (int64_t o = 0; o < outer; ++o) {
          for (int64_t j = 0; j < width; ++j) {
            float sum = 0.0f;
            for (int64_t m = 0; m < middle; ++m) sum += v[static_cast<size_t>((o * middle + m) * width + j)];
            want[static_cast<size_t>(o * width + j)] = sum;
          }
        }
        for (ThreadPool* pool : {&one, &three}) {
          const Tensor got = op_test::RunOn(*pool, "Sum", {x}, {{"axes", std::vector<int64_t>{1}}});
          ASSERT_EQ(got.num_elements(), outer * width);
          EXPECT_TRUE(std::equal(want.begin(), want.end(), got.data<float>().begin()))
              << outer << " x " << middle << " x " << width;
        }
      }
    }
  }
}

// ---- ArgMin, and ArgMax's ONNX attrs ----

TEST(OpsReduceTest, ArgMinArgMaxAttrs) {
  Tensor x = Tensor::FromVector<float>({2, 3}, {3, 1, 1, 2, 2, 0});
  EXPECT_EQ(Values<int64_t>(RunOk("ArgMin", {x}).at(0)), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(Values<int64_t>(RunOk("ArgMin", {x}, {{"select_last_index", true}}).at(0)), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(Values<int64_t>(RunOk("ArgMax", {x}).at(0)), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(Values<int64_t>(RunOk("ArgMax", {x}, {{"select_last_index", true}}).at(0)), (std::vector<int64_t>{0, 1}));
  Tensor kept = RunOk("ArgMin", {x}, {{"axis", int64_t{0}}, {"keep_dims", true}}).at(0);
  EXPECT_EQ(kept.shape(), (Shape{1, 3}));
  EXPECT_EQ(Values<int64_t>(kept), (std::vector<int64_t>{1, 0, 1}));
  Tensor nan = Tensor::FromVector<float>({4}, {1, NAN, -5, NAN});
  EXPECT_EQ(Values<int64_t>(RunOk("ArgMin", {nan}).at(0)), (std::vector<int64_t>{1}));
  EXPECT_EQ(Values<int64_t>(RunOk("ArgMin", {nan}, {{"select_last_index", true}}).at(0)), (std::vector<int64_t>{3}));
  Tensor longs = Tensor::FromVector<int64_t>({3}, {4, -2, 9});
  EXPECT_EQ(Values<int64_t>(RunOk("ArgMin", {longs}).at(0)), (std::vector<int64_t>{1}));
  Tensor doubles = RunOk("Cast", {x}, {{"dtype", DType::kFloat64}}).at(0);
  EXPECT_EQ(Values<int64_t>(RunOk("ArgMax", {doubles}, {{"axis", int64_t{0}}}).at(0)), (std::vector<int64_t>{0, 1, 0}));
  ExpectError(KernelStatus("ArgMin", {RandomTensor({2, 0}, 1)}), StatusCode::kInvalidArgument, "ArgMin: axis -1");
  auto spec = Infer("ArgMax", {{DType::kFloat32, {-1, 10}}}, {{"keep_dims", true}});
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ((*spec)[0].shape, (Shape{-1, 1}));
}

// ---- Gather along any axis, with negative indices ----

TEST(OpsGatherTest, AxisAndNegativeIndices) {
  Tensor p = Tensor::FromVector<float>({2, 3}, {0, 1, 2, 3, 4, 5});
  auto gather = [&](Tensor idx, int64_t axis) {
    return RunOk("Gather", {p, idx}, {{"axis", axis}, {"negative_indices", true}}).at(0);
  };
  Tensor cols = gather(I64({2, 0}), 1);
  EXPECT_EQ(cols.shape(), (Shape{2, 2}));
  EXPECT_EQ(Values<float>(cols), (std::vector<float>{2, 0, 5, 3}));
  Tensor one = gather(Tensor::Scalar<int64_t>(1), 1);  // a scalar index drops the axis
  EXPECT_EQ(one.shape(), (Shape{2}));
  EXPECT_EQ(Values<float>(one), (std::vector<float>{1, 4}));
  EXPECT_EQ(Values<float>(gather(I64({-1}), 0)), (std::vector<float>{3, 4, 5}));
  EXPECT_EQ(Values<float>(gather(Tensor::FromVector<int32_t>({2}, {-3, -1}), -1)), (std::vector<float>{0, 2, 3, 5}));
  // x.shape[0] as exported graphs compute it: an int64 vector, a scalar index, a scalar out.
  Tensor dims = I64({8, 16, 32});
  Tensor batch = RunOk("Gather", {dims, Tensor::Scalar<int64_t>(0)}).at(0);
  EXPECT_EQ(batch.shape(), (Shape{}));
  EXPECT_EQ(batch.data<int64_t>()[0], 8);
  Tensor words = Tensor::FromVector<std::string>({2, 2}, {"a", "b", "c", "d"});
  EXPECT_EQ(Values<std::string>(RunOk("Gather", {words, I64({1})}, {{"axis", int64_t{1}}}).at(0)),
            (std::vector<std::string>{"b", "d"}));
  Tensor flags = Tensor::FromVector<bool>({3}, {true, false, true});
  EXPECT_EQ(Values<bool>(RunOk("Gather", {flags, I64({-2, 2})}, {{"negative_indices", true}}).at(0)),
            (std::vector<bool>{false, true}));
  // Without negative_indices (TensorFlow's Gather, and bundles) a negative index is an error.
  op_test::ExpectError(RunOp("Gather", std::vector<Tensor>{flags, I64({-1})}).status(), StatusCode::kInvalidArgument,
                       "out of range [0, 3)");
  // Against the definition on a 4-D case, for each axis.
  Tensor big = RandomTensor({3, 4, 5, 6}, 7);
  Tensor idx = RandomIntTensor<int64_t>({2, 3}, 8, -3, 2);
  for (int axis = 0; axis < 4; ++axis) {
    Tensor out = RunOk("Gather", {big, idx}, {{"axis", int64_t{axis}}, {"negative_indices", true}}).at(0);
    ASSERT_EQ(out.shape().rank(), 5);
    for (int64_t flat = 0; flat < out.num_elements(); ++flat) {
      const std::vector<int64_t> c = Coords(out.shape(), flat);
      std::vector<int64_t> src;
      for (int d = 0; d < axis; ++d) src.push_back(c[static_cast<size_t>(d)]);
      int64_t i = idx.data<int64_t>()[c[static_cast<size_t>(axis)] * 3 + c[static_cast<size_t>(axis) + 1]];
      src.push_back(i < 0 ? i + big.shape()[axis] : i);
      for (int d = axis + 1; d < 4; ++d) src.push_back(c[static_cast<size_t>(d) + 1]);
      ASSERT_EQ(out.data<float>()[flat], big.data<float>()[Flat(big.shape(), src)]) << axis;
    }
  }

  ExpectError(KernelStatus("Gather", {p, I64({3})}, {{"axis", int64_t{1}}}), StatusCode::kInvalidArgument,
              "indices[0] = 3 is out of range [0, 3)");
  ExpectError(KernelStatus("Gather", {p, I64({-3})}, {{"negative_indices", true}}), StatusCode::kInvalidArgument,
              "= -3 is out of range [-2, 2)");
  ExpectError(KernelStatus("Gather", {p, I64({0})}, {{"axis", int64_t{2}}}), StatusCode::kInvalidArgument,
              "axis 2 is out of range");
  auto spec = Infer("Gather", {{DType::kFloat32, {-1, 7, 9}}, {DType::kInt64, {4}}}, {{"axis", int64_t{1}}});
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ((*spec)[0].shape, (Shape{-1, 4, 9}));
  // GatherGrad sums rows gathered with negative indices into the rows they name.
  Tensor dy = Tensor::FromVector<float>({2, 3}, {1, 1, 1, 2, 2, 2});
  Tensor grad = RunOk("GatherGrad", {dy, I64({-1, 1}), p}).at(0);
  EXPECT_EQ(Values<float>(grad), (std::vector<float>{0, 0, 0, 3, 3, 3}));
}

}  // namespace
}  // namespace lockstep
