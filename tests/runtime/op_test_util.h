// Shared helpers for the op tests: seeded random tensors, float64 references, and comparison
// with explicit per-element tolerances.
//
// Tolerances are stated in units of u = 2^-24, the float32 unit roundoff: one correctly
// rounded float operation is off by at most u * |result|. A float32 dot product of K terms
// summed in order is off by at most about (K + 1) * u * sum |a_i * b_i| (the classical bound
// gamma_K); tests use that bound, not a guessed epsilon.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/attr.h"
#include "runtime/op_registry.h"
#include "runtime/tensor.h"

namespace lockstep::op_test {

inline constexpr double kU = 0x1p-24;  // float32 unit roundoff
inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
inline constexpr float kInf = std::numeric_limits<float>::infinity();

// The elements of a tensor of element type T (none, and a failure, for another dtype).
template <typename T>
std::vector<T> Values(const Tensor& t) {
  EXPECT_EQ(t.dtype(), DTypeOf<T>::value);
  if (t.dtype() != DTypeOf<T>::value) return {};
  return std::vector<T>(t.data<T>().begin(), t.data<T>().end());
}

// An int64 vector.
inline Tensor I64(std::vector<int64_t> v) {
  return Tensor::FromVector<int64_t>(Shape{static_cast<int64_t>(v.size())}, v);
}

inline std::vector<float> RandomFloats(int64_t n, uint64_t seed, float lo = -1.0f,
                                       float hi = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

inline Tensor RandomTensor(const Shape& shape, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  return Tensor::FromVector<float>(shape, RandomFloats(shape.num_elements(), seed, lo, hi));
}

template <typename T>
Tensor RandomIntTensor(const Shape& shape, uint64_t seed, int64_t lo, int64_t hi) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> dist(lo, hi);
  std::vector<T> v(static_cast<size_t>(shape.num_elements()));
  for (T& x : v) x = static_cast<T>(dist(rng));
  return Tensor::FromVector<T>(shape, v);
}

// Values of a numeric tensor as doubles (exact for every dtype but huge int64s).
inline std::vector<double> ToDouble(const Tensor& t) {
  std::vector<double> out;
  out.reserve(static_cast<size_t>(t.num_elements()));
  switch (t.dtype()) {
    case DType::kFloat32:
      for (float v : t.data<float>()) out.push_back(v);
      break;
    case DType::kBFloat16:
      for (bfloat16 v : t.data<bfloat16>()) out.push_back(Bfloat16ToFloat(v));
      break;
    case DType::kInt32:
      for (int32_t v : t.data<int32_t>()) out.push_back(v);
      break;
    case DType::kInt64:
      for (int64_t v : t.data<int64_t>()) out.push_back(static_cast<double>(v));
      break;
    case DType::kBool:
      for (bool v : t.data<bool>()) out.push_back(v ? 1.0 : 0.0);
      break;
    default: ADD_FAILURE() << "ToDouble: unsupported dtype " << DTypeName(t.dtype());
  }
  return out;
}

// Runs an op that must succeed; on failure records it and returns no outputs.
inline std::vector<Tensor> RunOk(std::string_view op, const std::vector<Tensor>& inputs,
                                 const AttrMap& attrs = {}) {
  StatusOr<std::vector<Tensor>> out = RunOp(op, inputs, attrs);
  if (!out.ok()) {
    ADD_FAILURE() << op << " failed: " << out.status().ToString();
    return {};
  }
  return std::move(out).value();
}

// The single output of an op that must succeed (an empty tensor when it failed).
inline Tensor Run1(std::string_view op, const std::vector<Tensor>& inputs, const AttrMap& attrs = {}) {
  std::vector<Tensor> out = RunOk(op, inputs, attrs);
  return out.size() == 1 ? out[0] : Tensor();
}

// The kernel alone, without shape inference first, as the executor calls it: its Status.
inline Status KernelStatus(std::string_view op, const std::vector<Tensor>& inputs, const AttrMap& attrs = {}) {
  const OpDef* def = OpRegistry::Global().Find(op);
  if (def == nullptr) return NotFound(std::string(op));
  std::vector<const Tensor*> pointers;
  for (const Tensor& t : inputs) pointers.push_back(&t);
  std::vector<Tensor> outputs(static_cast<size_t>(def->num_outputs));
  KernelContext ctx(pointers, attrs, ThreadPool::Default(), outputs, nullptr);
  return def->compute(ctx);
}

// Runs an op on an explicit pool (to compare thread counts).
inline Tensor RunOn(ThreadPool& pool, std::string_view op, const std::vector<Tensor>& inputs,
                    const AttrMap& attrs = {}) {
  const OpDef* def = OpRegistry::Global().Find(op);
  if (def == nullptr) {
    ADD_FAILURE() << "no op " << op;
    return Tensor();
  }
  StatusOr<std::vector<Tensor>> out = RunOp(*def, inputs, attrs, pool);
  if (!out.ok()) {
    ADD_FAILURE() << op << " failed: " << out.status().ToString();
    return Tensor();
  }
  return out->at(0);
}

// Runs shape inference alone.
inline StatusOr<std::vector<TensorSpec>> Infer(std::string_view op,
                                               const std::vector<TensorSpec>& in,
                                               const AttrMap& attrs = {}) {
  const OpDef* def = OpRegistry::Global().Find(op);
  if (def == nullptr) return NotFound("no op " + std::string(op));
  return def->infer(ShapeInferenceContext{in, attrs});
}

// Expects `status` to fail with `code` and a message containing `fragment`.
inline void ExpectError(const Status& status, StatusCode code, std::string_view fragment) {
  EXPECT_EQ(status.code(), code) << status.ToString();
  EXPECT_NE(status.message().find(fragment), std::string::npos)
      << "message '" << status.message() << "' lacks '" << fragment << "'";
}

// Element-wise comparison: |actual - expected| <= tolerance[i]. A NaN expectation needs a NaN;
// an infinite one needs the same infinity.
inline void ExpectNear(const Tensor& actual, const Shape& shape,
                       const std::vector<double>& expected, const std::vector<double>& tolerance,
                       std::string_view what = "") {
  ASSERT_EQ(actual.shape(), shape) << what;
  const std::vector<double> got = ToDouble(actual);
  ASSERT_EQ(got.size(), expected.size()) << what;
  ASSERT_EQ(tolerance.size(), expected.size()) << what;
  int failures = 0;
  for (size_t i = 0; i < got.size() && failures < 8; ++i) {
    const double e = expected[i], g = got[i];
    bool ok;
    if (std::isnan(e)) {
      ok = std::isnan(g);
    } else if (std::isinf(e)) {
      ok = g == e;
    } else {
      ok = std::fabs(g - e) <= tolerance[i];
    }
    if (!ok) {
      ++failures;
      ADD_FAILURE() << what << " element " << i << ": got " << g << ", expected " << e
                    << " (tolerance " << tolerance[i] << ", error " << std::fabs(g - e) << ")";
    }
  }
}

// Same, with tolerance rel * |expected| + abs everywhere.
inline void ExpectNear(const Tensor& actual, const Shape& shape,
                       const std::vector<double>& expected, double rel, double abs = 0.0,
                       std::string_view what = "") {
  std::vector<double> tol(expected.size());
  for (size_t i = 0; i < expected.size(); ++i) tol[i] = rel * std::fabs(expected[i]) + abs;
  ExpectNear(actual, shape, expected, tol, what);
}

// Flat index into an input of shape `in` for flat output index `flat` of the broadcast shape
// `out` (numpy rules), computed directly from the definition.
inline int64_t BroadcastSource(const Shape& out, const Shape& in, int64_t flat) {
  int64_t src = 0, stride = 1;
  for (int d = out.rank() - 1; d >= 0; --d) {
    const int64_t coord = flat % out.dim(d);
    flat /= out.dim(d);
    const int id = d - (out.rank() - in.rank());
    if (id < 0) continue;
    if (in.dim(id) != 1) src += coord * stride;
    stride *= in.dim(id);
  }
  return src;
}

// TensorFlow's output size and leading padding for one spatial dimension.
inline void TfWindow(int64_t in, int64_t k, int64_t s, bool same, int64_t* out, int64_t* pad) {
  if (same) {
    *out = (in + s - 1) / s;
    *pad = std::max<int64_t>((*out - 1) * s + k - in, 0) / 2;
  } else {
    *out = (in - k + s) / s;  // ceil((in - k + 1) / s)
    *pad = 0;
  }
}

}  // namespace lockstep::op_test
