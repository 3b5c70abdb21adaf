#include "runtime/import/batch_norm.h"

#include <cmath>

#include "runtime/import/constants.h"

namespace lockstep {

StatusOr<FoldedBatchNorm> FoldBatchNorm(const Tensor& scale, const Tensor& offset, const Tensor& mean,
                                        const Tensor& variance, double epsilon, DType dtype, const Shape& shape) {
  const int64_t c = scale.num_elements();
  std::vector<Tensor> params;
  for (const Tensor* t : {&scale, &offset, &mean, &variance}) {
    if (t->shape().rank() != 1 || t->num_elements() != c) {
      return InvalidArgument("batch normalisation: scale, offset, mean and variance must be vectors of one length, got " +
                             scale.shape().ToString() + ", " + offset.shape().ToString() + ", " + mean.shape().ToString() +
                             ", " + variance.shape().ToString());
    }
    LS_ASSIGN_OR_RETURN(Tensor d, CastTensor(*t, DType::kFloat64));
    params.push_back(std::move(d));
  }
  if (shape.num_elements() != c) {
    return InvalidArgument("batch normalisation: " + std::to_string(c) + " channels do not fill shape " + shape.ToString());
  }
  Tensor s(DType::kFloat64, shape), b(DType::kFloat64, shape);
  for (int64_t k = 0; k < c; ++k) {
    const double factor = params[0].data<double>()[k] / std::sqrt(params[3].data<double>()[k] + epsilon);
    s.mutable_data<double>()[k] = factor;
    b.mutable_data<double>()[k] = params[1].data<double>()[k] - params[2].data<double>()[k] * factor;
  }
  FoldedBatchNorm folded;
  LS_ASSIGN_OR_RETURN(folded.scale, CastTensor(s, dtype));
  LS_ASSIGN_OR_RETURN(folded.offset, CastTensor(b, dtype));
  return folded;
}

}  // namespace lockstep
