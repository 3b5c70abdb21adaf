// MaxPool2D and AvgPool2D (NHWC) and their gradients:
//   MaxPool2DGrad(x, dy)      each window's dy goes to the element the forward pass picked
//   AvgPool2DGrad(dy, x)      each window's dy is shared equally by the elements it averaged
// Attrs: ksize [kh, kw], strides (default ksize, as Keras), padding "SAME" / "VALID"
// (window.h); 4-element NHWC lists [1, h, w, 1] are accepted. float32, and float64 for
// gradient checks. The gradients run image by image in parallel: windows of one image may
// overlap, windows of two images never do, so no two threads write one element and each sum
// keeps one order.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "runtime/autodiff/gradient_builder.h"
#include "runtime/op_registry.h"
#include "runtime/ops/op_util.h"
#include "runtime/ops/ops.h"
#include "runtime/ops/window.h"

namespace lockstep {
namespace {

enum class Pool { kMax, kAvg };

constexpr std::string_view PoolName(Pool p) {
  return p == Pool::kMax ? "MaxPool2D" : "AvgPool2D";
}
constexpr std::string_view PoolGradName(Pool p) {
  return p == Pool::kMax ? "MaxPool2DGrad" : "AvgPool2DGrad";
}

StatusOr<Geometry> PoolGeometry(std::string_view op, const AttrMap& attrs, const TensorSpec& input) {
  LS_RETURN_IF_ERROR(CheckReal(op, "input", input.dtype));
  LS_ASSIGN_OR_RETURN(auto ksize, SpatialPair(op, attrs, "ksize", std::nullopt));
  LS_ASSIGN_OR_RETURN(auto strides, SpatialPair(op, attrs, "strides", ksize));
  LS_ASSIGN_OR_RETURN(bool same, ReadSamePadding(op, attrs));
  return MakeGeometry(op, input.shape, ksize.first, ksize.second, strides, same,
                      input.shape.rank() == 4 ? input.shape.dim(3) : 0);
}

template <Pool P>
StatusOr<std::vector<TensorSpec>> InferPool(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount(PoolName(P), ctx.inputs.size(), 1, 1));
  LS_ASSIGN_OR_RETURN(Geometry g, PoolGeometry(PoolName(P), ctx.attrs, ctx.inputs[0]));
  return Single(ctx.inputs[0].dtype, g.out);
}

// The gradients give the shape of the forward input: MaxPool2DGrad's input 0, AvgPool2DGrad's 1.
template <Pool P>
StatusOr<std::vector<TensorSpec>> InferPoolGrad(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount(PoolGradName(P), ctx.inputs.size(), 2, 2));
  const TensorSpec& x = ctx.inputs[P == Pool::kMax ? 0 : 1];
  LS_RETURN_IF_ERROR(PoolGeometry(PoolGradName(P), ctx.attrs, x).status());
  return Single(x.dtype, x.shape);
}

// MaxPool's choice: a larger value wins, the first of equal ones stays, and a NaN wins (as in
// numpy's max). The gradient makes the same choice, so it reaches the element the forward
// pass returned.
template <typename T>
bool Replaces(T candidate, T best) {
  return candidate > best || candidate != candidate;
}

// Output rows [begin, end) of the flattened (n, oh) index. Channels are innermost, so every
// step is a vectorisable loop over C. MaxPool skips the padding (it is not -inf, it is absent);
// AvgPool divides by the number of real elements under the window, as TensorFlow does (SAME
// padding leaves at least one under every window, VALID all of them).
template <Pool P, typename T>
void PoolRows(const Geometry& g, const T* in, T* out, int64_t begin, int64_t end) {
  const int64_t c = g.c;
  for (int64_t row = begin; row < end; ++row) {
    const int64_t n = row / g.wh.out;
    const int64_t oh = row % g.wh.out;
    for (int64_t ow = 0; ow < g.ww.out; ++ow) {
      T* __restrict o = out + (row * g.ww.out + ow) * c;
      std::fill(o, o + c, P == Pool::kMax ? -std::numeric_limits<T>::infinity() : T(0));
      for (int64_t ih = g.row_begin(oh); ih < g.row_end(oh); ++ih) {
        for (int64_t iw = g.col_begin(ow); iw < g.col_end(ow); ++iw) {
          const T* __restrict p = in + ((n * g.h + ih) * g.w + iw) * c;
          for (int64_t k = 0; k < c; ++k) {
            if constexpr (P == Pool::kMax) {
              o[k] = Replaces(p[k], o[k]) ? p[k] : o[k];
            } else {
              o[k] += p[k];
            }
          }
        }
      }
      if constexpr (P == Pool::kAvg) {
        const T count = static_cast<T>((g.row_end(oh) - g.row_begin(oh)) * (g.col_end(ow) - g.col_begin(ow)));
        for (int64_t k = 0; k < c; ++k) o[k] /= count;
      }
    }
  }
}

template <Pool P>
Status PoolKernel(KernelContext& ctx) {
  const Tensor& input = ctx.input(0);
  LS_ASSIGN_OR_RETURN(Geometry g, PoolGeometry(PoolName(P), ctx.attrs(), {input.dtype(), input.shape()}));
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, input.dtype(), g.out));
  if (out->num_elements() == 0) return Status::Ok();
  const int64_t row_cost = std::max<int64_t>(1, g.ww.out * g.c * g.kh * g.kw);
  return DispatchReal(input.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* in = input.data<T>().data();
    T* po = out->mutable_data<T>().data();
    ctx.pool().ParallelFor(g.n * g.wh.out, std::max<int64_t>(1, kElementGrain / row_cost),
                           [&](int64_t begin, int64_t end) { PoolRows<P>(g, in, po, begin, end); });
    return Status::Ok();
  });
}

// dx for images [begin, end), zeroed first.
template <Pool P, typename T>
void PoolGradImages(const Geometry& g, const T* x, const T* dy, T* dx, int64_t begin, int64_t end) {
  const int64_t c = g.c;
  const int64_t image = g.h * g.w * c;
  std::fill(dx + begin * image, dx + end * image, T(0));
  for (int64_t n = begin; n < end; ++n) {
    const T* xn = x == nullptr ? nullptr : x + n * image;
    T* dxn = dx + n * image;
    for (int64_t oh = 0; oh < g.wh.out; ++oh) {
      const int64_t h_lo = g.row_begin(oh), h_hi = g.row_end(oh);
      for (int64_t ow = 0; ow < g.ww.out; ++ow) {
        const int64_t w_lo = g.col_begin(ow), w_hi = g.col_end(ow);
        const T* d = dy + ((n * g.wh.out + oh) * g.ww.out + ow) * c;
        if constexpr (P == Pool::kMax) {
          for (int64_t k = 0; k < c; ++k) {
            int64_t at = -1;
            T best = T(0);
            for (int64_t ih = h_lo; ih < h_hi; ++ih) {
              for (int64_t iw = w_lo; iw < w_hi; ++iw) {
                const int64_t i = (ih * g.w + iw) * c + k;
                if (at < 0 || Replaces(xn[i], best)) {
                  at = i;
                  best = xn[i];
                }
              }
            }
            if (at >= 0) dxn[at] += d[k];
          }
        } else {
          const T count = static_cast<T>((h_hi - h_lo) * (w_hi - w_lo));
          for (int64_t ih = h_lo; ih < h_hi; ++ih) {
            for (int64_t iw = w_lo; iw < w_hi; ++iw) {
              T* __restrict o = dxn + (ih * g.w + iw) * c;
              for (int64_t k = 0; k < c; ++k) o[k] += d[k] / count;
            }
          }
        }
      }
    }
  }
}

template <Pool P>
Status PoolGradKernel(KernelContext& ctx) {
  constexpr std::string_view name = PoolGradName(P);
  const Tensor& x = ctx.input(P == Pool::kMax ? 0 : 1);
  const Tensor& dy = ctx.input(P == Pool::kMax ? 1 : 0);
  LS_ASSIGN_OR_RETURN(Geometry g, PoolGeometry(name, ctx.attrs(), {x.dtype(), x.shape()}));
  LS_RETURN_IF_ERROR(CheckDType(name, "dy", dy.dtype(), x.dtype()));
  LS_RETURN_IF_ERROR(CheckOutputGradient(name, dy.shape(), g));
  LS_ASSIGN_OR_RETURN(Tensor * dx, ctx.AllocateOutput(0, x.dtype(), x.shape()));
  if (dx->num_elements() == 0) return Status::Ok();
  const int64_t image_cost = std::max<int64_t>(1, g.pixels_per_image() * g.c * g.kh * g.kw);
  return DispatchReal(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* px = P == Pool::kMax ? x.data<T>().data() : nullptr;
    const T* pdy = dy.data<T>().data();
    T* pdx = dx->mutable_data<T>().data();
    ctx.pool().ParallelFor(
        g.n, std::max<int64_t>(1, kElementGrain / image_cost),
        [&](int64_t begin, int64_t end) { PoolGradImages<P>(g, px, pdy, pdx, begin, end); });
    return Status::Ok();
  });
}

Status MaxPoolGrad(GradientBuilder& g) {
  LS_RETURN_IF_ERROR(CheckDifferentiable(g));
  g.SetInputGrad(0, g.Op(PoolGradName(Pool::kMax), {g.input(0), g.output_grad(0)}, g.attrs()));
  return Status::Ok();
}

Status AvgPoolGrad(GradientBuilder& g) {
  LS_RETURN_IF_ERROR(CheckDifferentiable(g));
  g.SetInputGrad(0, g.Op(PoolGradName(Pool::kAvg), {g.output_grad(0), g.input(0)}, g.attrs()));
  return Status::Ok();
}

}  // namespace

void RegisterPoolOps(OpRegistry& registry) {
  (void)registry.Register(SimpleOpDef(std::string(PoolName(Pool::kMax)), 1, InferPool<Pool::kMax>,
                                      PoolKernel<Pool::kMax>, MaxPoolGrad));
  (void)registry.Register(SimpleOpDef(std::string(PoolName(Pool::kAvg)), 1, InferPool<Pool::kAvg>,
                                      PoolKernel<Pool::kAvg>, AvgPoolGrad));
  (void)registry.Register(SimpleOpDef(std::string(PoolGradName(Pool::kMax)), 2, InferPoolGrad<Pool::kMax>,
                                      PoolGradKernel<Pool::kMax>));
  (void)registry.Register(SimpleOpDef(std::string(PoolGradName(Pool::kAvg)), 2, InferPoolGrad<Pool::kAvg>,
                                      PoolGradKernel<Pool::kAvg>));
}

}  // namespace lockstep
