// Helpers shared by the ops that take shapes, starts or pads as tensors (Reshape's second
// input, Expand, Tile, ConstantOfShape, Slice, Pad) and by the ops that copy an input into
// another arrangement (Transpose, Expand, Tile, Pad). Internal to runtime/ops/.
//
// Kernels allocate nothing but their outputs, so the values of a shape tensor are read into
// an inline IntList, and copies walk their index space with SourceWalker, which keeps its
// coordinates inline too.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "runtime/bfloat16.h"
#include "runtime/op_registry.h"
#include "runtime/ops/op_util.h"
#include "runtime/shape.h"

namespace lockstep {

// At most 2 * kMaxRank values (Pad's begin and end per axis), held inline.
struct IntList {
  std::array<int64_t, 2 * Shape::kMaxRank> values{};
  int size = 0;

  std::span<const int64_t> span() const { return {values.data(), static_cast<size_t>(size)}; }
  int64_t operator[](int i) const { return values[static_cast<size_t>(i)]; }
};

inline bool IsIndexDType(DType d) { return d == DType::kInt32 || d == DType::kInt64; }

// Shape inference's view of an int-vector input: int32 or int64, rank 1. Returns its length,
// -1 when that is known only at run time.
inline StatusOr<int64_t> IntVectorLength(std::string_view op, std::string_view what, const TensorSpec& spec) {
  if (!IsIndexDType(spec.dtype)) {
    return InvalidArgument(Str(op) + ": " + Str(what) + " must be int32 or int64, got " + Str(DTypeName(spec.dtype)));
  }
  if (spec.shape.rank() != 1) {
    return InvalidArgument(Str(op) + ": " + Str(what) + " must be a vector, got shape " + spec.shape.ToString());
  }
  return spec.shape.dim(0);
}

// The values of a 1-D int32/int64 tensor of at most `max_size` (<= 2 * kMaxRank) elements.
inline StatusOr<IntList> ReadIntList(std::string_view op, std::string_view what, const Tensor& t, int max_size) {
  LS_ASSIGN_OR_RETURN(int64_t n, IntVectorLength(op, what, {t.dtype(), t.shape()}));
  if (n > max_size) {
    return InvalidArgument(Str(op) + ": " + Str(what) + " has " + std::to_string(n) + " values, more than the " +
                           std::to_string(max_size) + " it can have");
  }
  IntList list;
  list.size = static_cast<int>(n);
  for (int i = 0; i < list.size; ++i) {
    list.values[static_cast<size_t>(i)] = t.dtype() == DType::kInt32 ? t.data<int32_t>()[static_cast<size_t>(i)]
                                                                     : t.data<int64_t>()[static_cast<size_t>(i)];
  }
  return list;
}

// A shape given by values (Expand's, ConstantOfShape's): every dimension >= 0 and no more
// than kMaxElements elements, so that a hostile shape tensor is an error, not an allocation.
inline StatusOr<Shape> ShapeFromValues(std::string_view op, std::span<const int64_t> dims) {
  for (int64_t d : dims) {
    if (d < 0) return InvalidArgument(Str(op) + ": shape " + IntsString(dims) + " has a negative dimension");
  }
  StatusOr<Shape> shape = Shape::FromDims(dims);
  if (!shape.ok()) return InvalidArgument(Str(op) + ": " + shape.status().message());
  return shape;
}

// Walks an index space (an output's rows, a grid of tiles) in row-major order and keeps the
// matching offset into a source. Along dimension d the source index is the coordinate modulo
// period[d], times stride[d]: a transpose or a plain copy has period = size, a broadcast
// dimension period 1, a tiled one the source's size.
class SourceWalker {
 public:
  // Appends a dimension (inner to those added before); period must divide size.
  void AddDim(int64_t size, int64_t period, int64_t stride) {
    const auto d = static_cast<size_t>(rank_++);
    size_[d] = size;
    period_[d] = period;
    stride_[d] = stride;
  }

  // Positions the walker at flat index `flat` of the space.
  void Seek(int64_t flat) {
    offset_ = 0;
    for (int d = rank_ - 1; d >= 0; --d) {
      const auto u = static_cast<size_t>(d);
      coord_[u] = flat % size_[u];
      flat /= size_[u];
      source_[u] = coord_[u] % period_[u];
      offset_ += source_[u] * stride_[u];
    }
  }

  // One step forward in row-major order.
  void Next() {
    for (int d = rank_ - 1; d >= 0; --d) {
      const auto u = static_cast<size_t>(d);
      offset_ -= source_[u] * stride_[u];
      const bool wrapped = ++coord_[u] == size_[u];
      if (wrapped) coord_[u] = 0;
      source_[u] = wrapped || source_[u] + 1 == period_[u] ? 0 : source_[u] + 1;
      offset_ += source_[u] * stride_[u];
      if (!wrapped) return;
    }
  }

  int64_t offset() const { return offset_; }

 private:
  int rank_ = 0;
  std::array<int64_t, Shape::kMaxRank + 1> size_{}, period_{}, stride_{}, coord_{}, source_{};
  int64_t offset_ = 0;
};

// Row-major strides (in elements) of a shape.
inline std::array<int64_t, Shape::kMaxRank> RowMajorStrides(const Shape& s) {
  std::array<int64_t, Shape::kMaxRank> strides{};
  int64_t step = 1;
  for (int d = s.rank() - 1; d >= 0; --d) {
    strides[static_cast<size_t>(d)] = step;
    step *= s.dim(d);
  }
  return strides;
}

// Calls fn(T{}) with T the type a copy of `dtype` values moves: std::string for strings, an
// unsigned integer of the element's size otherwise (numbers are copied bit for bit).
template <typename Fn>
Status DispatchCopyType(std::string_view op, DType dtype, Fn&& fn) {
  if (dtype == DType::kString) return fn(std::string{});
  switch (DTypeSize(dtype)) {
    case 1: return fn(uint8_t{});
    case 2: return fn(uint16_t{});
    case 4: return fn(uint32_t{});
    case 8: return fn(uint64_t{});
    default: return InvalidArgument(Str(op) + ": unsupported dtype " + Str(DTypeName(dtype)));
  }
}

// The elements of `t` as T (DispatchCopyType's T), read-only and writable.
template <typename T>
const T* CopyData(const Tensor& t) {
  return static_cast<const T*>(t.raw_data());
}
template <typename T>
T* MutableCopyData(Tensor& t) {
  return static_cast<T*>(t.mutable_raw_data());
}

// `value` (a double attr: Pad's "value", ConstantOfShape's) as an element of `dtype`, in the
// bits of U, DispatchCopyType's type for it: integers saturate (NaN gives 0), bool is value
// != 0, bfloat16 rounds through float32. Strings have no numeric value: an empty string.
template <typename U>
U ElementBits(DType dtype, double value) {
  if constexpr (std::is_same_v<U, std::string>) {
    return U();
  } else {
    auto saturate = [&](auto limit_type) {
      using I = decltype(limit_type);
      if (value != value) return I(0);
      if (value >= static_cast<double>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
      if (value <= static_cast<double>(std::numeric_limits<I>::lowest())) return std::numeric_limits<I>::lowest();
      return static_cast<I>(value);
    };
    U bits{};
    auto put = [&](auto v) {
      static_assert(sizeof(v) == sizeof(U));
      std::memcpy(&bits, &v, sizeof(U));
    };
    switch (dtype) {
      case DType::kFloat32:
        if constexpr (sizeof(U) == 4) put(static_cast<float>(value));
        break;
      case DType::kFloat64:
        if constexpr (sizeof(U) == 8) put(value);
        break;
      case DType::kBFloat16:
        if constexpr (sizeof(U) == 2) put(FloatToBfloat16(static_cast<float>(value)));
        break;
      case DType::kInt32:
        if constexpr (sizeof(U) == 4) put(saturate(int32_t{}));
        break;
      case DType::kInt64:
        if constexpr (sizeof(U) == 8) put(saturate(int64_t{}));
        break;
      case DType::kBool:
        if constexpr (sizeof(U) == 1) put(static_cast<bool>(value != 0));
        break;
      case DType::kFloat16:
        if constexpr (sizeof(U) == 2) put(FloatToFloat16(static_cast<float>(value)));
        break;
      case DType::kUInt8:
        if constexpr (sizeof(U) == 1) put(saturate(uint8_t{}));
        break;
      case DType::kInt8:
        if constexpr (sizeof(U) == 1) put(saturate(int8_t{}));
        break;
      case DType::kUInt16:
        if constexpr (sizeof(U) == 2) put(saturate(uint16_t{}));
        break;
      case DType::kInt16:
        if constexpr (sizeof(U) == 2) put(saturate(int16_t{}));
        break;
      case DType::kUInt32:
        if constexpr (sizeof(U) == 4) put(saturate(uint32_t{}));
        break;
      case DType::kUInt64:
        if constexpr (sizeof(U) == 8) put(saturate(uint64_t{}));
        break;
      default:
        break;
    }
    return bits;
  }
}

}  // namespace lockstep
