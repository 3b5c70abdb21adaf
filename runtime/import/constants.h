// What the importers (SavedModel, ONNX) read out of constant tensors the same way: integer
// lists (shapes, axes, pads), single numbers (bounds, fill values) and dtype conversions.
#pragma once

#include <optional>
#include <vector>

#include "runtime/status.h"
#include "runtime/tensor.h"

namespace lockstep {

// `t` converted to `dtype` by the runtime's Cast (its rules, its errors).
StatusOr<Tensor> CastTensor(const Tensor& t, DType dtype);
// The one value of `t` (any numeric dtype or bool) as a double; an error unless it has exactly
// one element.
StatusOr<double> ScalarValue(const Tensor& t);
// The values of an int32 or int64 tensor; nullopt for a null pointer or another dtype.
std::optional<std::vector<int64_t>> IntValues(const Tensor* t);

}  // namespace lockstep
