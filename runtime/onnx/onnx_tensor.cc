#include "runtime/onnx/onnx_tensor.h"

#include <cstring>
#include <limits>
#include <type_traits>

#include "runtime/bundle/file_image.h"

namespace lockstep {
namespace {

using onnx::TensorProto;

// The typed field a value of `dtype` lives in when raw_data is empty, and how many it holds.
int TypedCount(const TensorProto& p, DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return p.float_data_size();
    case DType::kFloat64: return p.double_data_size();
    case DType::kInt32:
    case DType::kBool:
    case DType::kBFloat16:
    case DType::kFloat16:
    case DType::kUInt8:
    case DType::kInt8:
    case DType::kUInt16:
    case DType::kInt16: return p.int32_data_size();
    case DType::kInt64: return p.int64_data_size();
    case DType::kUInt32:
    case DType::kUInt64: return p.uint64_data_size();
    case DType::kString: return p.string_data_size();
    default: return 0;
  }
}

// The narrower integers and float16 (its bits) from int32_data, uint32 and uint64 from
// uint64_data: the low bits of each value, as ONNX stores them.
template <typename T, typename Field>
void CopyNarrowed(const Field& field, Tensor& t) {
  T* out = static_cast<T*>(t.mutable_raw_data());
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    const auto v = field.Get(static_cast<int>(i));
    if constexpr (std::is_same_v<T, float16>) {
      out[i] = float16::FromBits(static_cast<uint16_t>(v));
    } else {
      out[i] = static_cast<T>(v);
    }
  }
}

void CopyTyped(const TensorProto& p, Tensor& t) {
  const int64_t n = t.num_elements();
  switch (t.dtype()) {
    case DType::kFloat16: CopyNarrowed<float16>(p.int32_data(), t); break;
    case DType::kUInt8: CopyNarrowed<uint8_t>(p.int32_data(), t); break;
    case DType::kInt8: CopyNarrowed<int8_t>(p.int32_data(), t); break;
    case DType::kUInt16: CopyNarrowed<uint16_t>(p.int32_data(), t); break;
    case DType::kInt16: CopyNarrowed<int16_t>(p.int32_data(), t); break;
    case DType::kUInt32: CopyNarrowed<uint32_t>(p.uint64_data(), t); break;
    case DType::kUInt64: CopyNarrowed<uint64_t>(p.uint64_data(), t); break;
    case DType::kFloat32: {
      auto out = t.mutable_data<float>();
      for (int64_t i = 0; i < n; ++i) out[i] = p.float_data(static_cast<int>(i));
      break;
    }
    case DType::kFloat64: {
      auto out = t.mutable_data<double>();
      for (int64_t i = 0; i < n; ++i) out[i] = p.double_data(static_cast<int>(i));
      break;
    }
    case DType::kInt32: {
      auto out = t.mutable_data<int32_t>();
      for (int64_t i = 0; i < n; ++i) out[i] = p.int32_data(static_cast<int>(i));
      break;
    }
    case DType::kBool: {
      auto out = t.mutable_data<bool>();
      for (int64_t i = 0; i < n; ++i) out[i] = p.int32_data(static_cast<int>(i)) != 0;
      break;
    }
    case DType::kBFloat16: {
      auto out = t.mutable_data<bfloat16>();
      for (int64_t i = 0; i < n; ++i) out[i] = bfloat16::FromBits(static_cast<uint16_t>(p.int32_data(static_cast<int>(i))));
      break;
    }
    case DType::kInt64: {
      auto out = t.mutable_data<int64_t>();
      for (int64_t i = 0; i < n; ++i) out[i] = p.int64_data(static_cast<int>(i));
      break;
    }
    case DType::kString: {
      auto out = t.mutable_data<std::string>();
      for (int64_t i = 0; i < n; ++i) out[i] = p.string_data(static_cast<int>(i));
      break;
    }
    default: break;
  }
}

// Little-endian bytes into `t` (numeric and bool dtypes). bool is one byte per element in
// ONNX, as in memory; any non-zero byte is true.
void CopyRaw(std::span<const std::byte> bytes, Tensor& t) {
  if (t.dtype() == DType::kBool) {
    auto out = t.mutable_data<bool>();
    for (size_t i = 0; i < out.size(); ++i) out[i] = bytes[i] != std::byte{0};
    return;
  }
  if (!bytes.empty()) std::memcpy(t.mutable_raw_data(), bytes.data(), bytes.size());
}

StatusOr<std::span<const std::byte>> ExternalBytes(const TensorProto& p, OnnxExternalData* external) {
  if (external == nullptr) return InvalidArgument("its data is in an external file, and no model directory is known");
  std::string location;
  uint64_t offset = 0;
  int64_t length = -1;
  for (const auto& entry : p.external_data()) {
    const std::string& key = entry.key();
    const std::string& value = entry.value();
    if (key == "location") {
      location = value;
    } else if (key == "offset" || key == "length") {
      char* end = nullptr;
      errno = 0;
      const unsigned long long v = std::strtoull(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || errno != 0 || value[0] == '-' ||
          v > static_cast<unsigned long long>(std::numeric_limits<int64_t>::max())) {
        return InvalidArgument("external data '" + key + "' is not a byte count: '" + value + "'");
      }
      if (key == "offset") offset = v;
      else length = static_cast<int64_t>(v);
    }
  }
  if (location.empty()) return InvalidArgument("external data has no 'location'");
  return external->Bytes(location, offset, length);
}

}  // namespace

StatusOr<DType> OnnxElemTypeToDType(int32_t elem_type) {
  switch (elem_type) {
    case TensorProto::FLOAT: return DType::kFloat32;
    case TensorProto::DOUBLE: return DType::kFloat64;
    case TensorProto::INT32: return DType::kInt32;
    case TensorProto::INT64: return DType::kInt64;
    case TensorProto::BOOL: return DType::kBool;
    case TensorProto::STRING: return DType::kString;
    case TensorProto::BFLOAT16: return DType::kBFloat16;
    case TensorProto::FLOAT16: return DType::kFloat16;
    case TensorProto::UINT8: return DType::kUInt8;
    case TensorProto::INT8: return DType::kInt8;
    case TensorProto::UINT16: return DType::kUInt16;
    case TensorProto::INT16: return DType::kInt16;
    case TensorProto::UINT32: return DType::kUInt32;
    case TensorProto::UINT64: return DType::kUInt64;
    case kOnnxUInt4: return DType::kUInt8;
    case kOnnxInt4: return DType::kInt8;
    default: return Unimplemented("element type " + OnnxElemTypeName(elem_type) + " is not supported");
  }
}

int32_t DTypeToOnnxElemType(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return TensorProto::FLOAT;
    case DType::kFloat64: return TensorProto::DOUBLE;
    case DType::kInt32: return TensorProto::INT32;
    case DType::kInt64: return TensorProto::INT64;
    case DType::kBool: return TensorProto::BOOL;
    case DType::kString: return TensorProto::STRING;
    case DType::kBFloat16: return TensorProto::BFLOAT16;
    case DType::kFloat16: return TensorProto::FLOAT16;
    case DType::kUInt8: return TensorProto::UINT8;
    case DType::kInt8: return TensorProto::INT8;
    case DType::kUInt16: return TensorProto::UINT16;
    case DType::kInt16: return TensorProto::INT16;
    case DType::kUInt32: return TensorProto::UINT32;
    case DType::kUInt64: return TensorProto::UINT64;
    case DType::kInvalid: break;
  }
  return TensorProto::UNDEFINED;
}

TensorProto TensorToOnnx(const Tensor& t, const std::string& name) {
  TensorProto p;
  p.set_name(name);
  p.set_data_type(DTypeToOnnxElemType(t.dtype()));
  for (int64_t d : t.shape().dims()) p.add_dims(d);
  if (t.dtype() == DType::kString) {
    for (const std::string& s : t.data<std::string>()) p.add_string_data(s);
  } else if (t.dtype() == DType::kBool) {
    std::string bytes(static_cast<size_t>(t.num_elements()), '\0');
    std::span<const bool> values = t.data<bool>();
    for (size_t i = 0; i < values.size(); ++i) bytes[i] = values[i] ? 1 : 0;
    p.set_raw_data(std::move(bytes));
  } else {
    p.set_raw_data(static_cast<const char*>(t.raw_data()), t.byte_size());
  }
  return p;
}

DType ComputeDType(DType dtype) {
  return dtype == DType::kFloat16 || dtype == DType::kBFloat16 ? DType::kFloat32 : dtype;
}

std::string OnnxElemTypeName(int32_t elem_type) {
  if (elem_type == kOnnxUInt4) return "UINT4";
  if (elem_type == kOnnxInt4) return "INT4";
  if (onnx::TensorProto_DataType_IsValid(elem_type)) {
    return onnx::TensorProto_DataType_Name(static_cast<TensorProto::DataType>(elem_type));
  }
  return "elem_type " + std::to_string(elem_type);
}

OnnxExternalData::OnnxExternalData(std::filesystem::path model_dir) {
  // Absolute, so that a model read from the working directory (an empty parent path) still
  // has a directory that every location is held inside.
  std::error_code ec;
  dir_ = std::filesystem::absolute(model_dir.empty() ? std::filesystem::path(".") : model_dir, ec);
}
OnnxExternalData::~OnnxExternalData() = default;

StatusOr<std::span<const std::byte>> OnnxExternalData::Bytes(const std::string& location, uint64_t offset,
                                                             int64_t length) {
  namespace fs = std::filesystem;
  const fs::path relative(location);
  if (location.empty() || relative.is_absolute() || relative.has_root_name()) {
    return InvalidArgument("external data location '" + location + "' must be a path relative to the model's directory");
  }
  for (const fs::path& part : relative) {
    if (part == "..") return InvalidArgument("external data location '" + location + "' leaves the model's directory");
  }
  auto it = files_.find(location);
  if (it == files_.end()) {
    std::error_code dir_ec, file_ec;
    const fs::path dir = fs::canonical(dir_, dir_ec);
    const fs::path file = fs::weakly_canonical(dir_ / relative, file_ec);
    if (dir_ec || dir.empty()) return NotFound("the model's directory: " + dir_ec.message());
    if (file_ec) return NotFound("external data file '" + location + "': " + file_ec.message());
    // A symlink below the directory may still point out of it; the resolved path decides.
    auto [d, f] = std::mismatch(dir.begin(), dir.end(), file.begin(), file.end());
    if (d != dir.end()) return InvalidArgument("external data location '" + location + "' leaves the model's directory");
    StatusOr<std::shared_ptr<const FileImage>> image = FileImage::Read(file, kMaxOnnxTensorBytes);
    if (!image.ok()) return image.status().WithPrefix("external data file '" + location + "'");
    it = files_.emplace(location, std::move(*image)).first;
  }
  const FileImage& image = *it->second;
  const uint64_t size = image.size();
  if (offset > size || (length >= 0 && static_cast<uint64_t>(length) > size - offset)) {
    return InvalidArgument("external data '" + location + "' has " + std::to_string(size) + " bytes; offset " +
                           std::to_string(offset) + " and length " + std::to_string(length) + " lie outside it");
  }
  const uint64_t n = length >= 0 ? static_cast<uint64_t>(length) : size - offset;
  return image.bytes().subspan(offset, n);
}

StatusOr<Tensor> TensorFromOnnx(const TensorProto& proto, OnnxExternalData* external, int64_t max_bytes) {
  const std::string what = proto.name().empty() ? std::string("tensor") : "tensor '" + proto.name() + "'";
  auto fail = [&](const Status& s) { return s.WithPrefix(what); };
  if (proto.has_segment()) return fail(Unimplemented("segmented tensors are not supported"));
  StatusOr<DType> dtype = OnnxElemTypeToDType(proto.data_type());
  if (!dtype.ok()) return fail(dtype.status());
  std::vector<int64_t> dims(proto.dims().begin(), proto.dims().end());
  for (int64_t d : dims) {
    if (d < 0) return fail(InvalidArgument("dimension " + std::to_string(d) + " is negative"));
  }
  StatusOr<Shape> shape = Shape::FromDims(dims);
  if (!shape.ok()) return fail(shape.status());
  const int64_t elements = shape->num_elements();
  const int64_t element_size = static_cast<int64_t>(*dtype == DType::kString ? 1 : DTypeSize(*dtype));
  if (elements > max_bytes / element_size) {
    return fail(ResourceExhausted("shape " + shape->ToString() + " needs more than " + std::to_string(max_bytes) +
                                  " bytes"));
  }

  const bool nibbles = proto.data_type() == kOnnxUInt4 || proto.data_type() == kOnnxInt4;
  std::span<const std::byte> raw;
  const bool is_external = proto.data_location() == TensorProto::EXTERNAL;
  if (is_external) {
    StatusOr<std::span<const std::byte>> bytes = ExternalBytes(proto, external);
    if (!bytes.ok()) return fail(bytes.status());
    raw = *bytes;
  } else if (!proto.raw_data().empty()) {
    raw = std::as_bytes(std::span<const char>(proto.raw_data().data(), proto.raw_data().size()));
  }
  if (*dtype == DType::kString && (is_external || !proto.raw_data().empty())) {
    return fail(InvalidArgument("string tensors must use string_data"));
  }
  // The data must fill the shape exactly; checked before anything is allocated, so that a few
  // bytes of model cannot claim gigabytes.
  const bool has_raw = is_external || !proto.raw_data().empty();
  if (nibbles) {
    // Packed bytes, from raw data or one to an int32_data entry.
    const size_t packed = static_cast<size_t>((elements + 1) / 2);
    const size_t given = has_raw ? raw.size() : static_cast<size_t>(proto.int32_data_size());
    if (given != packed) {
      return fail(InvalidArgument("holds " + std::to_string(given) + " bytes of 4-bit data, but shape " +
                                  shape->ToString() + " needs " + std::to_string(packed)));
    }
    Tensor t(*dtype, *shape);
    auto* out = static_cast<uint8_t*>(t.mutable_raw_data());
    const bool is_signed = proto.data_type() == kOnnxInt4;
    for (int64_t i = 0; i < elements; ++i) {
      const size_t at = static_cast<size_t>(i / 2);
      const unsigned byte = has_raw ? std::to_integer<unsigned>(raw[at]) : static_cast<unsigned>(proto.int32_data(static_cast<int>(at))) & 0xffu;
      const unsigned nibble = (i % 2 == 0 ? byte : byte >> 4) & 0xfu;
      // Sign-extended for INT4: 8 to 15 stand for -8 to -1.
      out[i] = static_cast<uint8_t>(is_signed && nibble >= 8 ? nibble | 0xf0u : nibble);
    }
    return t;
  }
  if (has_raw) {
    const uint64_t wanted = static_cast<uint64_t>(elements) * static_cast<uint64_t>(element_size);
    if (raw.size() != wanted) {
      return fail(InvalidArgument("holds " + std::to_string(raw.size()) + " bytes of data, but shape " +
                                  shape->ToString() + " of " + std::string(DTypeName(*dtype)) + " needs " +
                                  std::to_string(wanted)));
    }
    Tensor t(*dtype, *shape);
    CopyRaw(raw, t);
    return t;
  }
  const int count = TypedCount(proto, *dtype);
  if (count != elements) {
    return fail(InvalidArgument("holds " + std::to_string(count) + " values, but shape " + shape->ToString() +
                                " has " + std::to_string(elements) + " elements"));
  }
  Tensor t(*dtype, *shape);
  CopyTyped(proto, t);
  return t;
}

}  // namespace lockstep
