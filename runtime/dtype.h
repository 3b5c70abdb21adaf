// Element types a Tensor can hold. Values match proto/lockstep/bundle.proto's DataType.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/bfloat16.h"
#include "runtime/float16.h"
#include "runtime/status.h"

namespace lockstep {

enum class DType : uint8_t {
  kInvalid = 0,
  kFloat32 = 1,
  kBFloat16 = 2,
  kInt32 = 3,
  kInt64 = 4,
  kBool = 5,
  kString = 6,  // each element a std::string of bytes
  kFloat64 = 7,  // gradient checks in training; DT_DOUBLE tensors on the wire
  // The integer types of imported models (ONNX's, quantized models', images as uint8): copied,
  // compared, cast and computed with by the element-wise ops; the rest take int32/int64.
  kUInt8 = 8,
  kInt8 = 9,
  kUInt16 = 10,
  kInt16 = 11,
  kUInt32 = 12,
  kUInt64 = 13,
  // IEEE half precision: stored, cast and copied; computed with in float32 (the importers cast
  // at a model's edges).
  kFloat16 = 14,
};

// The largest DType value (they run from 1 to it without a gap).
inline constexpr int kMaxDTypeValue = 14;

// Bytes one element takes in memory (sizeof(std::string) for kString).
size_t DTypeSize(DType dtype);
// "float32", "bfloat16", "int32", "int64", "bool", "string", "uint8", ..., "float16".
std::string_view DTypeName(DType dtype);
StatusOr<DType> ParseDType(std::string_view name);
bool IsValidDType(int value);

template <typename T> struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::kFloat32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::kFloat64; };
template <> struct DTypeOf<bfloat16> { static constexpr DType value = DType::kBFloat16; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::kInt32; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::kInt64; };
template <> struct DTypeOf<bool> { static constexpr DType value = DType::kBool; };
template <> struct DTypeOf<std::string> { static constexpr DType value = DType::kString; };
template <> struct DTypeOf<uint8_t> { static constexpr DType value = DType::kUInt8; };
template <> struct DTypeOf<int8_t> { static constexpr DType value = DType::kInt8; };
template <> struct DTypeOf<uint16_t> { static constexpr DType value = DType::kUInt16; };
template <> struct DTypeOf<int16_t> { static constexpr DType value = DType::kInt16; };
template <> struct DTypeOf<uint32_t> { static constexpr DType value = DType::kUInt32; };
template <> struct DTypeOf<uint64_t> { static constexpr DType value = DType::kUInt64; };
template <> struct DTypeOf<float16> { static constexpr DType value = DType::kFloat16; };

}  // namespace lockstep
