// Tensors as JSON values: nested lists, row-major, one level per dimension. Used by
// model-cli and by the REST API. Floats are written in "%g" style with the fewest significant
// digits (six or more) that read back as the same float, so a client parsing the text gets
// the identical value; whole numbers keep a ".0"; NaN and infinities as NaN, Infinity,
// -Infinity, as TensorFlow Serving does.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

#include "runtime/tensor.h"

namespace lockstep {

std::string FormatFloat(float value);

// Parses JSON text, refusing (before parsing) any that nests deeper than `max_depth`.
StatusOr<nlohmann::json> ParseJson(std::string_view text, int max_depth = 64);

// Appends the tensor as JSON to `out`.
void AppendTensorJson(const Tensor& tensor, std::string* out);

// Builds a tensor of `dtype` from a JSON value. The shape is the nesting of the lists, which
// must be rectangular; integer dtypes take only integers within their range, float dtypes
// any number within float range (rounded to nearest); strings for kString, true/false for kBool.
StatusOr<Tensor> TensorFromJson(const nlohmann::json& value, DType dtype);

}  // namespace lockstep
