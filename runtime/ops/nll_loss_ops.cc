// NegativeLogLikelihoodLoss(input [N, C, d...], target [N, d...], weight [C]?; attrs reduction
// = "mean" | "sum" | "none", ignore_index) with ONNX's semantics: the loss of element (n, d) is
// -input[n, target[n, d], d] * weight[target[n, d]] (weight 1 without one), 0 where the target
// is ignore_index; "none" answers those, "sum" their sum, "mean" their sum over the sum of the
// weights taken (0 when none is). ONNX's SoftmaxCrossEntropyLoss is this after a LogSoftmax over
// the classes (the importer's). float32 and float64; a target outside [0, C) that is not the
// ignored one fails the run.
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "runtime/op_registry.h"
#include "runtime/ops/op_util.h"
#include "runtime/ops/ops.h"
#include "runtime/ops/shape_util.h"

namespace lockstep {
namespace {

constexpr std::string_view kOp = "NegativeLogLikelihoodLoss";

enum class LossReduction { kNone, kSum, kMean };

StatusOr<LossReduction> ReadLossReduction(const AttrMap& attrs) {
  LS_ASSIGN_OR_RETURN(std::string_view r, attrs.GetStringViewOr("reduction", "mean"));
  if (r == "none") return LossReduction::kNone;
  if (r == "sum") return LossReduction::kSum;
  if (r == "mean") return LossReduction::kMean;
  return InvalidArgument(Str(kOp) + ": attr 'reduction' must be none, sum or mean, got '" + Str(r) + "'");
}

// The output spec, with the checks of the inputs' dtypes and shapes.
StatusOr<TensorSpec> NllOutput(std::span<const TensorSpec> in, const AttrMap& attrs) {
  LS_RETURN_IF_ERROR(CheckInputCount(kOp, in.size(), 2, 3));
  LS_ASSIGN_OR_RETURN(LossReduction reduction, ReadLossReduction(attrs));
  LS_RETURN_IF_ERROR(attrs.GetIntOr("ignore_index", 0).status());
  const TensorSpec& input = in[0];
  const TensorSpec& target = in[1];
  LS_RETURN_IF_ERROR(CheckReal(kOp, "input", input.dtype));
  if (!IsIndexDType(target.dtype)) {
    return InvalidArgument(Str(kOp) + ": target must be int32 or int64, got " + Str(DTypeName(target.dtype)));
  }
  const int rank = input.shape.rank();
  bool fits = rank >= 2 && target.shape.rank() == rank - 1;
  for (int d = 0; fits && d < rank - 1; ++d) {
    int64_t merged;
    fits = MergeDim(input.shape.dim(d == 0 ? 0 : d + 1), target.shape.dim(d), &merged);
  }
  if (!fits) {
    return InvalidArgument(Str(kOp) + ": input " + input.shape.ToString() + " [N, C, d...] and target " +
                           target.shape.ToString() + " [N, d...] do not fit");
  }
  if (in.size() == 3) {
    LS_RETURN_IF_ERROR(CheckDType(kOp, "weight", in[2].dtype, input.dtype));
    int64_t c;
    if (in[2].shape.rank() != 1 || !MergeDim(in[2].shape.dim(0), input.shape.dim(1), &c)) {
      return InvalidArgument(Str(kOp) + ": weight " + in[2].shape.ToString() + " must hold one value per class of " +
                             input.shape.ToString());
    }
  }
  return TensorSpec{input.dtype, reduction == LossReduction::kNone ? target.shape : Shape{}};
}

StatusOr<std::vector<TensorSpec>> InferNll(const ShapeInferenceContext& ctx) {
  LS_ASSIGN_OR_RETURN(TensorSpec out, NllOutput(ctx.inputs, ctx.attrs));
  return std::vector<TensorSpec>{out};
}

template <typename T>
Status NllTyped(KernelContext& ctx, LossReduction reduction, int64_t ignore, Tensor& out) {
  const Tensor& input = ctx.input(0);
  const Tensor& target = ctx.input(1);
  const T* x = input.data<T>().data();
  const T* weight = ctx.num_inputs() == 3 ? ctx.input(2).data<T>().data() : nullptr;
  const int64_t n = input.shape().dim(0), c = input.shape().dim(1);
  const int64_t inner = n == 0 || c == 0 ? 0 : input.num_elements() / (n * c);
  T* losses = reduction == LossReduction::kNone ? out.mutable_data<T>().data() : nullptr;
  // Sums in double for float32 too: one rounding at the end, whatever the batch.
  double total = 0, weights = 0;
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t k = b * inner + i;
      const int64_t t = target.dtype() == DType::kInt32 ? int64_t{target.data<int32_t>()[static_cast<size_t>(k)]}
                                                       : target.data<int64_t>()[static_cast<size_t>(k)];
      double loss = 0, w = 0;
      if (t != ignore) {
        if (t < 0 || t >= c) {
          return InvalidArgument(Str(kOp) + ": target " + std::to_string(t) + " is not a class of " + std::to_string(c));
        }
        w = weight == nullptr ? 1.0 : static_cast<double>(weight[t]);
        loss = -static_cast<double>(x[(b * c + t) * inner + i]) * w;
      }
      if (losses != nullptr) losses[k] = static_cast<T>(loss);
      total += loss;
      weights += w;
    }
  }
  if (reduction == LossReduction::kSum) out.mutable_data<T>()[0] = static_cast<T>(total);
  if (reduction == LossReduction::kMean) out.mutable_data<T>()[0] = static_cast<T>(weights == 0 ? 0.0 : total / weights);
  return Status::Ok();
}

Status NllKernel(KernelContext& ctx) {
  std::vector<TensorSpec> specs;
  for (int i = 0; i < ctx.num_inputs(); ++i) specs.push_back({ctx.input(i).dtype(), ctx.input(i).shape()});
  LS_ASSIGN_OR_RETURN(TensorSpec spec, NllOutput(specs, ctx.attrs()));
  LS_ASSIGN_OR_RETURN(LossReduction reduction, ReadLossReduction(ctx.attrs()));
  // Without an ignore_index, none is ignored.
  LS_ASSIGN_OR_RETURN(int64_t ignore, ctx.attrs().GetIntOr("ignore_index", std::numeric_limits<int64_t>::min()));
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, spec.dtype, spec.shape));
  if (ctx.num_inputs() == 3 && ctx.input(2).shape().dim(0) != ctx.input(0).shape().dim(1)) {
    return InvalidArgument(Str(kOp) + ": weight has " + std::to_string(ctx.input(2).shape().dim(0)) + " values for " +
                           std::to_string(ctx.input(0).shape().dim(1)) + " classes");
  }
  for (int d = 0; d < ctx.input(1).shape().rank(); ++d) {
    if (ctx.input(1).shape().dim(d) != ctx.input(0).shape().dim(d == 0 ? 0 : d + 1)) {
      return InvalidArgument(Str(kOp) + ": input " + ctx.input(0).shape().ToString() + " and target " +
                             ctx.input(1).shape().ToString() + " do not fit");
    }
  }
  return DispatchReal(spec.dtype, [&](auto zero) { return NllTyped<decltype(zero)>(ctx, reduction, ignore, *out); });
}

}  // namespace

void RegisterNllLossOps(OpRegistry& registry) {
  OpDef def = SimpleOpDef(std::string(kOp), 2, InferNll, NllKernel);
  def.max_inputs = 3;
  (void)registry.Register(std::move(def));
}

}  // namespace lockstep
