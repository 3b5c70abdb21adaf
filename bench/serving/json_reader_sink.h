// What every candidate of bench_json_reader does per value: check the nesting is a rectangular
// tensor, turn a double into a float with today's rules, recognise NaN / Infinity / -Infinity.
// In an unnamed namespace on purpose: each translation unit (some built for AVX2 or AVX-512)
// keeps its own copy instead of sharing one the linker picks.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string_view>

#include "bench/serving/json_reader_bench.h"

namespace lockstep_bench {
namespace {

inline bool IsJsonSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// Today's float32 rule (runtime/tensor_json.cc ToNumber): a double at or past the midpoint of
// FLT_MAX and 2^128 is out of range; one between FLT_MAX and that midpoint is FLT_MAX;
// anything else is rounded to nearest. False also for today's NaN / Infinity sentinels
// (1.25e308, 1.5e308): a fast path declines them and today's path reads them.
inline bool ToFloat(double d, float* f) {
  const double magnitude = std::fabs(d);
  if (!(magnitude < 0x1.ffffffp+127)) return false;
  if (magnitude > static_cast<double>(FLT_MAX)) {
    *f = d < 0 ? -FLT_MAX : FLT_MAX;
    return true;
  }
  *f = static_cast<float>(d);
  return true;
}

// TF Serving's bare tokens. `token` may carry trailing whitespace (simdjson's raw token does).
inline bool SpecialToken(std::string_view token, float* f) {
  while (!token.empty() && IsJsonSpace(token.back())) token.remove_suffix(1);
  if (token == "NaN") {
    *f = std::numeric_limits<float>::quiet_NaN();
  } else if (token == "Infinity") {
    *f = std::numeric_limits<float>::infinity();
  } else if (token == "-Infinity") {
    *f = -std::numeric_limits<float>::infinity();
  } else {
    return false;
  }
  return true;
}

// nlohmann reads "-0" (no fraction, no exponent) as the integer 0, so today's path gives +0.0
// for it; the fast paths do the same. Called only for a -0.0 result.
inline bool IsIntegerToken(std::string_view token) { return token.find_first_of(".eE") == std::string_view::npos; }

// Receives the nesting of one tensor value as it streams past: arrays open and close, numbers
// arrive. Accepts exactly what today's InferShape + Fill accept: every list at one depth has
// the same length, every number sits at the same depth (the rank), nothing nests past it or
// past kMaxRank. Writes the floats into `out`, never past its capacity.
class FloatSink {
 public:
  void Reset(Decoded& out) {
    out_ = out.values.data();
    capacity_ = out.values.size();
    count_ = 0;
    depth_ = 0;
    rank_ = -1;
    for (bool& k : dim_known_) k = false;
    decoded_ = &out;
  }

  bool BeginArray() {
    if (depth_ > 0) ++length_[depth_];
    if (depth_ == kMaxRank || (rank_ >= 0 && depth_ >= rank_)) return false;
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
    } else if (dims_[dim] != length) {
      return false;
    }
    return true;
  }

  bool Number(float f) {
    if (depth_ > 0) ++length_[depth_];
    if (rank_ < 0) {
      rank_ = depth_;
    } else if (depth_ != rank_) {
      return false;
    }
    if (count_ == capacity_) return false;
    out_[count_++] = f;
    return true;
  }

  int depth() const { return depth_; }

  // The value is complete: publish its shape. Row form needs a non-empty list.
  bool Finish(bool row_format) {
    if (depth_ != 0 || rank_ < 0) return false;
    if (row_format && (rank_ == 0 || dims_[0] == 0)) return false;
    Decoded& out = *decoded_;
    out.count = count_;
    out.rank = rank_;
    for (int i = 0; i < rank_; ++i) out.dims[i] = dims_[i];
    out.row_format = row_format;
    return true;
  }

 private:
  float* out_ = nullptr;
  size_t capacity_ = 0;
  size_t count_ = 0;
  int depth_ = 0;  // lists open
  int rank_ = -1;  // unknown until the first number or the first empty list closes
  int64_t length_[kMaxRank + 1] = {};  // elements so far in the open list at each depth
  int64_t dims_[kMaxRank] = {};
  bool dim_known_[kMaxRank] = {};
  Decoded* decoded_ = nullptr;
};

}  // namespace
}  // namespace lockstep_bench
