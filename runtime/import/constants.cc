#include "runtime/import/constants.h"

#include "runtime/op_registry.h"

namespace lockstep {

StatusOr<Tensor> CastTensor(const Tensor& t, DType dtype) {
  const Tensor inputs[] = {t};
  LS_ASSIGN_OR_RETURN(std::vector<Tensor> out, RunOp("Cast", inputs, AttrMap{{"dtype", dtype}}));
  return out[0];
}

StatusOr<double> ScalarValue(const Tensor& t) {
  if (t.num_elements() != 1) return InvalidArgument("expected one value, got shape " + t.shape().ToString());
  LS_ASSIGN_OR_RETURN(Tensor d, CastTensor(t, DType::kFloat64));
  return d.data<double>()[0];
}

std::optional<std::vector<int64_t>> IntValues(const Tensor* t) {
  if (t != nullptr && t->dtype() == DType::kInt64) {
    const auto v = t->data<int64_t>();
    return std::vector<int64_t>(v.begin(), v.end());
  }
  if (t != nullptr && t->dtype() == DType::kInt32) {
    const auto v = t->data<int32_t>();
    return std::vector<int64_t>(v.begin(), v.end());
  }
  return std::nullopt;
}

}  // namespace lockstep
