// Transpose(x; perm): output axis k is input axis perm[k] (perm absent: the axes reversed).
// Any dtype, strings included. The runtime's convolutions are NHWC, so an imported NCHW model
// transposes around every convolution: [0,2,3,1] and [0,3,1,2] are hot, as is swapping the
// last two axes (attention). The kernel first drops axes of size 1 and merges input axes that
// stay adjacent and in order, which turns every one of those into a batch of 2-D transposes
// ([N, C, HW] -> [N, HW, C]); those are copied in square tiles that stay in the L1 cache, with
// the writes contiguous. A transpose that keeps the innermost axis copies whole rows instead.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/autodiff/gradient_builder.h"
#include "runtime/op_registry.h"
#include "runtime/ops/op_util.h"
#include "runtime/ops/ops.h"
#include "runtime/ops/shape_util.h"

namespace lockstep {
namespace {

using Perm = std::array<int, Shape::kMaxRank>;

// Reads attr "perm" for an input of rank `rank`: a permutation of 0..rank-1.
StatusOr<Perm> ReadPerm(const AttrMap& attrs, int rank) {
  Perm perm{};
  if (!attrs.Has("perm")) {
    for (int k = 0; k < rank; ++k) perm[static_cast<size_t>(k)] = rank - 1 - k;
    return perm;
  }
  LS_ASSIGN_OR_RETURN(std::span<const int64_t> p, attrs.GetInts("perm"));
  if (p.size() != static_cast<size_t>(rank)) {
    return InvalidArgument("Transpose: perm " + IntsString(p) + " does not fit an input of rank " +
                           std::to_string(rank));
  }
  std::array<bool, Shape::kMaxRank> seen{};
  for (int k = 0; k < rank; ++k) {
    const int64_t a = p[static_cast<size_t>(k)];
    if (a < 0 || a >= rank || seen[static_cast<size_t>(a)]) {
      return InvalidArgument("Transpose: perm " + IntsString(p) + " is not a permutation of 0.." +
                             std::to_string(rank - 1));
    }
    seen[static_cast<size_t>(a)] = true;
    perm[static_cast<size_t>(k)] = static_cast<int>(a);
  }
  return perm;
}

StatusOr<Shape> TransposeShape(const AttrMap& attrs, const Shape& in, Perm* perm_out) {
  LS_ASSIGN_OR_RETURN(Perm perm, ReadPerm(attrs, in.rank()));
  Shape out;
  for (int k = 0; k < in.rank(); ++k) out.AddDim(in.dim(perm[static_cast<size_t>(k)]));
  if (perm_out != nullptr) *perm_out = perm;
  return out;
}

StatusOr<std::vector<TensorSpec>> InferTranspose(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("Transpose", ctx.inputs.size(), 1, 1));
  LS_ASSIGN_OR_RETURN(Shape out, TransposeShape(ctx.attrs, ctx.inputs[0].shape, nullptr));
  return Single(ctx.inputs[0].dtype, out);
}

// The same transpose on fewer axes: axes of size 1 dropped (they move nothing) and runs of
// input axes that stay adjacent and in order in the output merged into one.
struct ReducedTranspose {
  int rank = 0;
  std::array<int64_t, Shape::kMaxRank> in_dims{};
  Perm perm{};  // output axis k is reduced input axis perm[k]
};

ReducedTranspose Reduce(const Shape& in, const Perm& perm) {
  // Position of each input axis among those of size != 1 (-1 for the others), and their sizes.
  std::array<int, Shape::kMaxRank> kept_index{};
  std::array<int64_t, Shape::kMaxRank> kept_dims{};
  int kept = 0;
  for (int a = 0; a < in.rank(); ++a) {
    kept_index[a] = in.dim(a) == 1 ? -1 : kept;
    if (in.dim(a) != 1) kept_dims[kept++] = in.dim(a);
  }
  // The kept axes in output order, split into runs of consecutive input axes.
  std::array<int, Shape::kMaxRank> run_first{}, run_last{};
  int runs = 0;
  for (int k = 0; k < in.rank(); ++k) {
    const int a = kept_index[perm[k]];
    if (a < 0) continue;
    if (runs > 0 && run_last[runs - 1] + 1 == a) {
      run_last[runs - 1] = a;
    } else {
      run_first[runs] = run_last[runs] = a;
      ++runs;
    }
  }
  // Each run is one reduced axis; in the input they come in the order of their first axes.
  ReducedTranspose r;
  r.rank = runs;
  for (int k = 0; k < runs; ++k) {
    int position = 0;
    for (int j = 0; j < runs; ++j) position += run_first[j] < run_first[k];
    r.perm[k] = position;
    int64_t size = 1;
    for (int a = run_first[k]; a <= run_last[k]; ++a) size *= kept_dims[a];
    r.in_dims[position] = size;
  }
  return r;
}

// Square tiles of the 2-D transposes: 32 x 32 elements of up to 8 bytes read and 32 x 32
// written fit in a 32 KiB L1 cache together. A unit of parallel work is a block of kTile rows
// by kBlockCols columns of one 2-D transpose, so that one large image ([1, HW, 3] ->
// [1, 3, HW]) still splits across threads.
constexpr int64_t kTile = 32;
constexpr int64_t kBlockCols = 8 * kTile;

// Copies whole rows: the innermost axis stays innermost, so each output row of `row`
// elements is one contiguous input row.
template <typename T>
void CopyRows(ThreadPool& pool, const T* src, T* dst, const ReducedTranspose& t,
              const std::array<int64_t, Shape::kMaxRank>& in_strides, int64_t total) {
  const int last = t.rank - 1;
  const int64_t row = t.in_dims[static_cast<size_t>(last)];
  SourceWalker base;
  for (int k = 0; k < last; ++k) {
    const auto a = static_cast<size_t>(t.perm[static_cast<size_t>(k)]);
    base.AddDim(t.in_dims[a], t.in_dims[a], in_strides[a]);
  }
  pool.ParallelFor(total / row, std::max<int64_t>(1, kElementGrain / row), [&](int64_t begin, int64_t end) {
    SourceWalker walk = base;
    walk.Seek(begin);
    for (int64_t r = begin; r < end; ++r, walk.Next()) std::copy_n(src + walk.offset(), row, dst + r * row);
  });
}

// A batch of 2-D transposes: output axis p is the input's innermost axis (contiguous reads)
// and the output's innermost axis is another input axis (contiguous writes), copied tile by tile.
template <typename T>
void CopyTiles(ThreadPool& pool, const T* src, T* dst, const ReducedTranspose& t,
               const std::array<int64_t, Shape::kMaxRank>& in_strides, const Shape& out_shape) {
  const int last = t.rank - 1;
  int p = 0;
  while (t.perm[static_cast<size_t>(p)] != last) ++p;
  const auto out_strides = RowMajorStrides(out_shape);
  const int64_t rows = out_shape.dim(p), cols = out_shape.dim(last);
  const int64_t row_stride = out_strides[static_cast<size_t>(p)];
  const int64_t col_stride = in_strides[static_cast<size_t>(t.perm[static_cast<size_t>(last)])];
  // The blocks: every output axis but p and the innermost, then kTile rows along p (the
  // input's innermost axis: stride 1), then kBlockCols columns.
  SourceWalker in_base, out_base;
  for (int k = 0; k < last; ++k) {
    if (k == p) continue;
    const int64_t size = out_shape.dim(k);
    in_base.AddDim(size, size, in_strides[static_cast<size_t>(t.perm[static_cast<size_t>(k)])]);
    out_base.AddDim(size, size, out_strides[static_cast<size_t>(k)]);
  }
  const int64_t row_blocks = (rows + kTile - 1) / kTile, col_blocks = (cols + kBlockCols - 1) / kBlockCols;
  in_base.AddDim(row_blocks, row_blocks, kTile);
  out_base.AddDim(row_blocks, row_blocks, kTile * row_stride);
  in_base.AddDim(col_blocks, col_blocks, kBlockCols * col_stride);
  out_base.AddDim(col_blocks, col_blocks, kBlockCols);
  const int64_t blocks = out_shape.num_elements() / (rows * cols) * row_blocks * col_blocks;
  pool.ParallelFor(blocks, std::max<int64_t>(1, kElementGrain / (kTile * kBlockCols)), [&](int64_t begin, int64_t end) {
    SourceWalker in_walk = in_base, out_walk = out_base;
    in_walk.Seek(begin);
    out_walk.Seek(begin);
    for (int64_t b = begin; b < end; ++b, in_walk.Next(), out_walk.Next()) {
      const int64_t height = std::min(kTile, rows - (b / col_blocks % row_blocks) * kTile);
      const int64_t block_width = std::min(kBlockCols, cols - (b % col_blocks) * kBlockCols);
      const T* from = src + in_walk.offset();
      T* to = dst + out_walk.offset();
      for (int64_t j0 = 0; j0 < block_width; j0 += kTile) {
        const int64_t width = std::min(kTile, block_width - j0);
        for (int64_t i = 0; i < height; ++i) {
          T* __restrict out_row = to + i * row_stride + j0;
          const T* __restrict in_col = from + i + j0 * col_stride;
          for (int64_t j = 0; j < width; ++j) out_row[j] = in_col[j * col_stride];
        }
      }
    }
  });
}

Status TransposeKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Perm perm{};
  LS_ASSIGN_OR_RETURN(Shape out_shape, TransposeShape(ctx.attrs(), x.shape(), &perm));
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, x.dtype(), out_shape));
  const int64_t total = x.num_elements();
  if (total == 0) return Status::Ok();
  const ReducedTranspose t = Reduce(x.shape(), perm);
  Shape in_shape, reduced_out;
  for (int a = 0; a < t.rank; ++a) in_shape.AddDim(t.in_dims[static_cast<size_t>(a)]);
  for (int k = 0; k < t.rank; ++k) reduced_out.AddDim(t.in_dims[static_cast<size_t>(t.perm[static_cast<size_t>(k)])]);
  const auto in_strides = RowMajorStrides(in_shape);
  return DispatchCopyType("Transpose", x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* src = CopyData<T>(x);
    T* dst = MutableCopyData<T>(*out);
    if (t.rank <= 1) {  // nothing moves: a plain copy
      ctx.pool().ParallelFor(total, kElementGrain, [&](int64_t begin, int64_t end) {
        std::copy(src + begin, src + end, dst + begin);
      });
    } else if (t.perm[static_cast<size_t>(t.rank - 1)] == t.rank - 1) {
      CopyRows(ctx.pool(), src, dst, t, in_strides, total);
    } else {
      CopyTiles(ctx.pool(), src, dst, t, in_strides, reduced_out);
    }
    return Status::Ok();
  });
}

// The inverse permutation: output axis k came from input axis perm[k], so the gradient's axis
// perm[k] comes from dy's axis k.
Status TransposeGrad(GradientBuilder& g) {
  LS_RETURN_IF_ERROR(CheckDifferentiable(g));
  const int rank = g.input_spec(0).shape.rank();
  LS_ASSIGN_OR_RETURN(Perm perm, ReadPerm(g.attrs(), rank));
  std::vector<int64_t> inverse(static_cast<size_t>(rank));
  for (int k = 0; k < rank; ++k) inverse[static_cast<size_t>(perm[static_cast<size_t>(k)])] = k;
  AttrMap attrs;
  attrs.Set("perm", inverse);
  g.SetInputGrad(0, g.Op("Transpose", {g.output_grad(0)}, std::move(attrs)));
  return Status::Ok();
}

}  // namespace

void RegisterTransposeOps(OpRegistry& registry) {
  (void)registry.Register(SimpleOpDef("Transpose", 1, InferTranspose, TransposeKernel, TransposeGrad));
}

}  // namespace lockstep
