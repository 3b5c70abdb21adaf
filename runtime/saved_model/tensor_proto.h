// The tensor codec between TensorFlow's wire format (tensorflow.TensorProto, as TensorFlow
// Serving clients send and expect it, and as SavedModel graphs hold constants) and
// lockstep::Tensor, plus the DataType and SignatureDef mappings that model metadata needs.
//
// Decoding follows TensorFlow's rules where clients depend on them, and is stricter where
// TensorFlow is lenient in ways that only hide client bugs:
//   - Supported dtypes: DT_FLOAT, DT_BFLOAT16, DT_INT32, DT_INT64, DT_BOOL, DT_STRING. Any other
//     DataType (DT_DOUBLE, DT_HALF, DT_UINT8, ...) is InvalidArgument naming it: the request
//     asks for something this server's models cannot take, which is the client's to fix, and
//     TensorFlow Serving itself answers a dtype mismatch with INVALID_ARGUMENT (HTTP 400).
//   - Values come from tensor_content (raw little-endian row-major bytes; numeric and bool
//     types only) when it is non-empty, else from the dtype's typed field: float_val,
//     half_val (DT_BFLOAT16: one 16-bit pattern in the low bits of each int32; higher bits are
//     dropped, as TensorFlow does), int_val, int64_val, bool_val, string_val.
//   - The typed field must hold exactly as many values as the shape has elements, or exactly
//     one value, which is repeated to fill the shape (TensorFlow's splat rule, which
//     tf.make_tensor_proto relies on for constants). TensorFlow also pads a short list with its
//     last value, zero-fills an empty one and ignores extra values; we reject all of those
//     with InvalidArgument, because no TensorFlow client produces them on purpose.
//   - tensor_content must be exactly elements x element size bytes.
//   - The shape must be known: unknown_rank or a dimension of -1 is InvalidArgument.
//
// Bounds: element counts are checked through Shape::FromDims (rank <= Shape::kMaxRank, at most
// Shape::kMaxElements elements), and the decoded tensor may take at most `max_bytes` of memory
// (element storage plus, for strings, their bytes). Apart from the splat case, decoding never
// allocates more than the proto's own data implies, so a small hostile proto cannot make us
// allocate a large tensor.
#pragma once

#include <cstdint>

#include "runtime/dtype.h"
#include "runtime/graph.h"
#include "runtime/shape.h"
#include "runtime/status.h"
#include "runtime/tensor.h"
#include "tensorflow/core/framework/tensor.pb.h"
#include "tensorflow/core/framework/tensor_shape.pb.h"
#include "tensorflow/core/framework/types.pb.h"
#include "tensorflow/core/protobuf/meta_graph.pb.h"

namespace lockstep {

// The default cap on one decoded tensor's memory: the largest gRPC message TensorFlow Serving
// accepts is about 2 GiB, and a tensor of half that is already far past any real request.
inline constexpr int64_t kMaxRequestTensorBytes = int64_t{1} << 30;

// DType -> DataType. kInvalid maps to DT_INVALID.
tensorflow::DataType DTypeToDataType(DType dtype);
// DataType -> DType; InvalidArgument naming the DataType when Lockstep has no such dtype
// (including the *_REF types and DT_INVALID).
StatusOr<DType> DataTypeToDType(tensorflow::DataType dtype);
// "DT_FLOAT", or "DataType(77)" for numbers outside the enum.
std::string DataTypeName(int dtype);

// A shape that values must fill: known rank, every dimension >= 0, within the Shape limits.
StatusOr<Shape> ShapeFromProto(const tensorflow::TensorShapeProto& proto);
// Writes `shape` (dimensions of -1 stay -1) into `proto`, replacing what was there.
void ShapeToProto(const Shape& shape, tensorflow::TensorShapeProto* proto);

// Decodes a request tensor; see the rules at the top of this file. The result is owned.
StatusOr<Tensor> TensorFromProto(const tensorflow::TensorProto& proto,
                                 int64_t max_bytes = kMaxRequestTensorBytes);
// The same into `*out`, in its storage when that is writable with the decoded dtype and shape
// (Tensor::Writable), so that a pooled call decodes a repeated shape without allocating.
Status TensorFromProto(const tensorflow::TensorProto& proto, int64_t max_bytes, Tensor* out);
// Encodes `tensor` into `proto` (cleared first): dtype, tensor_shape, and the values in the
// dtype's typed field, one per element (float_val, half_val, int_val, int64_val, bool_val,
// string_val), as TensorFlow Serving answers by default. The proto's allocations are kept, so
// that encoding a tensor of the same dtype and shape again into it allocates nothing. Fails (ResourceExhausted) only for a
// tensor of more than INT32_MAX elements, which no protobuf repeated field can hold.
Status TensorToProto(const Tensor& tensor, tensorflow::TensorProto* proto);

// A signature binding as model metadata shows it: name = the graph tensor behind the key,
// dtype mapped, tensor_shape with -1 for dimensions the caller chooses.
tensorflow::TensorInfo TensorInfoFromBinding(const TensorBinding& binding);
// inputs and outputs keyed by binding key, and method_name.
tensorflow::SignatureDef SignatureDefFromSignature(const Signature& signature);

}  // namespace lockstep
