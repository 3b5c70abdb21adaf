// The shape check of a streaming JSON tensor reader (server/predict_body_reader.cc, and the
// candidates of bench/serving/json_reader_bench.cc): the events of one tensor value's nesting
// in, the numbers and the shape out, accepting exactly the nests TensorFromJson accepts.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>

#include "runtime/shape.h"

namespace lockstep {

// The numbers of one tensor value as they stream past, with its nesting: accepts exactly the
// rectangular nests TensorFromJson accepts (every list at one depth as long as the others,
// every number at the same depth, at most Shape::kMaxRank deep) and writes the numbers into
// a buffer sized beforehand.
template <typename T>
class TensorSink {
 public:
  void Reset(T* out, size_t capacity) {
    out_ = out;
    capacity_ = capacity;
    count_ = 0;
    depth_ = 0;
    rank_ = -1;
    std::fill(std::begin(dim_known_), std::end(dim_known_), false);
  }

  bool BeginArray() {
    if (depth_ > 0) ++length_[depth_];
    if (depth_ == Shape::kMaxRank || (rank_ >= 0 && depth_ >= rank_)) return false;
    ++depth_;
    length_[depth_] = 0;
    return true;
  }

  bool EndArray() {
    const int64_t length = length_[depth_];
    const int dim = --depth_;
    if (rank_ < 0) rank_ = dim + 1;  // an empty innermost list: [], [[], []]
    if (!dim_known_[dim]) {
      dims_[dim] = length;
      dim_known_[dim] = true;
      return true;
    }
    return dims_[dim] == length;
  }

  bool Number(T value) {
    if (depth_ > 0) ++length_[depth_];
    if (rank_ < 0) {
      rank_ = depth_;
    } else if (depth_ != rank_) {
      return false;
    }
    if (count_ == capacity_) return false;
    out_[count_++] = value;
    return true;
  }

  // The value is complete: its shape. The row form needs a non-empty list.
  bool Finish(bool row_format, Shape* shape) const {
    if (depth_ != 0 || rank_ < 0) return false;
    if (row_format && (rank_ == 0 || dims_[0] == 0)) return false;
    *shape = Shape();
    for (int i = 0; i < rank_; ++i) shape->AddDim(dims_[i]);
    return true;
  }

  size_t count() const { return count_; }
  int depth() const { return depth_; }

 private:
  T* out_ = nullptr;
  size_t capacity_ = 0;
  size_t count_ = 0;
  int depth_ = 0;   // lists open
  int rank_ = -1;   // unknown until the first number, or the first empty list closes
  int64_t length_[Shape::kMaxRank + 1] = {};  // elements so far in the open list at each depth
  int64_t dims_[Shape::kMaxRank] = {};
  bool dim_known_[Shape::kMaxRank] = {};
};

}  // namespace lockstep
