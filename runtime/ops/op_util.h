// Small helpers shared by the standard ops' shape functions and kernels. Internal to
// runtime/ops/: nothing outside the op files should need them.
//
// Kernels re-derive their output shapes from the actual input shapes with the same functions
// the shape inference uses: inference may have passed with unknown (-1) dimensions that turn
// out not to fit at run time, and a kernel must answer that with a Status, not a crash.
#pragma once

#include <algorithm>
#include <optional>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/op_registry.h"
#include "runtime/shape.h"
#include "runtime/status.h"
#include "runtime/thread_pool.h"

namespace lockstep {

// Elements per ParallelFor chunk for cheap element-wise loops: below this, waking another
// thread costs more than the work.
inline constexpr int64_t kElementGrain = 16 * 1024;

inline std::string Str(std::string_view s) { return std::string(s); }

// A per-thread scratch buffer of at least `floats` floats that only grows (a kernel's
// im2col block or transformed tiles: no allocation once warm).
inline float* ThreadScratch(int64_t floats) {
  thread_local std::vector<float> scratch;
  if (static_cast<int64_t>(scratch.size()) < floats) scratch.resize(static_cast<size_t>(floats));
  return scratch.data();
}

// Runs fn(block, gemm_pool) for every block in [0, count): in parallel, one block per task and
// each Gemm on its own thread (gemm_pool null), when there are enough blocks to share out;
// else one after the other, each Gemm using the whole pool. Either way each block is computed
// the same, so the result does not depend on the thread count.
template <typename Fn>
void ForEachBlock(ThreadPool& pool, int64_t count, Fn fn) {
  const int64_t threads = pool.num_threads();
  if (threads > 1 && count >= threads) {
    pool.ParallelFor(count, 1, [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) fn(b, nullptr);
    });
  } else {
    for (int64_t b = 0; b < count; ++b) fn(b, &pool);
  }
}

// "[1,-1,3]" for messages about int lists (Shape::ToString for shapes).
inline std::string IntsString(std::span<const int64_t> values) {
  std::string s = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) s += ',';
    s += std::to_string(values[i]);
  }
  s += ']';
  return s;
}

// Specs -> one-element vector, the shape of a single-output shape function's answer.
// float32 or float64: the dtypes that are differentiated (float64 for gradient checks).
inline bool IsReal(DType d) { return d == DType::kFloat32 || d == DType::kFloat64; }

inline Status CheckReal(std::string_view op, std::string_view what, DType dtype) {
  if (IsReal(dtype)) return Status::Ok();
  return InvalidArgument(Str(op) + ": " + Str(what) + " must be float32 or float64, got " + Str(DTypeName(dtype)));
}

// Calls fn(T{}) with T = double for float64, float otherwise.
template <typename Fn>
Status DispatchReal(DType dtype, Fn&& fn) {
  if (dtype == DType::kFloat64) return fn(double{});
  return fn(float{});
}

// An op with a fixed number of inputs and one output.
inline OpDef SimpleOpDef(std::string name, int inputs, ShapeFn infer, KernelFn compute,
                         GradientFn gradient = nullptr) {
  OpDef def;
  def.name = std::move(name);
  def.min_inputs = def.max_inputs = inputs;
  def.infer = infer;
  def.compute = compute;
  def.gradient = gradient;
  return def;
}

inline StatusOr<std::vector<TensorSpec>> Single(DType dtype, const Shape& shape) {
  return std::vector<TensorSpec>{TensorSpec{dtype, shape}};
}

inline Status CheckInputCount(std::string_view op, size_t given, size_t min, size_t max) {
  if (given < min || given > max) {
    return InvalidArgument(
        Str(op) + ": expects " +
        (min == max ? std::to_string(min) : std::to_string(min) + " to " + std::to_string(max)) +
        " inputs, got " + std::to_string(given));
  }
  return Status::Ok();
}

inline Status CheckDType(std::string_view op, std::string_view what, DType actual, DType wanted) {
  if (actual != wanted) {
    return InvalidArgument(Str(op) + ": " + Str(what) + " must be " + Str(DTypeName(wanted)) +
                           ", got " + Str(DTypeName(actual)));
  }
  return Status::Ok();
}

inline Status CheckRank(std::string_view op, std::string_view what, const Shape& s, int rank) {
  if (s.rank() != rank) {
    return InvalidArgument(Str(op) + ": " + Str(what) + " must have rank " + std::to_string(rank) +
                           ", got shape " + s.ToString());
  }
  return Status::Ok();
}

// Maps axis in [-rank, rank) to [0, rank).
inline StatusOr<int> NormalizeAxis(std::string_view op, int64_t axis, int rank) {
  if (axis < -rank || axis >= rank) {
    return InvalidArgument(Str(op) + ": axis " + std::to_string(axis) +
                           " is out of range for rank " + std::to_string(rank));
  }
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

// Two descriptions of one dimension, either possibly unknown (-1): the known one wins; two
// known ones must agree.
inline bool MergeDim(int64_t a, int64_t b, int64_t* out) {
  if (a < 0) {
    *out = b;
    return true;
  }
  if (b >= 0 && a != b) return false;
  *out = a;
  return true;
}

// Two descriptions of one shape, MergeDim by dimension: false when the ranks or two known
// dimensions differ.
inline bool MergeShapes(const Shape& a, const Shape& b, Shape* out) {
  if (a.rank() != b.rank()) return false;
  *out = a;
  for (int d = 0; d < a.rank(); ++d) {
    int64_t merged;
    if (!MergeDim(a.dim(d), b.dim(d), &merged)) return false;
    out->set_dim(d, merged);
  }
  return true;
}

// A fused convolution's bias: float32, one value per output channel.
inline Status CheckChannelBias(std::string_view op, const TensorSpec& bias, int64_t channels) {
  LS_RETURN_IF_ERROR(CheckDType(op, "bias", bias.dtype, DType::kFloat32));
  LS_RETURN_IF_ERROR(CheckRank(op, "bias", bias.shape, 1));
  int64_t n;
  if (!MergeDim(channels, bias.shape.dim(0), &n)) {
    return InvalidArgument(Str(op) + ": bias length " + std::to_string(bias.shape.dim(0)) +
                           " differs from the output channels " + std::to_string(channels));
  }
  return Status::Ok();
}

// numpy broadcasting of two shapes; -1 dimensions broadcast against anything (the result is
// the known size when one side knows it and it is not 1).
inline StatusOr<Shape> BroadcastShapes(std::string_view op, const Shape& a, const Shape& b) {
  const int rank = std::max(a.rank(), b.rank());
  Shape out;
  for (int d = 0; d < rank; ++d) {
    const int ia = d - (rank - a.rank());
    const int ib = d - (rank - b.rank());
    const int64_t da = ia < 0 ? 1 : a.dim(ia);
    const int64_t db = ib < 0 ? 1 : b.dim(ib);
    int64_t r;
    if (da == 1) {
      r = db;
    } else if (db == 1) {
      r = da;
    } else if (!MergeDim(da, db, &r)) {
      return InvalidArgument(Str(op) + ": shapes " + a.ToString() + " and " + b.ToString() +
                             " cannot be broadcast (dimension " + std::to_string(da) + " vs " +
                             std::to_string(db) + ")");
    }
    out.AddDim(r);
  }
  return out;
}

// An int attr read as a flag (ONNX's flags are ints: 0 false, anything else true).
inline StatusOr<bool> IntFlag(const AttrMap& attrs, std::string_view name, bool fallback) {
  LS_ASSIGN_OR_RETURN(int64_t v, attrs.GetIntOr(name, fallback ? 1 : 0));
  return v != 0;
}

// Attr "precision" of the ops that run on the matmul core (MatMul, FusedMatMul, Conv2D and
// Conv2D's gradients): "float32" (the default) or "bfloat16", which computes in bf16 with
// float32 accumulation even when no input is bf16. True for bfloat16.
inline StatusOr<bool> ReadBf16Precision(std::string_view op, const AttrMap& attrs) {
  LS_ASSIGN_OR_RETURN(std::string_view precision, attrs.GetStringViewOr("precision", "float32"));
  if (precision == "bfloat16") return true;
  if (precision == "float32") return false;
  return InvalidArgument(Str(op) + ": attr 'precision' must be float32 or bfloat16, got '" + Str(precision) + "'");
}

// Reads a 2-element spatial attr ([h, w]); a TensorFlow-style 4-element NHWC list [1, h, w, 1]
// is accepted too, so that imported graphs need no rewriting.
inline StatusOr<std::pair<int64_t, int64_t>> SpatialPair(std::string_view op, const AttrMap& attrs,
                                                         const std::string& name,
                                                         std::optional<std::pair<int64_t, int64_t>> fallback) {
  if (fallback && !attrs.Has(name)) return *fallback;
  LS_ASSIGN_OR_RETURN(std::span<const int64_t> v, attrs.GetInts(name));
  if (v.size() == 4 && v[0] == 1 && v[3] == 1) v = v.subspan(1, 2);
  if (v.size() != 2 || v[0] <= 0 || v[1] <= 0) {
    return InvalidArgument(Str(op) + ": attr '" + name + "' must be two positive ints [h, w], got " + IntsString(v));
  }
  return std::pair<int64_t, int64_t>{v[0], v[1]};
}

}  // namespace lockstep
