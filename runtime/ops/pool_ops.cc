// MaxPool2D and AvgPool2D (NHWC) and their gradients:
//   MaxPool2DGrad(x, dy)      each window's dy goes to the element the forward pass picked
//   AvgPool2DGrad(dy, x)      each window's dy is shared equally by the elements it averaged
// Attrs: ksize [kh, kw], strides (default ksize, as Keras), padding "SAME" / "VALID"
// (window.h); 4-element NHWC lists [1, h, w, 1] are accepted. The forward pools also take
// dilations [dh, dw] (default [1, 1]; ONNX's): the window's taps lie dh rows and dw columns
// apart, and the window's extent, (k - 1) * d + 1, is what SAME and VALID see. The gradients
// take no dilations. float32, and float64 for
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

// A pool's window: the geometry of its extent, and the distance between its taps.
struct PoolWindow {
  Geometry g;  // g.kh and g.kw are the extents
  int64_t dh = 1, dw = 1;
};

StatusOr<PoolWindow> ReadPoolWindow(std::string_view op, const AttrMap& attrs, const TensorSpec& input,
                                    bool dilations_allowed) {
  LS_RETURN_IF_ERROR(CheckReal(op, "input", input.dtype));
  LS_ASSIGN_OR_RETURN(auto ksize, SpatialPair(op, attrs, "ksize", std::nullopt));
  LS_ASSIGN_OR_RETURN(auto strides, SpatialPair(op, attrs, "strides", ksize));
  LS_ASSIGN_OR_RETURN(auto dilations, SpatialPair(op, attrs, "dilations", std::pair<int64_t, int64_t>{1, 1}));
  if (!dilations_allowed && dilations != std::pair<int64_t, int64_t>{1, 1}) {
    return InvalidArgument(Str(op) + ": dilations are not supported");
  }
  // Bounded so that the extent cannot overflow; a window past 2^20 taps is no image's.
  constexpr int64_t kMaxSpread = int64_t{1} << 20;
  if (ksize.first > kMaxSpread || ksize.second > kMaxSpread || dilations.first > kMaxSpread ||
      dilations.second > kMaxSpread) {
    return InvalidArgument(Str(op) + ": ksize and dilations must be at most 2^20");
  }
  LS_ASSIGN_OR_RETURN(bool same, ReadSamePadding(op, attrs));
  PoolWindow w;
  w.dh = dilations.first;
  w.dw = dilations.second;
  LS_ASSIGN_OR_RETURN(w.g, MakeGeometry(op, input.shape, (ksize.first - 1) * w.dh + 1, (ksize.second - 1) * w.dw + 1,
                                         strides, WindowPadding{same}, input.shape.rank() == 4 ? input.shape.dim(3) : 0));
  return w;
}

StatusOr<Geometry> PoolGeometry(std::string_view op, const AttrMap& attrs, const TensorSpec& input) {
  LS_ASSIGN_OR_RETURN(PoolWindow w, ReadPoolWindow(op, attrs, input, /*dilations_allowed=*/false));
  return w.g;
}

template <Pool P>
StatusOr<std::vector<TensorSpec>> InferPool(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount(PoolName(P), ctx.inputs.size(), 1, 1));
  LS_ASSIGN_OR_RETURN(PoolWindow w, ReadPoolWindow(PoolName(P), ctx.attrs, ctx.inputs[0], true));
  return Single(ctx.inputs[0].dtype, w.g.out);
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

// The first tap at or after 0 of a window that starts at `start` with taps `step` apart.
int64_t FirstTap(int64_t start, int64_t step) {
  return start >= 0 ? start : start + (-start + step - 1) / step * step;
}

// Output rows [begin, end) of the flattened (n, oh) index. Channels are innermost, so every
// step is a vectorisable loop over C. MaxPool skips the padding (it is not -inf, it is absent);
// AvgPool divides by the number of real elements under the window, as TensorFlow does (SAME
// padding leaves at least one under every window, VALID all of them).
template <Pool P, typename T>
void PoolRows(const PoolWindow& pw, const T* in, T* out, int64_t begin, int64_t end) {
  const Geometry& g = pw.g;
  const int64_t c = g.c;
  for (int64_t row = begin; row < end; ++row) {
    const int64_t n = row / g.wh.out;
    const int64_t oh = row % g.wh.out;
    const int64_t h_lo = FirstTap(oh * g.sh - g.wh.pad_before, pw.dh), h_hi = g.row_end(oh);
    for (int64_t ow = 0; ow < g.ww.out; ++ow) {
      const int64_t w_lo = FirstTap(ow * g.sw - g.ww.pad_before, pw.dw), w_hi = g.col_end(ow);
      T* __restrict o = out + (row * g.ww.out + ow) * c;
      std::fill(o, o + c, P == Pool::kMax ? -std::numeric_limits<T>::infinity() : T(0));
      int64_t count = 0;
      for (int64_t ih = h_lo; ih < h_hi; ih += pw.dh) {
        for (int64_t iw = w_lo; iw < w_hi; iw += pw.dw, ++count) {
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
        // A dilated window may hold no real element: 0/0, as an average of nothing is.
        for (int64_t k = 0; k < c; ++k) o[k] /= static_cast<T>(count);
      }
    }
  }
}

template <Pool P>
Status PoolKernel(KernelContext& ctx) {
  const Tensor& input = ctx.input(0);
  LS_ASSIGN_OR_RETURN(PoolWindow w, ReadPoolWindow(PoolName(P), ctx.attrs(), {input.dtype(), input.shape()}, true));
  const Geometry& g = w.g;
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, input.dtype(), g.out));
  if (out->num_elements() == 0) return Status::Ok();
  const int64_t taps = ((g.kh - 1) / w.dh + 1) * ((g.kw - 1) / w.dw + 1);
  const int64_t row_cost = std::max<int64_t>(1, g.ww.out * g.c * taps);
  return DispatchReal(input.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* in = input.data<T>().data();
    T* po = out->mutable_data<T>().data();
    ctx.pool().ParallelFor(g.n * g.wh.out, std::max<int64_t>(1, kElementGrain / row_cost),
                           [&](int64_t begin, int64_t end) { PoolRows<P>(w, in, po, begin, end); });
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
