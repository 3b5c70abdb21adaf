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
    case DType::kInvalid: return "invalid";
  }
  return "invalid";
}

StatusOr<DType> ParseDType(std::string_view name) {
  for (DType d : {DType::kFloat32, DType::kBFloat16, DType::kInt32, DType::kInt64, DType::kBool,
                  DType::kString, DType::kFloat64}) {
    if (DTypeName(d) == name) return d;
  }
  return InvalidArgument("unknown dtype '" + std::string(name) +
                         "' (expected float32, float64, bfloat16, int32, int64, bool or string)");
}

bool IsValidDType(int value) { return value >= 1 && value <= 7; }

}  // namespace lockstep
