// DepthwiseConv2D's gradients (depthwise_conv_ops.cc has the forward op and its notation):
//   DepthwiseConv2DBackpropInput(dy, filter, x)   dx [N, H, W, C]:
//       dx[n, ih, iw, c] = Σ over the output pixels whose window holds (ih, iw), and m, of
//                          dy[n, oh, ow, c * M + m] · f[i, j, c, m]
//   DepthwiseConv2DBackpropFilter(x, dy, filter)  df [KH, KW, C, M]:
//       df[i, j, c, m] = Σ_{n, oh, ow} x[n, ih, iw, c] · dy[n, oh, ow, c * M + m]
// x and filter give only their shapes. The forward op's attrs. float32 and float64 (gradient
// checks). Every sum is taken in one order whatever the thread count: the input gradient is cut
// by images (an image's sums touch only it), the filter gradient by channels (each element
// summed over (n, oh, ow) in order). Loops, not the Gemm: a depthwise layer's products are
// KH * KW terms long.
#include <algorithm>
#include <cstdint>

#include "runtime/ops/depthwise_conv.h"
#include "runtime/ops/op_util.h"

namespace lockstep {
namespace {

constexpr std::string_view kDepthwiseInputGradOp = "DepthwiseConv2DBackpropInput";
constexpr std::string_view kDepthwiseFilterGradOp = "DepthwiseConv2DBackpropFilter";

// The geometry of the forward op that these inputs are the gradient of; checks dy's shape.
StatusOr<Geometry> GradGeometry(std::string_view op, const AttrMap& attrs, const TensorSpec& x,
                                const TensorSpec& filter, const TensorSpec& dy) {
  LS_ASSIGN_OR_RETURN(Geometry g, DepthwiseGeometry(op, attrs, x, filter));
  LS_RETURN_IF_ERROR(CheckDType(op, "dy", dy.dtype, x.dtype));
  bool fits = dy.shape.rank() == 4;
  for (int d = 0; fits && d < 4; ++d) {
    int64_t merged;
    fits = MergeDim(dy.shape.dim(d), g.out.dim(d), &merged);
  }
  if (!fits) {
    return InvalidArgument(Str(op) + ": dy " + dy.shape.ToString() + " is not the shape of the output " +
                           g.out.ToString());
  }
  return g;
}

StatusOr<std::vector<TensorSpec>> InferInputGrad(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount(kDepthwiseInputGradOp, ctx.inputs.size(), 3, 3));
  LS_RETURN_IF_ERROR(GradGeometry(kDepthwiseInputGradOp, ctx.attrs, ctx.inputs[2], ctx.inputs[1], ctx.inputs[0]).status());
  return Single(ctx.inputs[0].dtype, ctx.inputs[2].shape);
}

StatusOr<std::vector<TensorSpec>> InferFilterGrad(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount(kDepthwiseFilterGradOp, ctx.inputs.size(), 3, 3));
  LS_RETURN_IF_ERROR(GradGeometry(kDepthwiseFilterGradOp, ctx.attrs, ctx.inputs[0], ctx.inputs[2], ctx.inputs[1]).status());
  return Single(ctx.inputs[1].dtype, ctx.inputs[2].shape);
}

// Calls fn(oh, ow, i, j, ih, iw) for every tap inside the image of every output pixel of one
// image, in (oh, ow, i, j) order.
template <typename Fn>
void ForEachTap(const Geometry& g, Fn&& fn) {
  for (int64_t oh = 0; oh < g.wh.out; ++oh) {
    const int64_t top = oh * g.sh - g.wh.pad_before;
    for (int64_t ow = 0; ow < g.ww.out; ++ow) {
      const int64_t left = ow * g.sw - g.ww.pad_before;
      for (int64_t ih = g.row_begin(oh); ih < g.row_end(oh); ++ih) {
        for (int64_t iw = g.col_begin(ow); iw < g.col_end(ow); ++iw) fn(oh, ow, ih - top, iw - left, ih, iw);
      }
    }
  }
}

Status InputGradKernel(KernelContext& ctx) {
  const Tensor& dy = ctx.input(0);
  const Tensor& filter = ctx.input(1);
  const Tensor& x = ctx.input(2);
  LS_ASSIGN_OR_RETURN(Geometry g, GradGeometry(kDepthwiseInputGradOp, ctx.attrs(), {x.dtype(), x.shape()},
                                               {filter.dtype(), filter.shape()}, {dy.dtype(), dy.shape()}));
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, dy.dtype(), x.shape()));
  const int64_t c = g.c, m = filter.shape().dim(3), cm = c * m;
  return DispatchReal(dy.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* pdy = dy.data<T>().data();
    const T* pf = filter.data<T>().data();
    T* pdx = out->mutable_data<T>().data();
    const int64_t image = g.h * g.w * c, out_image = g.pixels_per_image() * cm;
    ctx.pool().ParallelFor(g.n, 1, [&](int64_t begin, int64_t end) {
      for (int64_t n = begin; n < end; ++n) {
        T* dx = pdx + n * image;
        std::fill(dx, dx + image, T(0));
        const T* dyn = pdy + n * out_image;
        ForEachTap(g, [&](int64_t oh, int64_t ow, int64_t i, int64_t j, int64_t ih, int64_t iw) {
          const T* d = dyn + (oh * g.ww.out + ow) * cm;
          const T* f = pf + (i * g.kw + j) * cm;
          T* o = dx + (ih * g.w + iw) * c;
          for (int64_t k = 0; k < c; ++k) {
            for (int64_t mm = 0; mm < m; ++mm) o[k] += d[k * m + mm] * f[k * m + mm];
          }
        });
      }
    });
    return Status::Ok();
  });
}

Status FilterGradKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& dy = ctx.input(1);
  const Tensor& filter = ctx.input(2);
  LS_ASSIGN_OR_RETURN(Geometry g, GradGeometry(kDepthwiseFilterGradOp, ctx.attrs(), {x.dtype(), x.shape()},
                                               {filter.dtype(), filter.shape()}, {dy.dtype(), dy.shape()}));
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, dy.dtype(), filter.shape()));
  const int64_t c = g.c, m = filter.shape().dim(3), cm = c * m;
  return DispatchReal(dy.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* px = x.data<T>().data();
    const T* pdy = dy.data<T>().data();
    T* pdf = out->mutable_data<T>().data();
    std::fill(pdf, pdf + out->num_elements(), T(0));
    const int64_t image = g.h * g.w * c, out_image = g.pixels_per_image() * cm;
    const int64_t per_channel = std::max<int64_t>(1, g.n * g.pixels_per_image() * g.kh * g.kw * m);
    const int64_t grain = std::max<int64_t>(1, kElementGrain / per_channel);
    ctx.pool().ParallelFor(c, grain, [&](int64_t c0, int64_t c1) {
      for (int64_t n = 0; n < g.n; ++n) {
        const T* xn = px + n * image;
        const T* dyn = pdy + n * out_image;
        ForEachTap(g, [&](int64_t oh, int64_t ow, int64_t i, int64_t j, int64_t ih, int64_t iw) {
          const T* xv = xn + (ih * g.w + iw) * c;
          const T* d = dyn + (oh * g.ww.out + ow) * cm;
          T* df = pdf + (i * g.kw + j) * cm;
          for (int64_t k = c0; k < c1; ++k) {
            for (int64_t mm = 0; mm < m; ++mm) df[k * m + mm] += xv[k] * d[k * m + mm];
          }
        });
      }
    });
    return Status::Ok();
  });
}

}  // namespace

Status DepthwiseConv2DGrad(GradientBuilder& g) {
  LS_RETURN_IF_ERROR(CheckDifferentiable(g));
  const std::string& dy = g.output_grad(0);
  if (g.needs_input_grad(0)) g.SetInputGrad(0, g.Op(kDepthwiseInputGradOp, {dy, g.input(1), g.input(0)}, g.attrs()));
  if (g.needs_input_grad(1)) g.SetInputGrad(1, g.Op(kDepthwiseFilterGradOp, {g.input(0), dy, g.input(1)}, g.attrs()));
  return Status::Ok();
}

void RegisterDepthwiseConvGradOps(OpRegistry& registry) {
  (void)registry.Register(SimpleOpDef(std::string(kDepthwiseInputGradOp), 3, InferInputGrad, InputGradKernel));
  (void)registry.Register(SimpleOpDef(std::string(kDepthwiseFilterGradOp), 3, InferFilterGrad, FilterGradKernel));
}

}  // namespace lockstep
