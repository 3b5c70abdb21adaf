// Shape: the dimensions of a tensor, row-major. A value type with inline storage, so that
// building one on a request's path allocates nothing. A dimension of -1 means "known only at
// run time" and appears only in signatures and in shape inference, never in a Tensor.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>

#include "runtime/status.h"

namespace lockstep {

class Shape {
 public:
  static constexpr int kMaxRank = 8;
  static constexpr int64_t kUnknownDim = -1;
  // The most elements any tensor may have (and the most the known dimensions of any shape
  // may multiply to, zeros aside). Far above real models; low enough that no element or byte
  // count derived from a valid shape overflows int64.
  static constexpr int64_t kMaxElements = int64_t{1} << 40;

  Shape() = default;  // a scalar
  Shape(std::initializer_list<int64_t> dims);
  // Fails when the rank exceeds kMaxRank, a dimension is below -1, or the known non-zero
  // dimensions multiply to more than kMaxElements. Every shape from outside comes through here.
  static StatusOr<Shape> FromDims(std::span<const int64_t> dims);

  int rank() const { return rank_; }
  int64_t dim(int i) const { return dims_[i]; }
  int64_t operator[](int i) const { return dims_[i]; }
  void set_dim(int i, int64_t value) { dims_[i] = value; }
  // Appends a dimension; false (and no change) when the shape is already at kMaxRank.
  bool AddDim(int64_t value);
  std::span<const int64_t> dims() const { return {dims_.data(), static_cast<size_t>(rank_)}; }

  bool IsFullyDefined() const;
  // Product of the dimensions (0 if any is 0); -1 when any is unknown. Exact for shapes that
  // passed FromDims or CheckedNumElements; callers must check shapes of other origin first.
  int64_t num_elements() const;
  // Product of the dimensions, failing on unknown dimensions, or when the non-zero ones
  // multiply to more than `limit` (so that a zero cannot hide an overflowing product).
  StatusOr<int64_t> CheckedNumElements(int64_t limit = kMaxElements) const;
  // Whether the known non-zero dimensions multiply to at most `limit`.
  bool KnownDimsWithin(int64_t limit = kMaxElements) const;

  // True when every known dimension of `pattern` equals ours (-1 in pattern matches anything).
  bool MatchesPattern(const Shape& pattern) const;

  // "[2,3]", "[-1,4]", "[]".
  std::string ToString() const;

  friend bool operator==(const Shape& a, const Shape& b);

 private:
  std::array<int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

}  // namespace lockstep
