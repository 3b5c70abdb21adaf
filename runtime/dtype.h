// Element types a Tensor can hold. Values match proto/lockstep/bundle.proto's DataType.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/bfloat16.h"
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
};

// Bytes one element takes in memory (sizeof(std::string) for kString).
size_t DTypeSize(DType dtype);
// "float32", "bfloat16", "int32", "int64", "bool", "string".
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

}  // namespace lockstep
