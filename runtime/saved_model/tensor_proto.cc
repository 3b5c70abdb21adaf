#include "runtime/saved_model/tensor_proto.h"

#include <bit>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace lockstep {
namespace {

// tensor_content is little-endian on the wire; we copy it as is.
static_assert(std::endian::native == std::endian::little,
              "the tensor_content codec assumes a little-endian host");

std::string ShapeString(const tensorflow::TensorShapeProto& proto) {
  std::string out = "[";
  for (int i = 0; i < proto.dim_size(); ++i) {
    if (i) out += ",";
    out += std::to_string(proto.dim(i).size());
  }
  return out + "]";
}

// The element count and byte cost of a decoded tensor, checked against the cap before
// anything is allocated.
Status CheckBytes(DType dtype, const Shape& shape, int64_t n, int64_t extra_bytes,
                  int64_t max_bytes) {
  const int64_t element_size = static_cast<int64_t>(DTypeSize(dtype));
  // n <= Shape::kMaxElements (2^40) and element_size <= 32, so the product cannot overflow;
  // extra_bytes is bounded separately by the caller.
  const int64_t bytes = n * element_size;
  if (bytes > max_bytes || extra_bytes > max_bytes - bytes) {
    return InvalidArgument("tensor " + std::string(DTypeName(dtype)) + shape.ToString() +
                           " would take more than the limit of " + std::to_string(max_bytes) +
                           " bytes");
  }
  return Status::Ok();
}

// Says how many values a typed field must hold.
Status CountMismatch(tensorflow::DataType dtype, const Shape& shape, int64_t n,
                     const char* field, int64_t got) {
  return InvalidArgument(DataTypeName(dtype) + " tensor of shape " + shape.ToString() +
                         " needs " + std::to_string(n) + " values (or 1, repeated) in " + field +
                         ", got " + std::to_string(got));
}

// `*out` made a tensor of `dtype` and `shape`: in its own storage when that can be written in
// place (a pooled call's tensor from its last request of this shape), else in new storage.
Tensor& Prepared(Tensor* out, DType dtype, const Shape& shape) {
  if (!out->Writable(dtype, shape)) *out = Tensor(dtype, shape);
  return *out;
}

// Fills a numeric tensor from a typed repeated field, applying the splat rule. `convert` turns
// one wire value into one element.
template <typename T, typename Field, typename Convert>
Status FromField(tensorflow::DataType wire_dtype, const Shape& shape, int64_t n, const Field& field,
                 const char* field_name, int64_t max_bytes, Convert convert, Tensor* tensor) {
  const int64_t got = field.size();
  if (got != n && !(got == 1 && n > 1)) return CountMismatch(wire_dtype, shape, n, field_name, got);
  LS_RETURN_IF_ERROR(CheckBytes(DTypeOf<T>::value, shape, n, 0, max_bytes));
  Tensor& t = Prepared(tensor, DTypeOf<T>::value, shape);
  std::span<T> out = t.mutable_data<T>();
  if (got == 1 && n > 1) {
    const T value = convert(field.Get(0));
    for (T& e : out) e = value;
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = convert(field.Get(static_cast<int>(i)));
  }
  return Status::Ok();
}

Status FromContent(const tensorflow::TensorProto& proto, DType dtype, const Shape& shape, int64_t n,
                   int64_t max_bytes, Tensor* tensor) {
  if (dtype == DType::kString) {
    // TensorFlow's string tensor_content is a varint-prefixed encoding no serving client
    // sends; asking for string_val keeps the decoder small.
    return InvalidArgument("tensor_content is not supported for DT_STRING; send string_val");
  }
  const std::string& content = proto.tensor_content();
  const int64_t element_size = static_cast<int64_t>(DTypeSize(dtype));
  if (static_cast<int64_t>(content.size()) != n * element_size) {
    return InvalidArgument(DataTypeName(proto.dtype()) + " tensor of shape " + shape.ToString() +
                           " needs " + std::to_string(n * element_size) +
                           " bytes of tensor_content (" + std::to_string(n) + " x " +
                           std::to_string(element_size) + "), got " +
                           std::to_string(content.size()));
  }
  // The content is as large as the tensor, so this check only matters for tiny caps.
  LS_RETURN_IF_ERROR(CheckBytes(dtype, shape, n, 0, max_bytes));
  Tensor& t = Prepared(tensor, dtype, shape);
  if (dtype == DType::kBool) {
    // Any non-zero byte is true; copying raw bytes into bool storage could create a bool that
    // is neither true nor false.
    std::span<bool> out = t.mutable_data<bool>();
    for (int64_t i = 0; i < n; ++i) out[i] = content[static_cast<size_t>(i)] != 0;
  } else if (n > 0) {
    std::memcpy(t.mutable_raw_data(), content.data(), content.size());
  }
  return Status::Ok();
}

Status FromStrings(const tensorflow::TensorProto& proto, const Shape& shape, int64_t n, int64_t max_bytes,
                   Tensor* tensor) {
  const auto& field = proto.string_val();
  const int64_t got = field.size();
  const bool splat = got == 1 && n > 1;
  if (got != n && !splat) return CountMismatch(proto.dtype(), shape, n, "string_val", got);
  // Element bytes: the payload once per element (a splat copies it n times). Each string is
  // below 2 GiB (a protobuf limit) and n <= 2^40, but their product can overflow: divide.
  int64_t payload = 0;
  if (splat) {
    const int64_t len = static_cast<int64_t>(field.Get(0).size());
    if (len > 0 && n > max_bytes / len) {
      return InvalidArgument("tensor string" + shape.ToString() +
                             " would take more than the limit of " + std::to_string(max_bytes) +
                             " bytes");
    }
    payload = len * n;
  } else {
    for (const std::string& s : field) payload += static_cast<int64_t>(s.size());
  }
  LS_RETURN_IF_ERROR(CheckBytes(DType::kString, shape, n, payload, max_bytes));
  std::span<std::string> out = Prepared(tensor, DType::kString, shape).mutable_data<std::string>();
  for (int64_t i = 0; i < n; ++i) out[i] = field.Get(splat ? 0 : static_cast<int>(i));
  return Status::Ok();
}

template <typename T, typename Field>
void CopyOut(std::span<const T> values, Field* field) {
  field->Resize(static_cast<int>(values.size()), typename Field::value_type{});
  if (!values.empty()) std::memcpy(field->mutable_data(), values.data(), values.size_bytes());
}

// Element by element: the field's type is wider than the tensor's (int_val carries uint8).
template <typename T, typename Field>
void CopyIntegersOut(std::span<const T> values, Field* field) {
  field->Reserve(static_cast<int>(values.size()));
  for (T v : values) field->AddAlreadyReserved(static_cast<typename Field::value_type>(v));
}

// A 16-bit float's bit pattern, zero-extended, as half_val carries both bfloat16 and float16.
template <typename Half, typename Field>
void CopyHalfBitsOut(std::span<const Half> values, Field* field) {
  field->Reserve(static_cast<int>(values.size()));
  for (Half v : values) field->AddAlreadyReserved(v.bits);
}

// TensorProto::Clear() but keeping every allocation for the next encoding: Clear deletes the
// tensor_shape message, where clearing its fields keeps it, and with it its dims.
void ClearKeepingCapacity(tensorflow::TensorProto* proto) {
  proto->clear_dtype();
  if (proto->has_tensor_shape()) proto->mutable_tensor_shape()->Clear();
  proto->clear_version_number();
  proto->clear_tensor_content();
  proto->clear_float_val();
  proto->clear_double_val();
  proto->clear_int_val();
  proto->clear_string_val();
  proto->clear_scomplex_val();
  proto->clear_int64_val();
  proto->clear_bool_val();
  proto->clear_dcomplex_val();
  proto->clear_half_val();
  proto->clear_resource_handle_val();
  proto->clear_variant_val();
  proto->clear_uint32_val();
  proto->clear_uint64_val();
}

}  // namespace

tensorflow::DataType DTypeToDataType(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return tensorflow::DT_FLOAT;
    case DType::kFloat64: return tensorflow::DT_DOUBLE;
    case DType::kBFloat16: return tensorflow::DT_BFLOAT16;
    case DType::kInt32: return tensorflow::DT_INT32;
    case DType::kInt64: return tensorflow::DT_INT64;
    case DType::kBool: return tensorflow::DT_BOOL;
    case DType::kString: return tensorflow::DT_STRING;
    case DType::kFloat16: return tensorflow::DT_HALF;
    case DType::kUInt8: return tensorflow::DT_UINT8;
    case DType::kInt8: return tensorflow::DT_INT8;
    case DType::kUInt16: return tensorflow::DT_UINT16;
    case DType::kInt16: return tensorflow::DT_INT16;
    case DType::kUInt32: return tensorflow::DT_UINT32;
    case DType::kUInt64: return tensorflow::DT_UINT64;
    case DType::kInvalid: break;
  }
  return tensorflow::DT_INVALID;
}

StatusOr<DType> DataTypeToDType(tensorflow::DataType dtype) {
  switch (dtype) {
    case tensorflow::DT_FLOAT: return DType::kFloat32;
    case tensorflow::DT_DOUBLE: return DType::kFloat64;
    case tensorflow::DT_BFLOAT16: return DType::kBFloat16;
    case tensorflow::DT_INT32: return DType::kInt32;
    case tensorflow::DT_INT64: return DType::kInt64;
    case tensorflow::DT_BOOL: return DType::kBool;
    case tensorflow::DT_STRING: return DType::kString;
    case tensorflow::DT_HALF: return DType::kFloat16;
    case tensorflow::DT_UINT8: return DType::kUInt8;
    case tensorflow::DT_INT8: return DType::kInt8;
    case tensorflow::DT_UINT16: return DType::kUInt16;
    case tensorflow::DT_INT16: return DType::kInt16;
    case tensorflow::DT_UINT32: return DType::kUInt32;
    case tensorflow::DT_UINT64: return DType::kUInt64;
    default: break;
  }
  return InvalidArgument("dtype " + DataTypeName(dtype) +
                         " is not supported; Lockstep serves DT_FLOAT, DT_DOUBLE, DT_HALF, DT_BFLOAT16, "
                         "DT_INT8 to DT_INT64, DT_UINT8 to DT_UINT64, DT_BOOL and DT_STRING");
}

std::string DataTypeName(int dtype) {
  if (tensorflow::DataType_IsValid(dtype)) {
    return tensorflow::DataType_Name(static_cast<tensorflow::DataType>(dtype));
  }
  return "DataType(" + std::to_string(dtype) + ")";
}

StatusOr<Shape> ShapeFromProto(const tensorflow::TensorShapeProto& proto) {
  if (proto.unknown_rank()) return InvalidArgument("tensor_shape has unknown rank");
  if (proto.dim_size() > Shape::kMaxRank) {
    return InvalidArgument("tensor_shape has rank " + std::to_string(proto.dim_size()) +
                           ", above the maximum of " + std::to_string(Shape::kMaxRank));
  }
  int64_t dims[Shape::kMaxRank];
  for (int i = 0; i < proto.dim_size(); ++i) {
    dims[i] = proto.dim(i).size();
    if (dims[i] < 0) {
      return InvalidArgument("tensor_shape " + ShapeString(proto) + " has dimension " +
                             std::to_string(i) + " of " + std::to_string(dims[i]) +
                             "; a tensor with values needs every dimension known");
    }
  }
  auto shape = Shape::FromDims(std::span<const int64_t>(dims, static_cast<size_t>(proto.dim_size())));
  if (!shape.ok()) return shape.status().WithPrefix("tensor_shape");
  return shape;
}

void ShapeToProto(const Shape& shape, tensorflow::TensorShapeProto* proto) {
  proto->Clear();
  for (int64_t d : shape.dims()) proto->add_dim()->set_size(d);
}

Status TensorFromProto(const tensorflow::TensorProto& proto, int64_t max_bytes, Tensor* out) {
  LS_ASSIGN_OR_RETURN(DType dtype, DataTypeToDType(proto.dtype()));
  LS_ASSIGN_OR_RETURN(Shape shape, ShapeFromProto(proto.tensor_shape()));
  LS_ASSIGN_OR_RETURN(int64_t n, shape.CheckedNumElements());

  if (!proto.tensor_content().empty()) return FromContent(proto, dtype, shape, n, max_bytes, out);

  const tensorflow::DataType wire = proto.dtype();
  switch (dtype) {
    case DType::kFloat32:
      return FromField<float>(wire, shape, n, proto.float_val(), "float_val", max_bytes,
                              [](float v) { return v; }, out);
    case DType::kFloat64:
      return FromField<double>(wire, shape, n, proto.double_val(), "double_val", max_bytes,
                               [](double v) { return v; }, out);
    case DType::kBFloat16:
      return FromField<bfloat16>(wire, shape, n, proto.half_val(), "half_val", max_bytes,
                                 [](int32_t v) {
                                   return bfloat16::FromBits(static_cast<uint16_t>(v & 0xffff));
                                 },
                                 out);
    case DType::kInt32:
      return FromField<int32_t>(wire, shape, n, proto.int_val(), "int_val", max_bytes,
                                [](int32_t v) { return v; }, out);
    case DType::kInt64:
      return FromField<int64_t>(wire, shape, n, proto.int64_val(), "int64_val", max_bytes,
                                [](int64_t v) { return v; }, out);
    case DType::kBool:
      return FromField<bool>(wire, shape, n, proto.bool_val(), "bool_val", max_bytes,
                             [](bool v) { return v; }, out);
    case DType::kString:
      return FromStrings(proto, shape, n, max_bytes, out);
    case DType::kFloat16:
      return FromField<float16>(wire, shape, n, proto.half_val(), "half_val", max_bytes,
                                [](int32_t v) { return float16::FromBits(static_cast<uint16_t>(v & 0xffff)); },
                                out);
    // TensorFlow carries the integers narrower than 32 bits in int_val.
    case DType::kUInt8:
      return FromField<uint8_t>(wire, shape, n, proto.int_val(), "int_val", max_bytes,
                                [](int32_t v) { return static_cast<uint8_t>(v); }, out);
    case DType::kInt8:
      return FromField<int8_t>(wire, shape, n, proto.int_val(), "int_val", max_bytes,
                               [](int32_t v) { return static_cast<int8_t>(v); }, out);
    case DType::kUInt16:
      return FromField<uint16_t>(wire, shape, n, proto.int_val(), "int_val", max_bytes,
                                 [](int32_t v) { return static_cast<uint16_t>(v); }, out);
    case DType::kInt16:
      return FromField<int16_t>(wire, shape, n, proto.int_val(), "int_val", max_bytes,
                                [](int32_t v) { return static_cast<int16_t>(v); }, out);
    case DType::kUInt32:
      return FromField<uint32_t>(wire, shape, n, proto.uint32_val(), "uint32_val", max_bytes,
                                 [](uint32_t v) { return v; }, out);
    case DType::kUInt64:
      return FromField<uint64_t>(wire, shape, n, proto.uint64_val(), "uint64_val", max_bytes,
                                 [](uint64_t v) { return static_cast<uint64_t>(v); }, out);
    case DType::kInvalid:
      break;
  }
  return Internal("unreachable dtype in TensorFromProto");
}

StatusOr<Tensor> TensorFromProto(const tensorflow::TensorProto& proto, int64_t max_bytes) {
  Tensor tensor;
  LS_RETURN_IF_ERROR(TensorFromProto(proto, max_bytes, &tensor));
  return tensor;
}

Status TensorToProto(const Tensor& tensor, tensorflow::TensorProto* proto) {
  ClearKeepingCapacity(proto);
  // Repeated fields count in int; a larger tensor could not be sent anyway (messages stop at
  // 2 GiB), but must not overflow the count.
  if (tensor.num_elements() > std::numeric_limits<int>::max()) {
    return ResourceExhausted("tensor " + std::string(DTypeName(tensor.dtype())) +
                             tensor.shape().ToString() + " has too many elements to encode");
  }
  proto->set_dtype(DTypeToDataType(tensor.dtype()));
  ShapeToProto(tensor.shape(), proto->mutable_tensor_shape());
  switch (tensor.dtype()) {
    case DType::kFloat32:
      CopyOut(tensor.data<float>(), proto->mutable_float_val());
      break;
    case DType::kFloat64:
      CopyOut(tensor.data<double>(), proto->mutable_double_val());
      break;
    case DType::kBFloat16: CopyHalfBitsOut(tensor.data<bfloat16>(), proto->mutable_half_val()); break;
    case DType::kInt32:
      CopyOut(tensor.data<int32_t>(), proto->mutable_int_val());
      break;
    case DType::kInt64: {
      // int64_t and protobuf's int64 are both 64-bit but may be distinct types (long vs long
      // long), so copy element by element rather than reinterpret.
      auto* field = proto->mutable_int64_val();
      std::span<const int64_t> values = tensor.data<int64_t>();
      field->Reserve(static_cast<int>(values.size()));
      for (int64_t v : values) field->AddAlreadyReserved(v);
      break;
    }
    case DType::kBool: {
      auto* field = proto->mutable_bool_val();
      std::span<const bool> values = tensor.data<bool>();
      field->Reserve(static_cast<int>(values.size()));
      for (bool v : values) field->AddAlreadyReserved(v);
      break;
    }
    case DType::kString: {
      auto* field = proto->mutable_string_val();
      std::span<const std::string> values = tensor.data<std::string>();
      field->Reserve(static_cast<int>(values.size()));
      for (const std::string& v : values) field->Add()->assign(v);
      break;
    }
    case DType::kFloat16: CopyHalfBitsOut(tensor.data<float16>(), proto->mutable_half_val()); break;
    case DType::kUInt8: CopyIntegersOut(tensor.data<uint8_t>(), proto->mutable_int_val()); break;
    case DType::kInt8: CopyIntegersOut(tensor.data<int8_t>(), proto->mutable_int_val()); break;
    case DType::kUInt16: CopyIntegersOut(tensor.data<uint16_t>(), proto->mutable_int_val()); break;
    case DType::kInt16: CopyIntegersOut(tensor.data<int16_t>(), proto->mutable_int_val()); break;
    case DType::kUInt32: CopyIntegersOut(tensor.data<uint32_t>(), proto->mutable_uint32_val()); break;
    case DType::kUInt64: CopyIntegersOut(tensor.data<uint64_t>(), proto->mutable_uint64_val()); break;
    case DType::kInvalid:
      break;
  }
  return Status::Ok();
}

tensorflow::TensorInfo TensorInfoFromBinding(const TensorBinding& binding) {
  tensorflow::TensorInfo info;
  info.set_name(binding.tensor);
  info.set_dtype(DTypeToDataType(binding.dtype));
  ShapeToProto(binding.shape, info.mutable_tensor_shape());
  return info;
}

tensorflow::SignatureDef SignatureDefFromSignature(const Signature& signature) {
  tensorflow::SignatureDef def;
  for (const TensorBinding& b : signature.inputs) (*def.mutable_inputs())[b.key] = TensorInfoFromBinding(b);
  for (const TensorBinding& b : signature.outputs) (*def.mutable_outputs())[b.key] = TensorInfoFromBinding(b);
  def.set_method_name(signature.method_name);
  return def;
}

}  // namespace lockstep
