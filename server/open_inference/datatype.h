// The Open Inference Protocol's tensor datatypes ("FP32", "INT64", "BYTES", ...) for our
// tensors' dtypes, and tensors as the protocol's raw bytes: what the REST binary extension
// carries after the JSON header and what gRPC's raw_input_contents / raw_output_contents hold.
// Raw bytes are little-endian and row-major; a BYTES tensor is each element's length as 4
// little-endian bytes followed by the element.
//
// The runtime has FP32, FP64, BF16, INT32, INT64, BOOL and BYTES. The protocol's other
// datatypes (FP16, INT8, INT16, UINT8 to UINT64) are refused by name: a model of ours never
// takes them, and converting silently would hide a client's mistake.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "runtime/status.h"
#include "runtime/tensor.h"

namespace lockstep::open_inference {

// "FP32" -> kFloat32, ... InvalidArgument naming the datatype when the protocol has no such
// datatype, or when the runtime has no tensors of it.
StatusOr<DType> DTypeFromDatatype(std::string_view datatype);
// kFloat32 -> "FP32", ...
std::string_view DatatypeName(DType dtype);

// The bytes `tensor` takes as raw contents.
size_t RawByteSize(const Tensor& tensor);
// Appends `tensor`'s raw contents to `out`.
void AppendRawContents(const Tensor& tensor, std::string* out);

// Makes `*tensor` a tensor of `dtype` and `shape` from raw contents `bytes`, reusing its storage
// when Tensor::Writable allows. InvalidArgument naming `input` when the byte count does not match
// the shape, or a BYTES element's length runs past the end.
Status TensorFromRawContents(std::string_view input, DType dtype, const Shape& shape, std::string_view bytes,
                             Tensor* tensor);

}  // namespace lockstep::open_inference
