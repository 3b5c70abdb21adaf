#include "server/open_inference/datatype.h"

#include <array>
#include <bit>
#include <cstdint>
#include <cstring>

namespace lockstep::open_inference {

// Raw contents are little-endian: on a little-endian machine they are the tensor's own bytes.
static_assert(std::endian::native == std::endian::little, "raw tensor contents assume a little-endian host");

namespace {

struct Datatype {
  std::string_view name;
  DType dtype;
};

constexpr std::array<Datatype, 14> kDatatypes = {{
    {"BOOL", DType::kBool},
    {"UINT8", DType::kUInt8},
    {"UINT16", DType::kUInt16},
    {"UINT32", DType::kUInt32},
    {"UINT64", DType::kUInt64},
    {"INT8", DType::kInt8},
    {"INT16", DType::kInt16},
    {"INT32", DType::kInt32},
    {"INT64", DType::kInt64},
    {"FP16", DType::kFloat16},
    {"FP32", DType::kFloat32},
    {"FP64", DType::kFloat64},
    {"BF16", DType::kBFloat16},
    {"BYTES", DType::kString},
}};

// A BYTES element's length prefix.
constexpr size_t kLengthBytes = 4;

}  // namespace

StatusOr<DType> DTypeFromDatatype(std::string_view datatype) {
  for (const Datatype& d : kDatatypes) {
    if (d.name != datatype) continue;
    return d.dtype;
  }
  return InvalidArgument("unknown datatype '" + std::string(datatype) + "'");
}

std::string_view DatatypeName(DType dtype) {
  for (const Datatype& d : kDatatypes) {
    if (d.dtype == dtype) return d.name;
  }
  return "INVALID";
}

size_t RawByteSize(const Tensor& tensor) {
  if (tensor.dtype() != DType::kString) return tensor.byte_size();
  size_t bytes = 0;
  for (const std::string& s : tensor.data<std::string>()) bytes += kLengthBytes + s.size();
  return bytes;
}

void AppendRawContents(const Tensor& tensor, std::string* out) {
  if (tensor.dtype() != DType::kString) {
    out->append(static_cast<const char*>(tensor.raw_data()), tensor.byte_size());
    return;
  }
  for (const std::string& s : tensor.data<std::string>()) {
    const auto length = static_cast<uint32_t>(s.size());
    char prefix[kLengthBytes];
    std::memcpy(prefix, &length, kLengthBytes);
    out->append(prefix, kLengthBytes);
    out->append(s);
  }
}

Status TensorFromRawContents(std::string_view input, DType dtype, const Shape& shape, std::string_view bytes,
                             Tensor* tensor) {
  const int64_t count = shape.num_elements();
  if (dtype != DType::kString) {
    const size_t expected = static_cast<size_t>(count) * DTypeSize(dtype);
    if (bytes.size() != expected) {
      return InvalidArgument("input '" + std::string(input) + "': " + std::to_string(bytes.size()) +
                             " bytes of raw contents, but " + std::string(DatatypeName(dtype)) + " " +
                             shape.ToString() + " takes " + std::to_string(expected));
    }
    if (!tensor->Writable(dtype, shape)) *tensor = Tensor(dtype, shape);
    if (expected > 0) std::memcpy(tensor->mutable_raw_data(), bytes.data(), expected);
    if (dtype == DType::kBool) {
      // A bool is one byte, 0 or 1; any other byte would be a bool the kernels cannot hold.
      const auto* b = static_cast<const unsigned char*>(tensor->raw_data());
      for (int64_t i = 0; i < count; ++i) {
        if (b[i] > 1) {
          return InvalidArgument("input '" + std::string(input) + "': BOOL element " + std::to_string(i) +
                                 " is byte " + std::to_string(b[i]) + ", not 0 or 1");
        }
      }
    }
    return Status::Ok();
  }
  // Strings are parsed first, so that a malformed body allocates nothing for its elements.
  size_t offset = 0;
  for (int64_t i = 0; i < count; ++i) {
    uint32_t length = 0;
    if (bytes.size() - offset < kLengthBytes ||
        (std::memcpy(&length, bytes.data() + offset, kLengthBytes), bytes.size() - offset - kLengthBytes < length)) {
      return InvalidArgument("input '" + std::string(input) + "': BYTES element " + std::to_string(i) + " of " +
                             std::to_string(count) + " runs past the end of its " + std::to_string(bytes.size()) +
                             " bytes of raw contents");
    }
    offset += kLengthBytes + length;
  }
  if (offset != bytes.size()) {
    return InvalidArgument("input '" + std::string(input) + "': " + std::to_string(bytes.size() - offset) +
                           " bytes of raw contents left after its " + std::to_string(count) + " BYTES elements");
  }
  *tensor = Tensor(DType::kString, shape);
  offset = 0;
  for (std::string& element : tensor->mutable_data<std::string>()) {
    uint32_t length = 0;
    std::memcpy(&length, bytes.data() + offset, kLengthBytes);
    element.assign(bytes.data() + offset + kLengthBytes, length);
    offset += kLengthBytes + length;
  }
  return Status::Ok();
}

}  // namespace lockstep::open_inference
