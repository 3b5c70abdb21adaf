// BatchMatMul(a [..., M, K], b [..., K, N]) -> [..., M, N]: a stack of matrix products, the
// leading (batch) dimensions broadcast as numpy does, so attention's [B, H, S, D] x
// [B, H, D, S] and a sequence's [B, S, K] x [K, N] are one op. Attrs transpose_a and
// transpose_b swap the last two dimensions of their operand. float32 through the one Gemm
// (each product rounds as MatMul's does, so a batched row equals its unbatched answer; attr
// "precision" "bfloat16" makes every product a bf16 one, as MatMul's does), and float64 by
// plain loops for reference checks.
#include <array>
#include <cstdint>

#include "runtime/autodiff/gradient_builder.h"
#include "runtime/matmul/gemm.h"
#include "runtime/op_registry.h"
#include "runtime/ops/op_util.h"
#include "runtime/ops/ops.h"

namespace lockstep {
namespace {

constexpr std::string_view kOp = "BatchMatMul";

struct Geometry {
  Shape out;
  int64_t m = 0, n = 0, k = 0;
  int batch_rank = 0;
  // Per batch dimension of `out`: its size, and the element strides of a and b (0 where that
  // operand is broadcast).
  std::array<int64_t, Shape::kMaxRank> dims{}, stride_a{}, stride_b{};
  int64_t batches = 1;
};

StatusOr<Geometry> MakeGeometry(const TensorSpec& a, const TensorSpec& b, const AttrMap& attrs) {
  LS_ASSIGN_OR_RETURN(bool ta, attrs.GetBoolOr("transpose_a", false));
  LS_ASSIGN_OR_RETURN(bool tb, attrs.GetBoolOr("transpose_b", false));
  if (a.dtype != b.dtype || (a.dtype != DType::kFloat32 && a.dtype != DType::kFloat64)) {
    return InvalidArgument(Str(kOp) + ": a and b must both be float32 or both float64, got " + Str(DTypeName(a.dtype)) +
                           " and " + Str(DTypeName(b.dtype)));
  }
  if (a.shape.rank() < 2 || b.shape.rank() < 2) {
    return InvalidArgument(Str(kOp) + ": a and b must have rank >= 2, got " + a.shape.ToString() + " and " +
                           b.shape.ToString());
  }
  const int ra = a.shape.rank(), rb = b.shape.rank();
  Geometry g;
  g.m = a.shape.dim(ta ? ra - 1 : ra - 2);
  const int64_t ka = a.shape.dim(ta ? ra - 2 : ra - 1);
  const int64_t kb = b.shape.dim(tb ? rb - 1 : rb - 2);
  g.n = b.shape.dim(tb ? rb - 2 : rb - 1);
  if (!MergeDim(ka, kb, &g.k)) {
    return InvalidArgument(Str(kOp) + ": inner dimensions differ: " + a.shape.ToString() + " x " + b.shape.ToString());
  }
  Shape batch_a, batch_b;
  for (int d = 0; d < ra - 2; ++d) batch_a.AddDim(a.shape.dim(d));
  for (int d = 0; d < rb - 2; ++d) batch_b.AddDim(b.shape.dim(d));
  LS_ASSIGN_OR_RETURN(Shape batch, BroadcastShapes(kOp, batch_a, batch_b));
  if (batch.rank() + 2 > Shape::kMaxRank) return InvalidArgument(Str(kOp) + ": the result's rank is too large");
  g.out = batch;
  g.out.AddDim(g.m);
  g.out.AddDim(g.n);
  g.batch_rank = batch.rank();
  // Strides of each operand's batch dimensions, right-aligned against the result's.
  int64_t step_a = g.m * g.k, step_b = g.k * g.n;
  for (int d = batch.rank() - 1; d >= 0; --d) {
    const int ia = d - (batch.rank() - batch_a.rank()), ib = d - (batch.rank() - batch_b.rank());
    const int64_t da = ia < 0 ? 1 : batch_a.dim(ia), db = ib < 0 ? 1 : batch_b.dim(ib);
    g.dims[static_cast<size_t>(d)] = batch.dim(d);
    g.stride_a[static_cast<size_t>(d)] = da == 1 ? 0 : step_a;
    g.stride_b[static_cast<size_t>(d)] = db == 1 ? 0 : step_b;
    step_a *= da;
    step_b *= db;
    g.batches = g.batches < 0 || batch.dim(d) < 0 ? -1 : g.batches * batch.dim(d);
  }
  return g;
}

StatusOr<std::vector<TensorSpec>> InferBatchMatMul(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount(kOp, ctx.inputs.size(), 2, 2));
  LS_ASSIGN_OR_RETURN(Geometry g, MakeGeometry(ctx.inputs[0], ctx.inputs[1], ctx.attrs));
  return Single(ctx.inputs[0].dtype, g.out);
}

// The element offsets of batch `index` in a and b.
std::pair<int64_t, int64_t> BatchOffsets(const Geometry& g, int64_t index) {
  int64_t oa = 0, ob = 0;
  for (int d = g.batch_rank - 1; d >= 0; --d) {
    const int64_t i = index % g.dims[static_cast<size_t>(d)];
    index /= g.dims[static_cast<size_t>(d)];
    oa += i * g.stride_a[static_cast<size_t>(d)];
    ob += i * g.stride_b[static_cast<size_t>(d)];
  }
  return {oa, ob};
}

Status BatchMatMulKernel(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  LS_ASSIGN_OR_RETURN(Geometry g, MakeGeometry({a.dtype(), a.shape()}, {b.dtype(), b.shape()}, ctx.attrs()));
  LS_ASSIGN_OR_RETURN(bool ta, ctx.attrs().GetBoolOr("transpose_a", false));
  LS_ASSIGN_OR_RETURN(bool tb, ctx.attrs().GetBoolOr("transpose_b", false));
  LS_ASSIGN_OR_RETURN(Tensor* out, ctx.AllocateOutput(0, a.dtype(), g.out));
  if (out->num_elements() == 0) return Status::Ok();
  const int64_t m = g.m, n = g.n, k = g.k;
  if (a.dtype() == DType::kFloat64) {
    const double* pa = a.data<double>().data();
    const double* pb = b.data<double>().data();
    double* pc = out->mutable_data<double>().data();
    for (int64_t batch = 0; batch < g.batches; ++batch) {
      const auto [oa, ob] = BatchOffsets(g, batch);
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          double sum = 0;
          for (int64_t p = 0; p < k; ++p) {
            sum += pa[oa + (ta ? p * m + i : i * k + p)] * pb[ob + (tb ? j * k + p : p * n + j)];
          }
          pc[(batch * m + i) * n + j] = sum;
        }
      }
    }
    return Status::Ok();
  }
  LS_ASSIGN_OR_RETURN(const bool bf16, ReadBf16Precision(kOp, ctx.attrs()));
  const float* pa = a.data<float>().data();
  const float* pb = b.data<float>().data();
  float* pc = out->mutable_data<float>().data();
  auto product = [&](int64_t batch, ThreadPool* pool) {
    const auto [oa, ob] = BatchOffsets(g, batch);
    GemmArgs args;
    args.transpose_a = ta;
    args.transpose_b = tb;
    args.m = m;
    args.n = n;
    args.k = k;
    args.a = pa + oa;
    args.lda = ta ? m : k;
    args.b = pb + ob;
    args.ldb = tb ? k : n;
    args.c = pc + batch * m * n;
    args.ldc = n;
    args.bf16_compute = bf16;
    Gemm(args, pool);
  };
  // Many small products (attention's heads): one per task. Few large ones: each split by Gemm.
  if (g.batches >= ctx.pool().num_threads()) {
    ctx.pool().ParallelFor(g.batches, 1, [&](int64_t begin, int64_t end) {
      for (int64_t batch = begin; batch < end; ++batch) product(batch, nullptr);
    });
  } else {
    for (int64_t batch = 0; batch < g.batches; ++batch) product(batch, &ctx.pool());
  }
  return Status::Ok();
}

// As MatMul's (SetMatrixProductGrads), batch by batch; an operand broadcast along a batch
// dimension gets the sum of its gradients over it (SumLike).
Status BatchMatMulGrad(GradientBuilder& g) {
  LS_RETURN_IF_ERROR(CheckDifferentiable(g));
  LS_ASSIGN_OR_RETURN(const bool ta, g.attrs().GetBoolOr("transpose_a", false));
  LS_ASSIGN_OR_RETURN(const bool tb, g.attrs().GetBoolOr("transpose_b", false));
  LS_ASSIGN_OR_RETURN(const bool bf16, ReadBf16Precision(kOp, g.attrs()));
  SetMatrixProductGrads(g, ta, tb, [&](const std::string& x, const std::string& y, bool tx, bool ty) {
    AttrMap m;
    m.Set("transpose_a", tx);
    m.Set("transpose_b", ty);
    if (bf16) m.Set("precision", std::string("bfloat16"));
    return g.Op(kOp, {x, y}, std::move(m));
  });
  const Shape& out = g.output_spec(0).shape;
  for (int i = 0; i < 2; ++i) {
    if (!g.needs_input_grad(i)) continue;
    const Shape& in = g.input_spec(i).shape;
    bool broadcast = in.rank() != out.rank();
    // An unknown dimension may be 1 at run time where the other operand's is not.
    for (int d = 0; !broadcast && d < out.rank() - 2; ++d) broadcast = in.dim(d) != out.dim(d) || in.dim(d) < 0;
    if (broadcast) g.SetInputGrad(i, g.Op("SumLike", {g.input_grads()[static_cast<size_t>(i)], g.input(i)}));
  }
  return Status::Ok();
}

}  // namespace

void RegisterBatchMatMulOps(OpRegistry& registry) {
  (void)registry.Register(SimpleOpDef(std::string(kOp), 2, InferBatchMatMul, BatchMatMulKernel, BatchMatMulGrad));
}

}  // namespace lockstep
