// What every candidate of bench_json_reader does per value: check the nesting is a rectangular
// tensor, turn a double into a float with today's rules, recognise NaN / Infinity / -Infinity.
#pragma once

#include <optional>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string_view>

#include "bench/serving/json_reader_bench.h"
#include "runtime/tensor_json.h"
#include "server/json_tensor_sink.h"

namespace lockstep_bench {
namespace {

inline bool IsJsonSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// Today's float32 rule (runtime/tensor_json.h JsonNumberToFloat32). False also for today's
// NaN / Infinity sentinels (1.25e308, 1.5e308): a fast path declines them and today's path
// reads them.
inline bool ToFloat(double d, float* f) {
  if (lockstep::IsJsonSpecialSentinel(d)) return false;
  const std::optional<float> value = lockstep::JsonNumberToFloat32(d);
  if (!value) return false;
  *f = *value;
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

// The server's shape check (server/json_tensor_sink.h) writing into a Decoded.
class FloatSink {
 public:
  void Reset(Decoded& out) {
    decoded_ = &out;
    sink_.Reset(out.values.data(), out.values.size());
  }
  bool BeginArray() { return sink_.BeginArray(); }
  bool EndArray() { return sink_.EndArray(); }
  bool Number(float f) { return sink_.Number(f); }
  int depth() const { return sink_.depth(); }

  // The value is complete: publish its shape. Row form needs a non-empty list.
  bool Finish(bool row_format) {
    lockstep::Shape shape;
    if (!sink_.Finish(row_format, &shape)) return false;
    Decoded& out = *decoded_;
    out.count = sink_.count();
    out.rank = shape.rank();
    for (int i = 0; i < shape.rank(); ++i) out.dims[i] = shape[i];
    out.row_format = row_format;
    return true;
  }

 private:
  lockstep::TensorSink<float> sink_;
  Decoded* decoded_ = nullptr;
};

}  // namespace
}  // namespace lockstep_bench
