#include "runtime/tensor.h"

#include <cstdlib>
#include <new>
#include <sstream>

namespace lockstep {

std::shared_ptr<void> AllocateAligned(size_t bytes) {
  size_t rounded = (bytes + kTensorAlignment - 1) / kTensorAlignment * kTensorAlignment;
  if (rounded == 0) rounded = kTensorAlignment;
  void* p = std::aligned_alloc(kTensorAlignment, rounded);
  if (p == nullptr) throw std::bad_alloc();
  std::memset(p, 0, rounded);
  return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
}

Tensor::Tensor() : shape_{0} {}

Tensor::Tensor(DType dtype, const Shape& shape) : dtype_(dtype), shape_(shape) {
  assert(shape.IsFullyDefined());
  num_elements_ = shape.num_elements();
  if (dtype == DType::kString) {
    auto strings = std::make_shared<std::vector<std::string>>(static_cast<size_t>(num_elements_));
    data_ = strings->data();
    owner_ = std::move(strings);
  } else {
    auto storage = AllocateAligned(byte_size());
    data_ = storage.get();
    owner_ = std::move(storage);
  }
}

Tensor Tensor::View(DType dtype, const Shape& shape, const void* data,
                    std::shared_ptr<const void> owner) {
  assert(dtype != DType::kString && shape.IsFullyDefined());
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.num_elements_ = shape.num_elements();
  t.read_only_ = true;
  t.data_ = const_cast<void*>(data);  // guarded by read_only_
  t.owner_ = std::move(owner);
  return t;
}

Tensor Tensor::MutableView(DType dtype, const Shape& shape, void* data,
                           std::shared_ptr<void> owner) {
  assert(dtype != DType::kString && shape.IsFullyDefined());
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.num_elements_ = shape.num_elements();
  t.read_only_ = false;
  t.data_ = data;
  t.owner_ = std::move(owner);
  return t;
}

Tensor Tensor::Reshaped(const Shape& shape) const {
  assert(shape.num_elements() == num_elements_);
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

Tensor Tensor::Rows(int64_t begin, int64_t count) const {
  assert(shape_.rank() >= 1 && begin >= 0 && count >= 0 && begin + count <= shape_.dim(0));
  const int64_t row = shape_.dim(0) == 0 ? 0 : num_elements_ / shape_.dim(0);
  Tensor t = *this;
  t.shape_.set_dim(0, count);
  t.num_elements_ = row * count;
  t.data_ = static_cast<char*>(data_) + static_cast<size_t>(begin * row) * DTypeSize(dtype_);
  return t;
}

Tensor Tensor::Clone() const {
  Tensor t(dtype_, shape_);
  if (dtype_ == DType::kString) {
    auto src = data<std::string>();
    auto dst = t.mutable_data<std::string>();
    for (size_t i = 0; i < src.size(); ++i) dst[i] = src[i];
  } else if (byte_size() > 0) {
    std::memcpy(t.data_, data_, byte_size());
  }
  return t;
}

bool Tensor::Writable(DType dtype, const Shape& shape) const {
  return dtype_ == dtype && dtype_ != DType::kString && shape_ == shape && !read_only_ && owner_ != nullptr &&
         owner_.use_count() == 1;
}

void Tensor::AssignCopyOf(const Tensor& src) {
  // Already the value (computed in place, see Session::Run).
  if (data_ == src.data_ && dtype_ == src.dtype_ && shape_ == src.shape_ && data_ != nullptr) return;
  if (!Writable(src.dtype_, src.shape_)) {
    *this = src.Clone();
    return;
  }
  if (byte_size() > 0) std::memcpy(data_, src.data_, byte_size());
}

bool Tensor::BitwiseEqual(const Tensor& other) const {
  if (dtype_ != other.dtype_ || !(shape_ == other.shape_)) return false;
  if (dtype_ == DType::kString) {
    auto a = data<std::string>();
    auto b = other.data<std::string>();
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i] != b[i]) return false;
    }
    return true;
  }
  return byte_size() == 0 || std::memcmp(data_, other.data_, byte_size()) == 0;
}

std::string Tensor::DebugString(int max_elements) const {
  std::ostringstream out;
  out << DTypeName(dtype_) << shape_.ToString() << "{";
  int64_t n = std::min<int64_t>(num_elements_, max_elements);
  for (int64_t i = 0; i < n; ++i) {
    if (i) out << ", ";
    switch (dtype_) {
      case DType::kFloat32: out << data<float>()[i]; break;
      case DType::kFloat64: out << data<double>()[i]; break;
      case DType::kBFloat16: out << Bfloat16ToFloat(data<bfloat16>()[i]); break;
      case DType::kInt32: out << data<int32_t>()[i]; break;
      case DType::kInt64: out << data<int64_t>()[i]; break;
      case DType::kBool: out << (data<bool>()[i] ? "true" : "false"); break;
      case DType::kString: out << '"' << data<std::string>()[i] << '"'; break;
      case DType::kFloat16: out << Float16ToFloat(data<float16>()[i]); break;
      case DType::kUInt8: out << static_cast<int>(data<uint8_t>()[i]); break;
      case DType::kInt8: out << static_cast<int>(data<int8_t>()[i]); break;
      case DType::kUInt16: out << data<uint16_t>()[i]; break;
      case DType::kInt16: out << data<int16_t>()[i]; break;
      case DType::kUInt32: out << data<uint32_t>()[i]; break;
      case DType::kUInt64: out << data<uint64_t>()[i]; break;
      case DType::kInvalid: break;
    }
  }
  if (num_elements_ > n) out << ", ...";
  out << "}";
  return out.str();
}

}  // namespace lockstep
