// MatMul and FusedMatMul: rank-2 products through the one Gemm, each input float32 or bfloat16
// (a bf16 input makes it a bf16 product, see gemm.h), output float32. Attr "precision":
// "float32" (default) or "bfloat16", which makes it a bf16 product even of two float32 inputs
// (mixed-precision training: every matmul of the step in bf16, forward and backward). MatMul is a Gemm with
// no epilogue; FusedMatMul is the same Gemm with its bias and activation in the epilogue. The
// epilogue rounds exactly as BiasAdd and the activation ops do, so the fusion pass never
// changes a result. A constant b is packed once, when the session is built.
#include <array>
#include <cstdint>
#include <optional>
#include <span>

#include "runtime/activation.h"
#include "runtime/matmul/gemm.h"
#include "runtime/matmul/packed_b.h"
#include "runtime/autodiff/gradient_builder.h"
#include "runtime/op_registry.h"
#include "runtime/ops/op_util.h"
#include "runtime/ops/ops.h"

namespace lockstep {
namespace {

struct MatMulAttrs {
  bool transpose_a = false;
  bool transpose_b = false;
  bool bf16 = false;  // precision "bfloat16"
  Activation activation = Activation::kNone;
};

StatusOr<MatMulAttrs> ReadAttrs(const AttrMap& attrs, bool fused) {
  MatMulAttrs out;
  LS_ASSIGN_OR_RETURN(out.transpose_a, attrs.GetBoolOr("transpose_a", false));
  LS_ASSIGN_OR_RETURN(out.transpose_b, attrs.GetBoolOr("transpose_b", false));
  LS_ASSIGN_OR_RETURN(out.bf16, ReadBf16Precision(fused ? "FusedMatMul" : "MatMul", attrs));
  if (fused) {
    LS_ASSIGN_OR_RETURN(std::string name, attrs.GetStringOr("activation", "none"));
    StatusOr<Activation> act = ParseActivation(name);
    if (!act.ok()) return act.status().WithPrefix("FusedMatMul");
    out.activation = *act;
  }
  return out;
}

Status CheckMatMulDType(std::string_view op, std::string_view what, DType dtype) {
  if (dtype == DType::kFloat32 || dtype == DType::kBFloat16) return Status::Ok();
  return InvalidArgument(Str(op) + ": " + Str(what) + " must be float32 or bfloat16, got " +
                         Str(DTypeName(dtype)));
}

// [M, K] x [K, N] -> [M, N] after the transpose flags; -1 dimensions match anything. MatMul
// (not FusedMatMul) also takes two float64 inputs, for gradient checks.
StatusOr<Shape> MatMulShape(std::string_view name, const TensorSpec& a, const TensorSpec& b,
                            const MatMulAttrs& attrs) {
  const bool f64 = name == "MatMul" && a.dtype == DType::kFloat64;
  if (f64 && b.dtype != DType::kFloat64) {
    return InvalidArgument(Str(name) + ": b must be float64 like a, got " + Str(DTypeName(b.dtype)));
  }
  if (!f64) {
    LS_RETURN_IF_ERROR(CheckMatMulDType(name, "a", a.dtype));
    LS_RETURN_IF_ERROR(CheckMatMulDType(name, "b", b.dtype));
  }
  if (a.shape.rank() != 2 || b.shape.rank() != 2) {
    return InvalidArgument(Str(name) + ": expects rank-2 inputs, got " + a.shape.ToString() +
                           " x " + b.shape.ToString());
  }
  const int64_t m = a.shape.dim(attrs.transpose_a ? 1 : 0);
  const int64_t ka = a.shape.dim(attrs.transpose_a ? 0 : 1);
  const int64_t kb = b.shape.dim(attrs.transpose_b ? 1 : 0);
  const int64_t n = b.shape.dim(attrs.transpose_b ? 0 : 1);
  int64_t k;
  if (!MergeDim(ka, kb, &k)) {
    std::string flags;
    if (attrs.transpose_a) flags += " transpose_a";
    if (attrs.transpose_b) flags += " transpose_b";
    return InvalidArgument(Str(name) + ": inner dimensions differ: " + a.shape.ToString() + " x " +
                           b.shape.ToString() + (flags.empty() ? "" : " (with" + flags + ")"));
  }
  return Shape{m, n};
}

StatusOr<Shape> FusedMatMulShape(std::span<const TensorSpec> in, const MatMulAttrs& attrs) {
  LS_ASSIGN_OR_RETURN(Shape out, MatMulShape("FusedMatMul", in[0], in[1], attrs));
  if (in.size() == 3) {
    LS_RETURN_IF_ERROR(CheckDType("FusedMatMul", "bias", in[2].dtype, DType::kFloat32));
    LS_RETURN_IF_ERROR(CheckRank("FusedMatMul", "bias", in[2].shape, 1));
    int64_t n;
    if (!MergeDim(out.dim(1), in[2].shape.dim(0), &n)) {
      return InvalidArgument("FusedMatMul: bias length " + std::to_string(in[2].shape.dim(0)) +
                             " differs from the output width " + std::to_string(out.dim(1)));
    }
    out.set_dim(1, n);
  }
  return out;
}

StatusOr<std::vector<TensorSpec>> InferMatMul(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("MatMul", ctx.inputs.size(), 2, 2));
  LS_ASSIGN_OR_RETURN(MatMulAttrs attrs, ReadAttrs(ctx.attrs, false));
  LS_ASSIGN_OR_RETURN(Shape out, MatMulShape("MatMul", ctx.inputs[0], ctx.inputs[1], attrs));
  return Single(ctx.inputs[0].dtype == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32, out);
}

StatusOr<std::vector<TensorSpec>> InferFusedMatMul(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("FusedMatMul", ctx.inputs.size(), 2, 3));
  LS_ASSIGN_OR_RETURN(MatMulAttrs attrs, ReadAttrs(ctx.attrs, true));
  LS_ASSIGN_OR_RETURN(Shape out, FusedMatMulShape(ctx.inputs, attrs));
  return Single(DType::kFloat32, out);
}

// Output [M, N] = op(a) x op(b) (+ bias, activation from the epilogue).
Status RunGemm(KernelContext& ctx, const MatMulAttrs& attrs, const Shape& out_shape,
               const float* bias) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  LS_ASSIGN_OR_RETURN(Tensor* out_ptr, ctx.AllocateOutput(0, DType::kFloat32, out_shape));
  Tensor& out = *out_ptr;
  GemmArgs g;
  g.transpose_a = attrs.transpose_a;
  g.transpose_b = attrs.transpose_b;
  g.m = out_shape.dim(0);
  g.n = out_shape.dim(1);
  g.k = a.shape().dim(attrs.transpose_a ? 0 : 1);
  g.a = a.raw_data();
  g.a_type = a.dtype();
  g.lda = a.shape().dim(1);
  g.b = b.raw_data();
  g.b_type = b.dtype();
  g.ldb = b.shape().dim(1);
  g.packed_b = ctx.packed_input(1);
  if (g.packed_b != nullptr && (g.packed_b->k() != g.k || g.packed_b->n() != g.n)) {
    return Internal("MatMul: the packed b is " + std::to_string(g.packed_b->k()) + " x " +
                    std::to_string(g.packed_b->n()) + ", the product needs " + std::to_string(g.k) + " x " +
                    std::to_string(g.n));
  }
  g.bf16_compute = attrs.bf16;
  g.c = out.mutable_data<float>().data();
  g.ldc = g.n;
  g.epilogue.bias = bias;
  g.epilogue.activation = attrs.activation;
  Gemm(g, &ctx.pool());
  return Status::Ok();
}

// float64: plain loops, each dot product summed in k order. Only gradient checks run it.
Status RunFloat64MatMul(KernelContext& ctx, const MatMulAttrs& attrs, const Shape& out_shape) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  LS_ASSIGN_OR_RETURN(Tensor* out_ptr, ctx.AllocateOutput(0, DType::kFloat64, out_shape));
  const int64_t m = out_shape.dim(0), n = out_shape.dim(1), k = a.shape().dim(attrs.transpose_a ? 0 : 1);
  const int64_t lda = a.shape().dim(1), ldb = b.shape().dim(1);
  const double* pa = a.data<double>().data();
  const double* pb = b.data<double>().data();
  double* pc = out_ptr->mutable_data<double>().data();
  ctx.pool().ParallelFor(m, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < k; ++p) {
          sum += (attrs.transpose_a ? pa[p * lda + i] : pa[i * lda + p]) *
                 (attrs.transpose_b ? pb[j * ldb + p] : pb[p * ldb + j]);
        }
        pc[i * n + j] = sum;
      }
    }
  });
  return Status::Ok();
}

Status MatMulKernel(KernelContext& ctx) {
  LS_ASSIGN_OR_RETURN(MatMulAttrs attrs, ReadAttrs(ctx.attrs(), false));
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  LS_ASSIGN_OR_RETURN(Shape out,
                      MatMulShape("MatMul", {a.dtype(), a.shape()}, {b.dtype(), b.shape()}, attrs));
  if (a.dtype() == DType::kFloat64) return RunFloat64MatMul(ctx, attrs, out);
  return RunGemm(ctx, attrs, out, nullptr);
}

Status FusedMatMulKernel(KernelContext& ctx) {
  LS_ASSIGN_OR_RETURN(MatMulAttrs attrs, ReadAttrs(ctx.attrs(), true));
  std::array<TensorSpec, 3> specs;
  const int n = ctx.num_inputs();
  for (int i = 0; i < n; ++i) specs[i] = {ctx.input(i).dtype(), ctx.input(i).shape()};
  LS_ASSIGN_OR_RETURN(Shape out,
                      FusedMatMulShape(std::span(specs.data(), static_cast<size_t>(n)), attrs));
  return RunGemm(ctx, attrs, out, n == 3 ? ctx.input(2).data<float>().data() : nullptr);
}

// How b is packed as the product will read it: in its own type (bf16 stays bf16), or as bf16
// under precision bfloat16 (rounding a float32 b as a per-call pack would). Null when b is
// not an operand the matmul core packs (float64 products, gradient checks, do not go through it).
struct PackPlan {
  bool transpose = false;
  int64_t k = 0, n = 0;
  DType compute = DType::kFloat32;
};
StatusOr<std::optional<PackPlan>> PlanPacking(const AttrMap& attrs, int input, const Tensor& b) {
  if (input != 1 || b.shape().rank() != 2 || b.dtype() == DType::kFloat64) return std::optional<PackPlan>();
  LS_RETURN_IF_ERROR(CheckMatMulDType("MatMul", "b", b.dtype()));
  LS_ASSIGN_OR_RETURN(bool transpose_b, attrs.GetBoolOr("transpose_b", false));
  LS_ASSIGN_OR_RETURN(bool bf16, ReadBf16Precision("MatMul", attrs));
  return std::optional<PackPlan>(PackPlan{transpose_b, b.shape().dim(transpose_b ? 1 : 0),
                                          b.shape().dim(transpose_b ? 0 : 1), bf16 ? DType::kBFloat16 : b.dtype()});
}

StatusOr<std::shared_ptr<const PackedB>> PackWeights(const AttrMap& attrs, int input, const Tensor& b,
                                                     ThreadPool* pool) {
  LS_ASSIGN_OR_RETURN(std::optional<PackPlan> plan, PlanPacking(attrs, input, b));
  if (!plan) return std::shared_ptr<const PackedB>();
  return std::make_shared<const PackedB>(PackedB::Pack(b.raw_data(), b.dtype(), plan->transpose, plan->k, plan->n,
                                                       b.shape().dim(1), plan->compute, pool));
}

Status RepackWeights(const AttrMap& attrs, int input, const Tensor& b, PackedB& into, ThreadPool* pool) {
  LS_ASSIGN_OR_RETURN(std::optional<PackPlan> plan, PlanPacking(attrs, input, b));
  if (!plan) return InvalidArgument("MatMul: input " + std::to_string(input) + " is not one the matmul core packs");
  into.Repack(b.raw_data(), b.dtype(), plan->transpose, plan->k, plan->n, b.shape().dim(1), plan->compute, pool);
  return Status::Ok();
}

// A bf16 product (an input in bf16, or precision bfloat16) has bf16 gradient products too.
Status MatMulGrad(GradientBuilder& g) {
  LS_RETURN_IF_ERROR(CheckDifferentiable(g));
  LS_ASSIGN_OR_RETURN(MatMulAttrs attrs, ReadAttrs(g.attrs(), false));
  const bool bf16 = attrs.bf16 || g.input_spec(0).dtype == DType::kBFloat16 ||
                    g.input_spec(1).dtype == DType::kBFloat16;
  SetMatrixProductGrads(g, attrs.transpose_a, attrs.transpose_b,
                        [&](const std::string& x, const std::string& y, bool tx, bool ty) {
                          AttrMap m;
                          m.Set("transpose_a", tx);
                          m.Set("transpose_b", ty);
                          if (bf16) m.Set("precision", std::string("bfloat16"));
                          return g.Op("MatMul", {x, y}, std::move(m));
                        });
  return Status::Ok();
}

}  // namespace

void RegisterMatMulOps(OpRegistry& registry) {
  OpDef matmul;
  matmul.name = "MatMul";
  matmul.min_inputs = matmul.max_inputs = 2;
  matmul.infer = InferMatMul;
  matmul.compute = MatMulKernel;
  matmul.pack_constant = PackWeights;
  matmul.repack_input = RepackWeights;
  matmul.repacked_input = 1;
  matmul.gradient = MatMulGrad;
  (void)registry.Register(std::move(matmul));

  OpDef fused;
  fused.name = "FusedMatMul";
  fused.min_inputs = 2;
  fused.max_inputs = 3;
  fused.infer = InferFusedMatMul;
  fused.compute = FusedMatMulKernel;
  fused.pack_constant = PackWeights;
  fused.repack_input = RepackWeights;
  fused.repacked_input = 1;
  (void)registry.Register(std::move(fused));
}

}  // namespace lockstep
