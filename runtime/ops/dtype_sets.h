// The dtype families the element-wise ops accept, their checks (messages that name the op) and
// the dispatch from a runtime DType to a C++ element type. Internal to runtime/ops/.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/dtype.h"
#include "runtime/ops/op_util.h"
#include "runtime/status.h"

namespace lockstep {

enum class DTypeSet {
  kReal,             // float32, float64
  kNumeric,          // float32, float64, int32, int64
  kNumericOrBool,    // the numeric dtypes and bool
  kArithmetic,       // the numeric dtypes and the other integers (uint8, int8, ..., uint64)
  kArithmeticOrBool, // those and bool
  kUnsigned,         // uint8, uint16, uint32, uint64
  kInteger,          // int8 to int64, uint8 to uint64
  kBool,             // bool
  kNonString,        // every dtype with fixed-size elements (float32, bfloat16, float16, ...)
};

constexpr bool IsSmallInteger(DType d) {
  return d == DType::kUInt8 || d == DType::kInt8 || d == DType::kUInt16 || d == DType::kInt16 ||
         d == DType::kUInt32 || d == DType::kUInt64;
}

constexpr bool InSet(DTypeSet set, DType dtype) {
  const bool real = dtype == DType::kFloat32 || dtype == DType::kFloat64;
  const bool numeric = real || dtype == DType::kInt32 || dtype == DType::kInt64;
  const bool arithmetic = numeric || IsSmallInteger(dtype);
  switch (set) {
    case DTypeSet::kReal: return real;
    case DTypeSet::kNumeric: return numeric;
    case DTypeSet::kNumericOrBool: return numeric || dtype == DType::kBool;
    case DTypeSet::kArithmetic: return arithmetic;
    case DTypeSet::kArithmeticOrBool: return arithmetic || dtype == DType::kBool;
    case DTypeSet::kUnsigned:
      return dtype == DType::kUInt8 || dtype == DType::kUInt16 || dtype == DType::kUInt32 || dtype == DType::kUInt64;
    case DTypeSet::kInteger: return arithmetic && !real;
    case DTypeSet::kBool: return dtype == DType::kBool;
    case DTypeSet::kNonString:
      return arithmetic || dtype == DType::kBool || dtype == DType::kBFloat16 || dtype == DType::kFloat16;
  }
  return false;
}

constexpr std::string_view DTypeSetNames(DTypeSet set) {
  switch (set) {
    case DTypeSet::kReal: return "float32, float64";
    case DTypeSet::kNumeric: return "float32, float64, int32, int64";
    case DTypeSet::kNumericOrBool: return "float32, float64, int32, int64, bool";
    case DTypeSet::kArithmetic: return "float32, float64, int8 to int64, uint8 to uint64";
    case DTypeSet::kArithmeticOrBool: return "float32, float64, int8 to int64, uint8 to uint64, bool";
    case DTypeSet::kUnsigned: return "uint8, uint16, uint32, uint64";
    case DTypeSet::kInteger: return "int8 to int64, uint8 to uint64";
    case DTypeSet::kBool: return "bool";
    case DTypeSet::kNonString: return "every dtype but string";
  }
  return "";
}

// "Op: dtype bool is not supported (float32, float64, int32, int64)".
inline Status CheckDTypeIn(std::string_view op, DType dtype, DTypeSet set) {
  if (InSet(set, dtype)) return Status::Ok();
  return InvalidArgument(Str(op) + ": dtype " + Str(DTypeName(dtype)) + " is not supported (" +
                         Str(DTypeSetNames(set)) + ")");
}

// The two operands of a binary op share one dtype: no implicit promotion, as in ONNX.
inline Status CheckSameDType(std::string_view op, DType a, DType b) {
  if (a == b) return Status::Ok();
  return InvalidArgument(Str(op) + ": inputs must have the same dtype, got " + Str(DTypeName(a)) +
                         " and " + Str(DTypeName(b)));
}

namespace dtype_sets_internal {
// Instantiates fn only for element types in the set, so that an op's arithmetic is never
// compiled for a type it does not accept (sqrt of bool).
template <DTypeSet S, typename T, typename Fn>
Status CallIfInSet(Fn& fn) {
  if constexpr (InSet(S, DTypeOf<T>::value)) {
    return fn(T{});
  } else {
    return Internal("dtype " + Str(DTypeName(DTypeOf<T>::value)) + " reached a kernel that rejects it");
  }
}
}  // namespace dtype_sets_internal

// Calls fn(T{}) with the element type T of `dtype`; the caller has checked that `dtype` is in S.
template <DTypeSet S, typename Fn>
Status DispatchDTypeIn(DType dtype, Fn&& fn) {
  using dtype_sets_internal::CallIfInSet;
  switch (dtype) {
    case DType::kFloat32: return CallIfInSet<S, float>(fn);
    case DType::kFloat64: return CallIfInSet<S, double>(fn);
    case DType::kInt32: return CallIfInSet<S, int32_t>(fn);
    case DType::kInt64: return CallIfInSet<S, int64_t>(fn);
    case DType::kBool: return CallIfInSet<S, bool>(fn);
    case DType::kBFloat16: return CallIfInSet<S, bfloat16>(fn);
    case DType::kFloat16: return CallIfInSet<S, float16>(fn);
    case DType::kUInt8: return CallIfInSet<S, uint8_t>(fn);
    case DType::kInt8: return CallIfInSet<S, int8_t>(fn);
    case DType::kUInt16: return CallIfInSet<S, uint16_t>(fn);
    case DType::kInt16: return CallIfInSet<S, int16_t>(fn);
    case DType::kUInt32: return CallIfInSet<S, uint32_t>(fn);
    case DType::kUInt64: return CallIfInSet<S, uint64_t>(fn);
    default: return Internal("dtype " + Str(DTypeName(dtype)) + " reached an element-wise kernel");
  }
}

}  // namespace lockstep
