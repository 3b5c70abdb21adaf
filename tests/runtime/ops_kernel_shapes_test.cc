// The executor calls kernels directly, without re-running shape inference on the concrete
// shapes of a request: a graph declared with -1 dimensions accepts shapes that do not fit
// together. So each kernel must check the shapes it is given. This test calls every kernel
// on thousands of random shape combinations and demands that it agree with shape inference:
// where inference rejects the shapes the kernel fails cleanly, and where inference accepts
// them the kernel produces exactly the inferred shape (where that has a -1, for a size that
// depends on an input's values, any size). Run under ASan, it also proves no
// kernel reads or writes out of bounds on the way.
#include <gtest/gtest.h>

#include <random>

#include "runtime/op_registry.h"
#include "op_test_util.h"

namespace lockstep {
namespace {

struct InputTemplate {
  DType dtype;
  int min_rank, max_rank;
};

struct OpCase {
  const char* op;
  std::vector<InputTemplate> inputs;
  std::vector<AttrMap> attr_choices;
  bool value_checks = false;  // the kernel may also reject values (indices out of range)
};

const InputTemplate kAnyFloat{DType::kFloat32, 0, 3};
const InputTemplate kMatrix{DType::kFloat32, 2, 2};
const InputTemplate kVector{DType::kFloat32, 1, 1};
const InputTemplate kImage{DType::kFloat32, 3, 5};  // rank 4 mostly; 3 and 5 must be rejected
const InputTemplate kAnyDouble{DType::kFloat64, 0, 3};
const InputTemplate kAnyInt32{DType::kInt32, 0, 3};
const InputTemplate kAnyInt64{DType::kInt64, 0, 3};
const InputTemplate kAnyBool{DType::kBool, 0, 3};
const InputTemplate kIntVector{DType::kInt64, 1, 1};  // a shape, starts, pads: values -1..4
const InputTemplate kIntScalar{DType::kInt64, 0, 1};  // rank 1 must be rejected

std::vector<OpCase> Cases() {
  const std::vector<AttrMap> none = {AttrMap{}};
  std::vector<AttrMap> matmul = {AttrMap{}, AttrMap{{"transpose_a", true}}, AttrMap{{"transpose_b", true}},
                                 AttrMap{{"transpose_a", true}, {"transpose_b", true}}};
  std::vector<AttrMap> fused;
  for (AttrMap m : matmul) {
    m.Set("activation", std::string("relu"));
    fused.push_back(m);
  }
  std::vector<AttrMap> conv, pool;
  const std::vector<AttrMap> reduce = {AttrMap{}, AttrMap{{"axes", std::vector<int64_t>{0}}},
                                       AttrMap{{"axes", std::vector<int64_t>{-1}}, {"keep_dims", true}},
                                       AttrMap{{"axes", std::vector<int64_t>{}}}};
  for (const char* padding : {"SAME", "VALID"}) {
    for (int64_t s : {1, 2}) {
      conv.push_back(AttrMap{{"strides", std::vector<int64_t>{s, s}}, {"padding", std::string(padding)}});
      pool.push_back(AttrMap{{"ksize", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{s, s}},
                             {"padding", std::string(padding)}});
    }
  }
  return {
      {"Add", {kAnyFloat, kAnyFloat}, none},
      {"Sub", {kAnyFloat, kAnyFloat}, none},
      {"Mul", {kAnyFloat, kAnyFloat}, none},
      {"Div", {kAnyFloat, kAnyFloat}, none},
      {"BiasAdd", {kAnyFloat, kVector}, none},
      {"Normalize", {kMatrix, kVector, kVector}, none},
      {"Relu", {kAnyFloat}, none},
      {"Gelu", {kAnyFloat}, none},
      {"Sigmoid", {kAnyFloat}, none},
      {"Tanh", {kAnyFloat}, none},
      {"Relu6", {kAnyFloat}, none},
      {"Elu", {kAnyFloat}, none},
      {"Selu", {kAnyFloat}, none},
      {"Softmax", {kAnyFloat}, none},
      {"LogSoftmax", {kAnyFloat}, none},
      {"MatMul", {kMatrix, kMatrix}, matmul},
      {"BatchMatMul", {InputTemplate{DType::kFloat32, 2, 4}, InputTemplate{DType::kFloat32, 2, 4}}, matmul},
      {"FusedMatMul", {kMatrix, kMatrix}, fused},
      {"FusedMatMul", {kMatrix, kMatrix, kVector}, fused},
      {"Identity", {kAnyFloat}, none},
      {"Reshape", {kAnyFloat}, {AttrMap{{"shape", std::vector<int64_t>{-1, 2}}}, AttrMap{{"shape", std::vector<int64_t>{3, -1}}},
                                AttrMap{{"shape", std::vector<int64_t>{2, 2}}}}},
      {"Flatten", {kAnyFloat}, none},
      {"Squeeze", {kAnyFloat}, {AttrMap{}, AttrMap{{"axes", std::vector<int64_t>{0}}}, AttrMap{{"axes", std::vector<int64_t>{-1, 1}}}}},
      {"ExpandDims", {kAnyFloat}, {AttrMap{{"axis", int64_t{0}}}, AttrMap{{"axis", int64_t{-1}}}, AttrMap{{"axis", int64_t{2}}}}},
      {"Concat", {kAnyFloat, kAnyFloat}, {AttrMap{{"axis", int64_t{0}}}, AttrMap{{"axis", int64_t{1}}}, AttrMap{{"axis", int64_t{-1}}}}},
      {"Cast", {kAnyFloat}, {AttrMap{{"dtype", DType::kInt32}}, AttrMap{{"dtype", DType::kBFloat16}}}},
      {"ArgMax", {kAnyFloat}, {AttrMap{}, AttrMap{{"axis", int64_t{0}}}}},
      {"Gather", {{DType::kFloat32, 1, 3}, {DType::kInt32, 0, 2}}, none, /*value_checks=*/true},
      {"Conv2D", {kImage, kImage}, conv},
      {"DepthwiseConv2D", {kImage, kImage}, conv},
      {"MaxPool2D", {kImage}, pool},
      {"MaxPoolWithIndices", {kImage},
       {AttrMap{{"kernel_shape", std::vector<int64_t>{2, 2}}},
        AttrMap{{"kernel_shape", std::vector<int64_t>{2, 1}}, {"strides", std::vector<int64_t>{2, 1}},
                {"pads", std::vector<int64_t>{1, 0, 0, 1}}, {"ceil_mode", true}, {"storage_order", int64_t{1}}}}},
      {"AvgPool2D", {kImage}, pool},
      // Element-wise ops (elementwise_ops.cc) and the integer side of the arithmetic. Integer
      // Div is left out: random divisors include zeros.
      {"Add", {kAnyInt64, kAnyInt64}, none},
      {"Mul", {kAnyInt32, kAnyInt32}, none},
      {"Sqrt", {kAnyFloat}, none},
      {"Exp", {kAnyDouble}, none},
      {"Log", {kAnyFloat}, none},
      {"Reciprocal", {kAnyFloat}, none},
      {"Floor", {kAnyFloat}, none},
      {"Ceil", {kAnyFloat}, none},
      {"Erf", {kAnyFloat}, none},
      {"Softplus", {kAnyFloat}, none},
      {"Sin", {kAnyFloat}, none},
      {"Cos", {kAnyFloat}, none},
      {"Neg", {kAnyInt32}, none},
      {"Abs", {kAnyInt64}, none},
      {"Sign", {kAnyFloat}, none},
      {"LeakyRelu", {kAnyFloat}, {AttrMap{}, AttrMap{{"alpha", 0.2}}}},
      {"HardSigmoid", {kAnyFloat}, {AttrMap{}, AttrMap{{"alpha", 0.1}, {"beta", 0.6}}}},
      {"HardSwish", {kAnyFloat}, none},
      {"ThresholdedRelu", {kAnyFloat}, {AttrMap{}, AttrMap{{"alpha", 0.5}}}},
      {"Clip", {kAnyFloat}, {AttrMap{}, AttrMap{{"min", 0.0}}, AttrMap{{"min", -1.0}, {"max", 1.0}}}},
      {"Clip", {kAnyInt64}, {AttrMap{{"min", 0.0}, {"max", 2.0}}}},
      {"Not", {kAnyBool}, none},
      {"Pow", {kAnyFloat, kAnyFloat}, none},
      {"Minimum", {kAnyFloat, kAnyFloat}, none},
      {"Maximum", {kAnyInt32, kAnyInt32}, none},
      {"Equal", {kAnyBool, kAnyBool}, none},
      {"Less", {kAnyInt64, kAnyInt64}, none},
      {"Greater", {kAnyFloat, kAnyFloat}, none},
      {"LessEqual", {kAnyDouble, kAnyDouble}, none},
      {"GreaterEqual", {kAnyInt32, kAnyInt32}, none},
      {"And", {kAnyBool, kAnyBool}, none},
      {"Or", {kAnyBool, kAnyBool}, none},
      {"Xor", {kAnyBool, kAnyBool}, none},
      {"Where", {kAnyBool, kAnyFloat, kAnyFloat}, none},
      {"Where", {kAnyBool, kAnyInt64, kAnyInt64}, none},
      // Shape and layout ops (shape_ops.cc, slice_ops.cc, transpose_ops.cc, reduce_ops.cc).
      // Those whose output shape depends on an input's values (Reshape given its target as an
      // input, Expand, Tile, Slice, Pad, ConstantOfShape, Range) have -1 dimensions in their
      // inferred shapes, which the kernel's shape must match; values the kernel rejects
      // (negative sizes, a zero step or delta, repeated axes) are its value checks.
      {"Shape", {kAnyFloat},
       {AttrMap{}, AttrMap{{"start", int64_t{1}}}, AttrMap{{"start", int64_t{-2}}, {"end", int64_t{-1}}}}},
      {"Transpose", {kAnyFloat},
       {AttrMap{}, AttrMap{{"perm", std::vector<int64_t>{1, 0}}}, AttrMap{{"perm", std::vector<int64_t>{0, 2, 1}}},
        AttrMap{{"perm", std::vector<int64_t>{2, 0, 1}}}}},
      {"Max", {kAnyFloat}, reduce},
      {"Min", {kAnyInt64}, reduce},
      {"Prod", {kAnyDouble}, reduce},
      {"IntegerSum", {kAnyInt64}, reduce},
      {"TfIdfVectorizer", {kAnyInt64},
       {AttrMap{{"min_gram_length", int64_t{1}}, {"max_gram_length", int64_t{2}}, {"max_skip_count", int64_t{1}},
                {"mode", std::string("TFIDF")}, {"ngram_counts", std::vector<int64_t>{0, 2}},
                {"ngram_indexes", std::vector<int64_t>{1, 0, 2}}, {"pool_int64s", std::vector<int64_t>{1, 2, 1, 2}},
                {"weights", std::vector<double>{0.5, 2.0, 3.0}}}}},
      {"ArgMin", {kAnyFloat}, {AttrMap{}, AttrMap{{"axis", int64_t{0}}, {"keep_dims", true}}}},
      {"Gather", {{DType::kFloat32, 1, 3}, {DType::kInt64, 0, 2}},
       {AttrMap{{"axis", int64_t{1}}}, AttrMap{{"axis", int64_t{-1}}}}, /*value_checks=*/true},
      {"Reshape", {kAnyFloat, kIntVector}, {AttrMap{}, AttrMap{{"allowzero", true}}}, /*value_checks=*/true},
      {"Expand", {kAnyFloat, kIntVector}, none, /*value_checks=*/true},
      {"Tile", {kAnyFloat, kIntVector}, none, /*value_checks=*/true},
      {"Slice", {kAnyFloat, kIntVector, kIntVector}, none, /*value_checks=*/true},
      {"Slice", {kAnyFloat, kIntVector, kIntVector, kIntVector}, none, /*value_checks=*/true},
      {"Pad", {kAnyFloat, kIntVector},
       {AttrMap{}, AttrMap{{"mode", std::string("reflect")}}, AttrMap{{"mode", std::string("edge")}}},
       /*value_checks=*/true},
      {"ConstantOfShape", {kIntVector}, none, /*value_checks=*/true},
      {"Range", {kIntScalar, kIntScalar, kIntScalar}, none, /*value_checks=*/true},
  };
}

Tensor RandomInput(const InputTemplate& t, std::mt19937& rng) {
  Shape shape;
  int rank = t.min_rank + static_cast<int>(rng() % (t.max_rank - t.min_rank + 1));
  // Mostly rank 4 for image inputs, so that the interesting cases are common.
  if (t.min_rank == 3 && rng() % 4 != 0) rank = 4;
  for (int i = 0; i < rank; ++i) shape.AddDim(static_cast<int64_t>(rng() % 5));
  switch (t.dtype) {
    case DType::kInt32: return op_test::RandomIntTensor<int32_t>(shape, rng(), -1, 4);
    case DType::kInt64: return op_test::RandomIntTensor<int64_t>(shape, rng(), -1, 4);
    case DType::kBool: {
      std::vector<bool> bits;
      for (int64_t i = 0; i < shape.num_elements(); ++i) bits.push_back(rng() % 2 == 0);
      return Tensor::FromVector<bool>(shape, bits);
    }
    case DType::kFloat64: {
      std::vector<double> values;
      for (float v : op_test::RandomFloats(shape.num_elements(), rng(), 0.5f, 2.0f)) values.push_back(v);
      return Tensor::FromVector<double>(shape, values);
    }
    default: return op_test::RandomTensor(shape, rng(), 0.5f, 2.0f);
  }
}

TEST(OpsKernelShapes, KernelsAgreeWithShapeInferenceOnRandomShapes) {
  const OpRegistry& registry = OpRegistry::Global();
  ThreadPool pool(2);
  std::mt19937 rng(2024);
  for (const OpCase& c : Cases()) {
    const OpDef* op = registry.Find(c.op);
    ASSERT_NE(op, nullptr) << c.op;
    int accepted = 0, rejected = 0;
    for (int trial = 0; trial < 1500; ++trial) {
      const AttrMap& attrs = c.attr_choices[rng() % c.attr_choices.size()];
      std::vector<Tensor> inputs;
      std::vector<TensorSpec> specs;
      std::vector<const Tensor*> pointers;
      for (const InputTemplate& t : c.inputs) inputs.push_back(RandomInput(t, rng));
      for (const Tensor& t : inputs) {
        specs.push_back({t.dtype(), t.shape()});
        pointers.push_back(&t);
      }
      auto inferred = op->infer({specs, attrs});
      std::vector<Tensor> outputs(op->num_outputs);
      KernelContext ctx(pointers, attrs, pool, outputs, nullptr);
      Status status = op->compute(ctx);  // no inference first, as in the executor
      std::string where = std::string(c.op) + " trial " + std::to_string(trial) + " inputs";
      for (const auto& s : specs) where += " " + s.shape.ToString();
      if (!inferred.ok()) {
        ++rejected;
        EXPECT_FALSE(status.ok()) << where << ": inference says '" << inferred.status().message()
                                  << "' but the kernel accepted the shapes";
        continue;
      }
      ++accepted;
      if (!status.ok()) {
        EXPECT_TRUE(c.value_checks) << where << ": inference accepted, kernel said " << status.ToString();
        continue;
      }
      for (int k = 0; k < op->num_outputs; ++k) {
        EXPECT_TRUE(outputs[k].shape().MatchesPattern((*inferred)[k].shape))
            << where << ": kernel made " << outputs[k].shape().ToString() << ", inference said "
            << (*inferred)[k].shape.ToString();
      }
    }
    // Both outcomes must be exercised, or the test proves nothing for this op.
    EXPECT_GT(accepted, 10) << c.op;
    if (c.value_checks) continue;  // Gather's shapes always combine; its indices are what it checks
    if (c.inputs.size() > 1 || std::string(c.op) == "Reshape" || std::string(c.op).find("Pool") != std::string::npos) {
      EXPECT_GT(rejected, 10) << c.op;
    }
  }
}

}  // namespace
}  // namespace lockstep
