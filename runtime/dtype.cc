#include "runtime/dtype.h"

namespace lockstep {

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return 4;
    case DType::kFloat64: return 8;
    case DType::kBFloat16: return 2;
    case DType::kInt32: return 4;
    case DType::kInt64: return 8;
    case DType::kBool: return 1;
    case DType::kString: return sizeof(std::string);
    case DType::kUInt8: case DType::kInt8: return 1;
    case DType::kUInt16: case DType::kInt16: case DType::kFloat16: return 2;
    case DType::kUInt32: return 4;
    case DType::kUInt64: return 8;
    case DType::kInvalid: return 0;
  }
  return 0;
}

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kBFloat16: return "bfloat16";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kBool: return "bool";
    case DType::kString: return "string";
    case DType::kUInt8: return "uint8";
    case DType::kInt8: return "int8";
    case DType::kUInt16: return "uint16";
    case DType::kInt16: return "int16";
    case DType::kUInt32: return "uint32";
    case DType::kUInt64: return "uint64";
    case DType::kFloat16: return "float16";
    case DType::kInvalid: return "invalid";
  }
  return "invalid";
}

StatusOr<DType> ParseDType(std::string_view name) {
  for (int v = 1; v <= kMaxDTypeValue; ++v) {
    if (DTypeName(static_cast<DType>(v)) == name) return static_cast<DType>(v);
  }
  return InvalidArgument("unknown dtype '" + std::string(name) +
                         "' (expected float32, float64, float16, bfloat16, int8, int16, int32, int64, uint8, uint16, "
                         "uint32, uint64, bool or string)");
}

bool IsValidDType(int value) { return value >= 1 && value <= kMaxDTypeValue; }

}  // namespace lockstep
