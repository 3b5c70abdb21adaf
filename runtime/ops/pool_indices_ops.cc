// MaxPoolWithIndices(x) -> (y, indices): ONNX's MaxPool with its second output, on x in NCHW
// (1 to 3 spatial axes), for the graphs that unpool with those indices (MaxUnpool, SegNet's
// decoders). Each index is where the window's maximum lies in x flattened, padding left out:
// row-major (storage_order 0) or with the spatial axes column-major (storage_order 1), as
// ONNX says. The maximum is the first of equal values, and a NaN wins, as MaxPool2D chooses.
// Attrs (explicit, as the importer resolves ONNX's auto_pad): kernel_shape, strides,
// dilations, pads (every axis's begin, then every axis's end), ceil_mode, storage_order.
// float32 and float64. The serving path's MaxPool stays MaxPool2D (NHWC, vectorised): this
// one is a plain loop, for the graphs that need the indices.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "runtime/op_registry.h"
#include "runtime/ops/op_util.h"
#include "runtime/ops/ops.h"

namespace lockstep {
namespace {

constexpr int kMaxSpatial = 3;

struct IndexedPool {
  int spatial = 0;
  int64_t kernel[kMaxSpatial] = {};
  int64_t stride[kMaxSpatial] = {};
  int64_t dilation[kMaxSpatial] = {};
  int64_t pad_begin[kMaxSpatial] = {};
  int64_t pad_end[kMaxSpatial] = {};
  bool ceil_mode = false;
  bool column_major = false;
};

StatusOr<std::vector<int64_t>> ListAttr(const AttrMap& attrs, std::string_view name, size_t n, int64_t fallback) {
  if (!attrs.Has(name)) return std::vector<int64_t>(n, fallback);
  LS_ASSIGN_OR_RETURN(std::span<const int64_t> v, attrs.GetInts(name));
  if (v.size() != n) {
    return InvalidArgument("MaxPoolWithIndices: " + Str(name) + " has " + std::to_string(v.size()) +
                           " values, not " + std::to_string(n));
  }
  return std::vector<int64_t>(v.begin(), v.end());
}

StatusOr<IndexedPool> ReadIndexedPool(const AttrMap& attrs, int rank) {
  if (rank < 3 || rank > 2 + kMaxSpatial) {
    return InvalidArgument("MaxPoolWithIndices: x must be N, C and 1 to 3 spatial axes, got rank " +
                           std::to_string(rank));
  }
  IndexedPool p;
  p.spatial = rank - 2;
  const auto n = static_cast<size_t>(p.spatial);
  LS_ASSIGN_OR_RETURN(std::span<const int64_t> kernel, attrs.GetInts("kernel_shape"));
  if (kernel.size() != n) return InvalidArgument("MaxPoolWithIndices: one kernel_shape value per spatial axis");
  LS_ASSIGN_OR_RETURN(std::vector<int64_t> strides, ListAttr(attrs, "strides", n, 1));
  LS_ASSIGN_OR_RETURN(std::vector<int64_t> dilations, ListAttr(attrs, "dilations", n, 1));
  LS_ASSIGN_OR_RETURN(std::vector<int64_t> pads, ListAttr(attrs, "pads", 2 * n, 0));
  for (size_t d = 0; d < n; ++d) {
    p.kernel[d] = kernel[d];
    p.stride[d] = strides[d];
    p.dilation[d] = dilations[d];
    p.pad_begin[d] = pads[d];
    p.pad_end[d] = pads[n + d];
    if (p.kernel[d] < 1 || p.stride[d] < 1 || p.dilation[d] < 1 || p.pad_begin[d] < 0 || p.pad_end[d] < 0 ||
        p.kernel[d] > (int64_t{1} << 20) || p.stride[d] > (int64_t{1} << 20) || p.dilation[d] > (int64_t{1} << 20) ||
        p.pad_begin[d] > (int64_t{1} << 20) || p.pad_end[d] > (int64_t{1} << 20)) {
      return InvalidArgument("MaxPoolWithIndices: kernel_shape, strides and dilations must be positive and pads "
                             "not negative (all at most 2^20)");
    }
  }
  LS_ASSIGN_OR_RETURN(p.ceil_mode, attrs.GetBoolOr("ceil_mode", false));
  LS_ASSIGN_OR_RETURN(int64_t order, attrs.GetIntOr("storage_order", 0));
  if (order != 0 && order != 1) return InvalidArgument("MaxPoolWithIndices: storage_order is 0 or 1");
  p.column_major = order == 1;
  return p;
}

// Output positions along spatial axis `d` of extent `in` (-1: unknown), by ONNX's formula: with
// ceil_mode the last window may run past the end (what lies there is never the maximum), if it
// starts inside the image or the padding before it.
StatusOr<int64_t> OutputExtent(const IndexedPool& p, int d, int64_t in) {
  if (in < 0) return int64_t{-1};
  const int64_t window = (p.kernel[d] - 1) * p.dilation[d] + 1;
  const int64_t room = in + p.pad_begin[d] + p.pad_end[d] - window;
  if (room < 0) {
    return InvalidArgument("MaxPoolWithIndices: a window of " + std::to_string(window) + " does not fit " +
                           std::to_string(in) + " padded by " + std::to_string(p.pad_begin[d]) + " and " +
                           std::to_string(p.pad_end[d]));
  }
  const int64_t out = (p.ceil_mode ? (room + p.stride[d] - 1) / p.stride[d] : room / p.stride[d]) + 1;
  // A last window that would start in the end's padding is dropped (onnxruntime, PyTorch).
  return p.ceil_mode && (out - 1) * p.stride[d] >= in + p.pad_begin[d] ? out - 1 : out;
}

StatusOr<Shape> OutputShape(const IndexedPool& p, const Shape& x) {
  Shape out;
  out.AddDim(x[0]);
  out.AddDim(x[1]);
  for (int d = 0; d < p.spatial; ++d) {
    LS_ASSIGN_OR_RETURN(int64_t extent, OutputExtent(p, d, x[2 + d]));
    out.AddDim(extent);
  }
  return out;
}

StatusOr<std::vector<TensorSpec>> InferMaxPoolWithIndices(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("MaxPoolWithIndices", ctx.inputs.size(), 1, 1));
  LS_RETURN_IF_ERROR(CheckReal("MaxPoolWithIndices", "x", ctx.inputs[0].dtype));
  LS_ASSIGN_OR_RETURN(IndexedPool p, ReadIndexedPool(ctx.attrs, ctx.inputs[0].shape.rank()));
  LS_ASSIGN_OR_RETURN(Shape out, OutputShape(p, ctx.inputs[0].shape));
  return std::vector<TensorSpec>{{ctx.inputs[0].dtype, out}, {DType::kInt64, out}};
}

template <typename T>
bool Replaces(T candidate, T best) {
  return candidate > best || (std::isnan(candidate) && !std::isnan(best));
}

// Every (n, c) plane in [begin, end): each output position walks its window's taps.
template <typename T>
void PoolPlanes(const IndexedPool& p, const Shape& in, const Shape& out, const T* x, T* y, int64_t* indices,
                int64_t begin, int64_t end) {
  int64_t in_plane = 1, out_plane = 1;
  for (int d = 0; d < p.spatial; ++d) {
    in_plane *= in[2 + d];
    out_plane *= out[2 + d];
  }
  // Output extents and input extents, padded to three axes with ones.
  int64_t oe[kMaxSpatial] = {1, 1, 1}, ie[kMaxSpatial] = {1, 1, 1};
  for (int d = 0; d < p.spatial; ++d) {
    oe[d] = out[2 + d];
    ie[d] = in[2 + d];
  }
  const auto tap_count = [&](int d) { return d < p.spatial ? p.kernel[d] : int64_t{1}; };
  const auto start = [&](int d, int64_t o) { return d < p.spatial ? o * p.stride[d] - p.pad_begin[d] : int64_t{0}; };
  const auto step = [&](int d) { return d < p.spatial ? p.dilation[d] : int64_t{1}; };
  for (int64_t plane = begin; plane < end; ++plane) {
    const T* src = x + plane * in_plane;
    T* dst = y + plane * out_plane;
    int64_t* idx = indices + plane * out_plane;
    int64_t o = 0;
    for (int64_t o0 = 0; o0 < oe[0]; ++o0) {
      for (int64_t o1 = 0; o1 < oe[1]; ++o1) {
        for (int64_t o2 = 0; o2 < oe[2]; ++o2, ++o) {
          T best = -std::numeric_limits<T>::infinity();
          int64_t best_at[kMaxSpatial] = {-1, 0, 0};
          for (int64_t t0 = 0; t0 < tap_count(0); ++t0) {
            const int64_t i0 = start(0, o0) + t0 * step(0);
            if (i0 < 0 || i0 >= ie[0]) continue;
            for (int64_t t1 = 0; t1 < tap_count(1); ++t1) {
              const int64_t i1 = start(1, o1) + t1 * step(1);
              if (i1 < 0 || i1 >= ie[1]) continue;
              for (int64_t t2 = 0; t2 < tap_count(2); ++t2) {
                const int64_t i2 = start(2, o2) + t2 * step(2);
                if (i2 < 0 || i2 >= ie[2]) continue;
                const T v = src[(i0 * ie[1] + i1) * ie[2] + i2];
                if (best_at[0] < 0 || Replaces(v, best)) {
                  best = v;
                  best_at[0] = i0;
                  best_at[1] = i1;
                  best_at[2] = i2;
                }
              }
            }
          }
          dst[o] = best;
          // Column-major: the first spatial axis varies fastest.
          const int64_t within = best_at[0] < 0 ? 0
                                 : p.column_major
                                     ? best_at[0] + ie[0] * (best_at[1] + ie[1] * best_at[2])
                                     : (best_at[0] * ie[1] + best_at[1]) * ie[2] + best_at[2];
          idx[o] = plane * in_plane + within;
        }
      }
    }
  }
}

Status MaxPoolWithIndicesKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  LS_ASSIGN_OR_RETURN(IndexedPool p, ReadIndexedPool(ctx.attrs(), x.shape().rank()));
  LS_ASSIGN_OR_RETURN(Shape out_shape, OutputShape(p, x.shape()));
  LS_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x.dtype(), out_shape));
  LS_ASSIGN_OR_RETURN(Tensor * indices, ctx.AllocateOutput(1, DType::kInt64, out_shape));
  const int64_t planes = out_shape[0] * out_shape[1];
  if (out_shape.num_elements() == 0) return Status::Ok();
  return DispatchReal(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    ctx.pool().ParallelFor(planes, 1, [&](int64_t begin, int64_t end) {
      PoolPlanes<T>(p, x.shape(), out_shape, x.data<T>().data(), y->mutable_data<T>().data(),
                    indices->mutable_data<int64_t>().data(), begin, end);
    });
    return Status::Ok();
  });
}

}  // namespace

void RegisterPoolIndicesOps(OpRegistry& registry) {
  OpDef def = SimpleOpDef("MaxPoolWithIndices", 1, InferMaxPoolWithIndices, MaxPoolWithIndicesKernel);
  def.num_outputs = 2;
  (void)registry.Register(std::move(def));
}

}  // namespace lockstep
