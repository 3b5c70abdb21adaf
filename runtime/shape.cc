#include "runtime/shape.h"

#include <algorithm>

namespace lockstep {

Shape::Shape(std::initializer_list<int64_t> dims) {
  for (int64_t d : dims) AddDim(d);
}

StatusOr<Shape> Shape::FromDims(std::span<const int64_t> dims) {
  if (dims.size() > static_cast<size_t>(kMaxRank)) {
    return InvalidArgument("rank " + std::to_string(dims.size()) + " exceeds the maximum of " +
                           std::to_string(kMaxRank));
  }
  Shape s;
  for (int64_t d : dims) {
    if (d < kUnknownDim) return InvalidArgument("negative dimension " + std::to_string(d));
    s.AddDim(d);
  }
  if (!s.KnownDimsWithin()) {
    return InvalidArgument("shape " + s.ToString() + " has more than " + std::to_string(kMaxElements) + " elements");
  }
  return s;
}

bool Shape::AddDim(int64_t value) {
  if (rank_ >= kMaxRank) return false;
  dims_[rank_++] = value;
  return true;
}

bool Shape::IsFullyDefined() const {
  return std::none_of(dims_.begin(), dims_.begin() + rank_, [](int64_t d) { return d < 0; });
}

int64_t Shape::num_elements() const {
  int64_t n = 1;
  bool zero = false;
  for (int i = 0; i < rank_; ++i) {
    if (dims_[i] < 0) return -1;
    zero = zero || dims_[i] == 0;
  }
  if (zero) return 0;
  for (int i = 0; i < rank_; ++i) n *= dims_[i];
  return n;
}

bool Shape::KnownDimsWithin(int64_t limit) const {
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) {
    if (dims_[i] <= 0) continue;
    if (n > limit / dims_[i]) return false;
    n *= dims_[i];
  }
  return true;
}

StatusOr<int64_t> Shape::CheckedNumElements(int64_t limit) const {
  if (!IsFullyDefined()) return InvalidArgument("shape " + ToString() + " is not fully defined");
  if (!KnownDimsWithin(limit)) {
    return InvalidArgument("shape " + ToString() + " has more than " + std::to_string(limit) + " elements");
  }
  return num_elements();
}

bool Shape::MatchesPattern(const Shape& pattern) const {
  if (pattern.rank_ != rank_) return false;
  for (int i = 0; i < rank_; ++i) {
    if (pattern.dims_[i] >= 0 && pattern.dims_[i] != dims_[i]) return false;
  }
  return true;
}

std::string Shape::ToString() const {
  std::string out = "[";
  for (int i = 0; i < rank_; ++i) {
    if (i) out += ",";
    out += std::to_string(dims_[i]);
  }
  out += "]";
  return out;
}

bool operator==(const Shape& a, const Shape& b) {
  return a.rank_ == b.rank_ && std::equal(a.dims_.begin(), a.dims_.begin() + a.rank_, b.dims_.begin());
}

}  // namespace lockstep
