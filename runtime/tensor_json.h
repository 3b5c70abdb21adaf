// Tensors as JSON values: nested lists, row-major, one level per dimension. Used by
// model-cli and by the REST API. Floats are written in "%g" style with the fewest significant
// digits (six or more) that read back as the same float, so a client parsing the text gets
// the identical value; whole numbers keep a ".0"; NaN and infinities as NaN, Infinity,
// -Infinity, as TensorFlow Serving does, and read back the same way. Bytes may travel as
// {"b64": "<base64>"} objects, as in TensorFlow Serving's REST API.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/tensor.h"

namespace lockstep {

std::string FormatFloat(float value);
void AppendFloat(float value, std::string* out);  // FormatFloat without a temporary

// Parses JSON text, refusing (before parsing) any that nests deeper than `max_depth`. Bare
// NaN, Infinity and -Infinity outside strings are accepted; TensorFromJson reads them into
// float tensors (anywhere else they read as numbers beyond float's range).
StatusOr<nlohmann::json> ParseJson(std::string_view text, int max_depth = 64);

struct TensorJsonOptions {
  // Strings as {"b64": "..."} (TF Serving does so for outputs whose key ends in "_bytes").
  bool strings_as_b64 = false;
};

// Appends the tensor as JSON to `out`.
void AppendTensorJson(const Tensor& tensor, std::string* out, const TensorJsonOptions& options = {});
// Appends tensor[row], the slice at `row` of the first dimension (rank >= 1, row in range).
void AppendTensorRowJson(const Tensor& tensor, int64_t row, std::string* out, const TensorJsonOptions& options = {});

// Builds a tensor of `dtype` from a JSON value. The shape is the nesting of the lists, which
// must be rectangular; integer dtypes take only integers within their range, float dtypes
// any number within float range (rounded to nearest); strings (or {"b64": ...} objects) for
// kString, true/false for kBool.
StatusOr<Tensor> TensorFromJson(const nlohmann::json& value, DType dtype);

// The numbers TensorFromJson reads as NaN and +-Infinity: ParseJson rewrites TF Serving's bare
// NaN / Infinity tokens to them, so a body sending them as numbers gets NaN and infinities.
inline constexpr double kJsonNaNSentinel = 1.25e308;
inline constexpr double kJsonInfinitySentinel = 1.5e308;
inline bool IsJsonSpecialSentinel(double d) { return d == kJsonNaNSentinel || std::fabs(d) == kJsonInfinitySentinel; }

// How TensorFromJson makes a float32 of a JSON number (read as a double): rounded to nearest;
// past float's largest finite value but below the midpoint of it and 2^128, that value; none at
// or beyond the midpoint (out of range: no JSON number means infinity). The shortest text of
// -FLT_MAX, which responses carry, is -3.4028235e+38, past FLT_MAX as a double. Inline: the
// REST reader calls it per number.
inline std::optional<float> JsonNumberToFloat32(double d) {
  constexpr double kRoundsToInfinity = 0x1.ffffffp+127;
  const double magnitude = std::fabs(d);
  if (!(magnitude < kRoundsToInfinity)) return std::nullopt;
  if (magnitude > static_cast<double>(std::numeric_limits<float>::max())) {
    return d < 0 ? -std::numeric_limits<float>::max() : std::numeric_limits<float>::max();
  }
  return static_cast<float>(d);
}

}  // namespace lockstep
