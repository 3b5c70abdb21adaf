// DepthwiseConv2D (TensorFlow's DepthwiseConv2dNative, what Keras' DepthwiseConv2D and
// SeparableConv2D export): every input channel is convolved with its own filters, and
// channels never mix.
//   input  [N, H, W, C] (NHWC)
//   filter [KH, KW, C, M]        M: the depth multiplier
//   output [N, OH, OW, C * M]    out[n, oh, ow, c * M + m] = Σ_{i,j} x[n, ih, iw, c] · f[i, j, c, m]
// Attrs: strides [sh, sw] (default [1, 1]) and padding "SAME" / "VALID" / "EXPLICIT" with
// "explicit_paddings", as Conv2D's (window.h). float32, and float64; no gradient (serving only).
//
// FusedDepthwiseConv2D: the same with a bias [C * M] (input 2) and attr "activation" (as
// FusedConv2D's) applied to each output pixel while it is in cache, float32 only; the fusion
// pass makes it from DepthwiseConv2D -> BiasAdd -> activation. The same rounded operations in
// the same order as the three ops: the same bits.
//
// A direct loop, not the Gemm: each output element is a dot product of only KH * KW terms, so
// an im2col matrix would be mostly copying. Channels are innermost, so the inner loop is a
// multiply-add over C * M contiguous values. Taps are summed in (i, j) order whatever the
// thread count.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>

#include "runtime/activation.h"
#include "runtime/matmul/gemm_path.h"
#include "runtime/op_registry.h"
#include "runtime/ops/op_util.h"
#include "runtime/ops/ops.h"
#include "runtime/ops/window.h"

namespace lockstep {
namespace {

constexpr std::string_view kOp = "DepthwiseConv2D";
constexpr std::string_view kFusedOp = "FusedDepthwiseConv2D";

// What FusedDepthwiseConv2D does to each output pixel after its taps: bias, then activation.
struct PixelEpilogue {
  const float* bias = nullptr;
  Activation activation = Activation::kNone;

  bool empty() const { return bias == nullptr && activation == Activation::kNone; }
  void Apply(float* pixel, int64_t channels) const {
    if (bias != nullptr) {
      for (int64_t k = 0; k < channels; ++k) pixel[k] += bias[k];
    }
    ApplyActivation(activation, pixel, pixel, channels);
  }
};

StatusOr<Geometry> DepthwiseGeometry(const AttrMap& attrs, const TensorSpec& input, const TensorSpec& filter) {
  LS_RETURN_IF_ERROR(CheckReal(kOp, "input", input.dtype));
  LS_RETURN_IF_ERROR(CheckDType(kOp, "filter", filter.dtype, input.dtype));
  LS_RETURN_IF_ERROR(CheckRank(kOp, "input (NHWC)", input.shape, 4));
  LS_RETURN_IF_ERROR(CheckRank(kOp, "filter [KH, KW, C, M]", filter.shape, 4));
  LS_ASSIGN_OR_RETURN(auto strides, SpatialPair(kOp, attrs, "strides", std::pair<int64_t, int64_t>{1, 1}));
  LS_ASSIGN_OR_RETURN(WindowPadding padding, ReadConvPadding(kOp, attrs));
  int64_t c;
  if (!MergeDim(input.shape.dim(3), filter.shape.dim(2), &c)) {
    return InvalidArgument(Str(kOp) + ": input channels " + std::to_string(input.shape.dim(3)) + " of input " +
                           input.shape.ToString() + " differ from filter " + filter.shape.ToString());
  }
  const int64_t m = filter.shape.dim(3);
  Shape in = input.shape;
  in.set_dim(3, c);
  return MakeGeometry(kOp, in, filter.shape.dim(0), filter.shape.dim(1), strides, padding,
                      c < 0 || m < 0 ? -1 : c * m);
}

StatusOr<std::vector<TensorSpec>> InferDepthwise(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount(kOp, ctx.inputs.size(), 2, 2));
  LS_ASSIGN_OR_RETURN(Geometry g, DepthwiseGeometry(ctx.attrs, ctx.inputs[0], ctx.inputs[1]));
  return Single(ctx.inputs[0].dtype, g.out);
}

// FusedDepthwiseConv2D's activation, and a check of its bias against the output channels.
StatusOr<Activation> FusedEpilogue(const AttrMap& attrs, std::span<const TensorSpec> in, int64_t channels) {
  LS_RETURN_IF_ERROR(CheckDType(kFusedOp, "input", in[0].dtype, DType::kFloat32));
  if (in.size() == 3) LS_RETURN_IF_ERROR(CheckChannelBias(kFusedOp, in[2], channels));
  LS_ASSIGN_OR_RETURN(std::string_view name, attrs.GetStringViewOr("activation", "none"));
  return ParseActivation(name);
}

StatusOr<std::vector<TensorSpec>> InferFusedDepthwise(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount(kFusedOp, ctx.inputs.size(), 2, 3));
  LS_ASSIGN_OR_RETURN(Geometry g, DepthwiseGeometry(ctx.attrs, ctx.inputs[0], ctx.inputs[1]));
  LS_RETURN_IF_ERROR(FusedEpilogue(ctx.attrs, ctx.inputs, g.out.dim(3)).status());
  return Single(DType::kFloat32, g.out);
}

// Output rows [begin, end) of the flattened (n, oh) index; `m` is the depth multiplier. Every
// case but float32 with M = 1 (RowsFloatM1 below) runs here.
template <typename T>
void DepthwiseRows(const Geometry& g, int64_t m, const T* in, const T* filter, T* out, int64_t begin,
                   int64_t end) {
  const int64_t c = g.c, cm = g.c * m;
  for (int64_t row = begin; row < end; ++row) {
    const int64_t n = row / g.wh.out;
    const int64_t oh = row % g.wh.out;
    const int64_t top = oh * g.sh - g.wh.pad_before;
    for (int64_t ow = 0; ow < g.ww.out; ++ow) {
      const int64_t left = ow * g.sw - g.ww.pad_before;
      T* __restrict o = out + (row * g.ww.out + ow) * cm;
      std::fill(o, o + cm, T(0));
      for (int64_t ih = g.row_begin(oh); ih < g.row_end(oh); ++ih) {
        for (int64_t iw = g.col_begin(ow); iw < g.col_end(ow); ++iw) {
          const T* __restrict x = in + ((n * g.h + ih) * g.w + iw) * c;
          const T* __restrict f = filter + ((ih - top) * g.kw + (iw - left)) * cm;
          for (int64_t k = 0; k < c; ++k) {
            for (int64_t j = 0; j < m; ++j) o[k * m + j] += x[k] * f[k * m + j];
          }
        }
      }
    }
  }
}

// The common case, float32 with M = 1 (Keras' default depth multiplier). For each output
// pixel, blocks of 64, 32 or 16 channels are summed over the taps in GCC vectors (16 lanes,
// lowered to whatever the ISA has) that stay in registers, and stored once. The body is
// compiled three times, for AVX-512F, AVX2 and baseline x86-64, and the matmul core's path
// (gemm_path.h: the CPU's best, LOCKSTEP_GEMM_PATH, SetGemmPath) picks one, so that one switch
// governs every kernel's instruction set. (Not target_clones: ThreadSanitizer crashes in its
// ifunc resolver.) Every version sums the taps in the same (i, j) order as DepthwiseRows, one
// rounded multiply and one rounded add each (the runtime builds with -ffp-contract=off), so
// all give the same bits.
using Lanes = float __attribute__((vector_size(64)));
constexpr int64_t kLanes = 16;

// Output pixel (n, oh, ow)'s channels [c0, c0 + kVectors * kLanes).
template <int kVectors>
[[gnu::always_inline]] inline void SumTaps(const Geometry& g, const float* in, const float* filter, int64_t n,
                                           int64_t oh, int64_t ow, int64_t c0, float* out_pixel) {
  const int64_t top = oh * g.sh - g.wh.pad_before, left = ow * g.sw - g.ww.pad_before;
  Lanes acc[kVectors] = {};
  for (int64_t ih = g.row_begin(oh); ih < g.row_end(oh); ++ih) {
    for (int64_t iw = g.col_begin(ow); iw < g.col_end(ow); ++iw) {
      const float* x = in + ((n * g.h + ih) * g.w + iw) * g.c + c0;
      const float* f = filter + ((ih - top) * g.kw + (iw - left)) * g.c + c0;
      for (int v = 0; v < kVectors; ++v) {
        Lanes xv, fv;
        std::memcpy(&xv, x + v * kLanes, sizeof xv);
        std::memcpy(&fv, f + v * kLanes, sizeof fv);
        acc[v] += xv * fv;
      }
    }
  }
  std::memcpy(out_pixel + c0, acc, sizeof acc);
}

[[gnu::always_inline]] inline void RowsFloatM1(const Geometry& g, const float* in, const float* filter,
                                               float* out, int64_t begin, int64_t end) {
  const int64_t c = g.c;
  for (int64_t row = begin; row < end; ++row) {
    const int64_t n = row / g.wh.out;
    const int64_t oh = row % g.wh.out;
    for (int64_t ow = 0; ow < g.ww.out; ++ow) {
      float* o = out + (row * g.ww.out + ow) * c;
      int64_t c0 = 0;
      for (; c0 + 4 * kLanes <= c; c0 += 4 * kLanes) SumTaps<4>(g, in, filter, n, oh, ow, c0, o);
      if (c0 + 2 * kLanes <= c) {
        SumTaps<2>(g, in, filter, n, oh, ow, c0, o);
        c0 += 2 * kLanes;
      }
      if (c0 + kLanes <= c) {
        SumTaps<1>(g, in, filter, n, oh, ow, c0, o);
        c0 += kLanes;
      }
      if (c0 == c) continue;
      // The last channels, fewer than a vector.
      const int64_t top = oh * g.sh - g.wh.pad_before, left = ow * g.sw - g.ww.pad_before;
      std::fill(o + c0, o + c, 0.0f);
      for (int64_t ih = g.row_begin(oh); ih < g.row_end(oh); ++ih) {
        for (int64_t iw = g.col_begin(ow); iw < g.col_end(ow); ++iw) {
          const float* x = in + ((n * g.h + ih) * g.w + iw) * c;
          const float* f = filter + ((ih - top) * g.kw + (iw - left)) * c;
          for (int64_t k = c0; k < c; ++k) o[k] += x[k] * f[k];
        }
      }
    }
  }
}

using RowsFn = void (*)(const Geometry&, const float*, const float*, float*, int64_t, int64_t);

void RowsFloatM1Baseline(const Geometry& g, const float* in, const float* filter, float* out, int64_t begin,
                         int64_t end) {
  RowsFloatM1(g, in, filter, out, begin, end);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) void RowsFloatM1Avx2(const Geometry& g, const float* in, const float* filter,
                                                     float* out, int64_t begin, int64_t end) {
  RowsFloatM1(g, in, filter, out, begin, end);
}

__attribute__((target("avx512f"))) void RowsFloatM1Avx512(const Geometry& g, const float* in,
                                                          const float* filter, float* out, int64_t begin,
                                                          int64_t end) {
  RowsFloatM1(g, in, filter, out, begin, end);
}
#endif

RowsFn ChooseRowsFloatM1() {
#if defined(__x86_64__) && defined(__GNUC__)
  switch (ActiveGemmPath()) {
    case GemmPath::kAvx512:
    case GemmPath::kAvx512Bf16: return RowsFloatM1Avx512;
    case GemmPath::kAvx2: return RowsFloatM1Avx2;
    case GemmPath::kPortable: break;
  }
#endif
  return RowsFloatM1Baseline;
}

// DepthwiseConv2D, and FusedDepthwiseConv2D when `epilogue` is not empty (float32 only); `g` is
// DepthwiseGeometry of the op's inputs.
Status DepthwiseForward(KernelContext& ctx, const Geometry& g, const PixelEpilogue& epilogue) {
  const Tensor& input = ctx.input(0);
  const Tensor& filter = ctx.input(1);
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, input.dtype(), g.out));
  if (out->num_elements() == 0) return Status::Ok();
  const int64_t m = filter.shape().dim(3);
  const int64_t row_cost = std::max<int64_t>(1, g.ww.out * g.c * m * g.kh * g.kw);
  const RowsFn rows_float_m1 = ChooseRowsFloatM1();
  return DispatchReal(input.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* in = input.data<T>().data();
    const T* f = filter.data<T>().data();
    T* po = out->mutable_data<T>().data();
    ctx.pool().ParallelFor(g.n * g.wh.out, std::max<int64_t>(1, kElementGrain / row_cost),
                           [&](int64_t begin, int64_t end) {
                             if constexpr (std::is_same_v<T, float>) {
                               if (m == 1) {
                                 rows_float_m1(g, in, f, po, begin, end);
                               } else {
                                 DepthwiseRows(g, m, in, f, po, begin, end);
                               }
                               // Each pixel of these rows again while it is in cache.
                               if (epilogue.empty()) return;
                               const int64_t cm = g.c * m;
                               for (int64_t p = begin * g.ww.out; p < end * g.ww.out; ++p) epilogue.Apply(po + p * cm, cm);
                             } else {
                               DepthwiseRows(g, m, in, f, po, begin, end);
                             }
                           });
    return Status::Ok();
  });
}

Status DepthwiseKernel(KernelContext& ctx) {
  LS_ASSIGN_OR_RETURN(Geometry g, DepthwiseGeometry(ctx.attrs(), {ctx.input(0).dtype(), ctx.input(0).shape()},
                                                    {ctx.input(1).dtype(), ctx.input(1).shape()}));
  return DepthwiseForward(ctx, g, PixelEpilogue{});
}

Status FusedDepthwiseKernel(KernelContext& ctx) {
  const int n = std::min(ctx.num_inputs(), 3);
  TensorSpec specs[3];  // an array, not a vector: this runs per request
  for (int i = 0; i < n; ++i) specs[i] = {ctx.input(i).dtype(), ctx.input(i).shape()};
  LS_ASSIGN_OR_RETURN(Geometry g, DepthwiseGeometry(ctx.attrs(), specs[0], specs[1]));
  PixelEpilogue epilogue;
  LS_ASSIGN_OR_RETURN(epilogue.activation,
                      FusedEpilogue(ctx.attrs(), std::span<const TensorSpec>(specs, static_cast<size_t>(n)), g.out.dim(3)));
  if (n == 3) epilogue.bias = ctx.input(2).data<float>().data();
  return DepthwiseForward(ctx, g, epilogue);
}

}  // namespace

void RegisterDepthwiseConvOps(OpRegistry& registry) {
  (void)registry.Register(SimpleOpDef(std::string(kOp), 2, InferDepthwise, DepthwiseKernel));
  OpDef fused = SimpleOpDef(std::string(kFusedOp), 2, InferFusedDepthwise, FusedDepthwiseKernel);
  fused.max_inputs = 3;
  (void)registry.Register(std::move(fused));
}

}  // namespace lockstep
