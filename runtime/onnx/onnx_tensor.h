// ONNX tensors (onnx.TensorProto: initializers, Constant nodes' values, the backend test
// suite's input_*.pb / output_*.pb) to lockstep::Tensor, and ONNX's element types to DType.
//
// Values come from raw_data (little-endian, row-major, exactly elements x element size bytes),
// else the element type's typed field (float_data, double_data, int32_data — which also holds
// bool and bfloat16 bit patterns —, int64_data, string_data), else external data: a file named
// by the "location" entry, relative to the model's directory and never outside it, read at
// "offset" for "length" bytes. A typed field must hold exactly one value per element.
// Dimensions must be non-negative and within Shape's limits; a tensor may take at most
// `max_bytes`, checked before anything is allocated.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "onnx/onnx_pb.h"
#include "runtime/dtype.h"
#include "runtime/status.h"
#include "runtime/tensor.h"

namespace lockstep {

class FileImage;

// The largest tensor one initializer or test file may hold: protobuf messages stop at 2 GiB,
// and external data files of real models hold single tensors of a few GiB at most.
inline constexpr int64_t kMaxOnnxTensorBytes = int64_t{4} << 30;

// IR 10's 4-bit integers (ONNX 1.16; libonnx 1.12's enum has no names for them), two to a byte,
// the first in the low nibble. Read as int8 / uint8, which hold every value exactly.
inline constexpr int32_t kOnnxUInt4 = 21;
inline constexpr int32_t kOnnxInt4 = 22;

// TensorProto.DataType -> DType; Unimplemented naming the type for the ones Lockstep has no
// dtype for (complex, float8, ...). INT4 and UINT4 are read as int8 and uint8.
StatusOr<DType> OnnxElemTypeToDType(int32_t elem_type);

// The dtype an imported model's value of `dtype` is computed in: float32 for float16 and
// bfloat16, whose values a model stores and exchanges (its weights, inputs, outputs and casts
// are converted, the casts rounding), and `dtype` for every other.
DType ComputeDType(DType dtype);
// DType -> TensorProto.DataType (every DType but kInvalid has one; kInvalid gives UNDEFINED).
int32_t DTypeToOnnxElemType(DType dtype);
// "FLOAT", "UINT8", or "elem_type 99" for numbers outside the enum.
std::string OnnxElemTypeName(int32_t elem_type);

// Reads external data files below one model directory, each file once however many tensors
// it holds.
class OnnxExternalData {
 public:
  explicit OnnxExternalData(std::filesystem::path model_dir);
  ~OnnxExternalData();
  // The `length` bytes at `offset` of `location`; `length` < 0 means to the end of the file.
  // Fails when the location is absolute, climbs out of the model directory (through ".." or a
  // symlink), or the range lies outside the file.
  StatusOr<std::span<const std::byte>> Bytes(const std::string& location, uint64_t offset, int64_t length);

 private:
  std::filesystem::path dir_;
  std::map<std::string, std::shared_ptr<const FileImage>> files_;
};

// Decodes `proto` (see the rules above). `external` may be null when the caller has no model
// directory; a tensor with external data is then an error.
// `t` as a TensorProto named `name`, the inverse of TensorFromOnnx: raw_data (little-endian,
// row-major; bool one byte per element) for numbers, string_data for strings.
onnx::TensorProto TensorToOnnx(const Tensor& t, const std::string& name);

StatusOr<Tensor> TensorFromOnnx(const onnx::TensorProto& proto, OnnxExternalData* external,
                                int64_t max_bytes = kMaxOnnxTensorBytes);

}  // namespace lockstep
