// Tensor: a typed, shaped, row-major array. Cheap to copy: copies share the storage.
//
// Storage is one of
//   - owned: 64-byte-aligned, zero-initialised, freed with the last copy;
//   - a read-only view over memory someone else keeps alive (a bundle's weights file, read whole);
//   - a writable view over memory someone else keeps alive (an executor's arena).
// String tensors hold std::string elements (arbitrary bytes) and are always owned.
#pragma once

#include <cassert>
#include <cstddef>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "runtime/dtype.h"
#include "runtime/shape.h"

namespace lockstep {

inline constexpr size_t kTensorAlignment = 64;

class Tensor {
 public:
  // An empty float32 tensor of shape [0]; allocates nothing.
  Tensor();
  // Owned, zeroed storage. `shape` must be fully defined.
  Tensor(DType dtype, const Shape& shape);

  // A read-only view of `data`, which `owner` keeps alive (it may be null if the caller
  // guarantees the lifetime). Not for kString.
  static Tensor View(DType dtype, const Shape& shape, const void* data,
                     std::shared_ptr<const void> owner);
  // A writable view of `data`; same lifetime rule.
  static Tensor MutableView(DType dtype, const Shape& shape, void* data,
                            std::shared_ptr<void> owner);

  template <typename T>
  static Tensor FromVector(const Shape& shape, const std::vector<T>& values) {
    Tensor t(DTypeOf<T>::value, shape);
    assert(static_cast<int64_t>(values.size()) == t.num_elements());
    std::span<T> out = t.mutable_data<T>();
    for (size_t i = 0; i < values.size(); ++i) out[i] = values[i];
    return t;
  }
  template <typename T>
  static Tensor Scalar(T value) { return FromVector<T>(Shape{}, {value}); }

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t num_elements() const { return num_elements_; }
  size_t byte_size() const { return static_cast<size_t>(num_elements_) * DTypeSize(dtype_); }
  bool read_only() const { return read_only_; }

  const void* raw_data() const { return data_; }
  void* mutable_raw_data() {
    assert(!read_only_);
    return data_;
  }

  template <typename T>
  std::span<const T> data() const {
    assert(DTypeOf<T>::value == dtype_);
    return {static_cast<const T*>(data_), static_cast<size_t>(num_elements_)};
  }
  template <typename T>
  std::span<T> mutable_data() {
    assert(DTypeOf<T>::value == dtype_ && !read_only_);
    return {static_cast<T*>(data_), static_cast<size_t>(num_elements_)};
  }

  // The same storage under another shape with as many elements.
  Tensor Reshaped(const Shape& shape) const;
  // Rows [begin, begin + count) along the first dimension, sharing the storage (a shard of a
  // batch). Not for scalars.
  Tensor Rows(int64_t begin, int64_t count) const;
  // A deep, owned copy.
  Tensor Clone() const;
  // Makes this tensor a deep copy of `src`: in place, allocating nothing, when this one has
  // src's dtype and shape, is writable, and no other Tensor shares its storage; otherwise it
  // becomes src.Clone(). For callers that run the same computation again and again.
  void AssignCopyOf(const Tensor& src);
  // Whether this tensor could be written in place as a value of `dtype` and `shape`: it has
  // them, is writable, is not a string tensor, and no other Tensor shares its storage.
  bool Writable(DType dtype, const Shape& shape) const;

  // Same dtype, shape and bytes (strings compared by value; floats bitwise).
  bool BitwiseEqual(const Tensor& other) const;

  // "float32[2,3]{1, 2, 3, ...}" for logs and test failures.
  std::string DebugString(int max_elements = 16) const;

 private:
  DType dtype_ = DType::kFloat32;
  Shape shape_;
  int64_t num_elements_ = 0;
  bool read_only_ = false;
  void* data_ = nullptr;
  std::shared_ptr<const void> owner_;
};

// Allocates `bytes` (rounded up to kTensorAlignment) aligned to kTensorAlignment.
std::shared_ptr<void> AllocateAligned(size_t bytes);

}  // namespace lockstep
