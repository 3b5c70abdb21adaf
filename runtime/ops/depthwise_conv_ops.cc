// DepthwiseConv2D (TensorFlow's DepthwiseConv2dNative, what Keras' DepthwiseConv2D and
// SeparableConv2D export): every input channel is convolved with its own filters, and
// channels never mix.
//   input  [N, H, W, C] (NHWC)
//   filter [KH, KW, C, M]        M: the depth multiplier
//   output [N, OH, OW, C * M]    out[n, oh, ow, c * M + m] = Σ_{i,j} x[n, ih, iw, c] · f[i, j, c, m]
// Attrs: strides [sh, sw] (default [1, 1]) and padding "SAME" / "VALID" / "EXPLICIT" with
// "explicit_paddings", as Conv2D's (window.h). float32, and float64; the gradients are
// depthwise_conv_grad_ops.cc's.
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
#include "runtime/ops/depthwise_conv.h"
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

}  // namespace

StatusOr<Geometry> DepthwiseGeometry(std::string_view op, const AttrMap& attrs, const TensorSpec& input,
                                     const TensorSpec& filter) {
  LS_RETURN_IF_ERROR(CheckReal(op, "input", input.dtype));
  LS_RETURN_IF_ERROR(CheckDType(op, "filter", filter.dtype, input.dtype));
  LS_RETURN_IF_ERROR(CheckRank(op, "input (NHWC)", input.shape, 4));
  LS_RETURN_IF_ERROR(CheckRank(op, "filter [KH, KW, C, M]", filter.shape, 4));
  LS_ASSIGN_OR_RETURN(auto strides, SpatialPair(op, attrs, "strides", std::pair<int64_t, int64_t>{1, 1}));
  LS_ASSIGN_OR_RETURN(WindowPadding padding, ReadConvPadding(op, attrs));
  int64_t c;
  if (!MergeDim(input.shape.dim(3), filter.shape.dim(2), &c)) {
    return InvalidArgument(Str(op) + ": input channels " + std::to_string(input.shape.dim(3)) + " of input " +
                           input.shape.ToString() + " differ from filter " + filter.shape.ToString());
  }
  const int64_t m = filter.shape.dim(3);
  Shape in = input.shape;
  in.set_dim(3, c);
  return MakeGeometry(op, in, filter.shape.dim(0), filter.shape.dim(1), strides, padding, c < 0 || m < 0 ? -1 : c * m);
}

namespace {

StatusOr<std::vector<TensorSpec>> InferDepthwise(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount(kOp, ctx.inputs.size(), 2, 2));
  LS_ASSIGN_OR_RETURN(Geometry g, DepthwiseGeometry(kOp, ctx.attrs, ctx.inputs[0], ctx.inputs[1]));
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
  LS_ASSIGN_OR_RETURN(Geometry g, DepthwiseGeometry(kOp, ctx.attrs, ctx.inputs[0], ctx.inputs[1]));
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

// The common case, float32 with M = 1 (Keras' default depth multiplier, every MobileNet's and
// EfficientNet's). An output row at a time: for a group of up to 8 neighbouring output pixels
// and a block of 16 channels, each filter tap is loaded once and multiplied into the group's
// accumulators (GCC vectors of 16 lanes, lowered to whatever the ISA has), so a multiply-add
// costs one load of the image rather than two; pixels whose window crosses the image's left or
// right edge go one at a time over their columns inside it. The bias (FusedDepthwiseConv2D) is
// added to the sums before they are stored. The body is compiled three times, for AVX-512F, AVX2
// and baseline x86-64, and the matmul core's path (gemm_path.h: the CPU's best,
// LOCKSTEP_GEMM_PATH, SetGemmPath) picks one, so that one switch governs every kernel's
// instruction set. (Not target_clones: ThreadSanitizer crashes in its ifunc resolver.) Every
// version sums the taps in the same (i, j) order as DepthwiseRows, one rounded multiply and one
// rounded add each (the runtime builds with -ffp-contract=off), so all give the same bits.
using Lanes = float __attribute__((vector_size(64)));
constexpr int64_t kLanes = 16;


// What stays fixed along one output row.
struct RowTaps {
  const float* image;   // image n
  const float* filter;  // [KH, KW, C]
  const float* bias;    // [C] or null
  int64_t top;          // the input row of filter row 0 (negative in the top padding)
  int64_t i0, i1;       // the filter rows inside the image
};

// Output pixels [ow, ow + P) of a row, channels [c0, c0 + 16), over filter columns [j0, j1)
// (all inside the image for every one of the P pixels).
template <int P>
[[gnu::always_inline]] inline void PixelGroup(const Geometry& g, const RowTaps& t, int64_t ow, int64_t j0,
                                              int64_t j1, int64_t c0, float* out_row) {
  Lanes acc[P] = {};
  const int64_t pixel_stride = g.sw * g.c;
  const int64_t left = ow * g.sw - g.ww.pad_before;
  for (int64_t i = t.i0; i < t.i1; ++i) {
    const float* x_row = t.image + ((t.top + i) * g.w + left) * g.c + c0;
    const float* f_row = t.filter + i * g.kw * g.c + c0;
    for (int64_t j = j0; j < j1; ++j) {
      Lanes f;
      std::memcpy(&f, f_row + j * g.c, sizeof f);
      for (int p = 0; p < P; ++p) {
        Lanes x;
        std::memcpy(&x, x_row + j * g.c + p * pixel_stride, sizeof x);
        acc[p] += x * f;
      }
    }
  }
  if (t.bias != nullptr) {
    Lanes b;
    std::memcpy(&b, t.bias + c0, sizeof b);
    for (int p = 0; p < P; ++p) acc[p] += b;
  }
  for (int p = 0; p < P; ++p) std::memcpy(out_row + (ow + p) * g.c + c0, &acc[p], sizeof acc[p]);
}

// Output pixels [ow, ow + P) of a row, channels [c0, c0 + 16), every window inside the image,
// for a filter KW wide at stride SW known at compile time: the loops unroll, a filter row stays
// in registers, and each input column is loaded once for every tap that reads it (column q of
// the group is pixel p's tap j = q - p * SW), which with stride 1 cuts the loads to about one a
// filter column. Each pixel still gets its taps in (i, j) order.
template <int P, int KW, int SW>
[[gnu::always_inline]] inline void InteriorGroup(const Geometry& g, const RowTaps& t, int64_t ow, int64_t c0,
                                                 float* out_row) {
  Lanes acc[P] = {};
  const int64_t left = ow * SW - g.ww.pad_before;
  for (int64_t i = t.i0; i < t.i1; ++i) {
    const float* x_row = t.image + ((t.top + i) * g.w + left) * g.c + c0;
    const float* f_row = t.filter + i * KW * g.c + c0;
    Lanes f[KW];
#pragma GCC unroll 8
    for (int j = 0; j < KW; ++j) std::memcpy(&f[j], f_row + j * g.c, sizeof f[j]);
    // One pointer stepped along the columns: offsets q * C for every q would each take a
    // register.
    const float* x_col = x_row;
#pragma GCC unroll 32
    for (int q = 0; q < (P - 1) * SW + KW; ++q, x_col += g.c) {
      Lanes x;
      std::memcpy(&x, x_col, sizeof x);
#pragma GCC unroll 8
      for (int j = 0; j < KW; ++j) {
        const int d = q - j;
        if (d >= 0 && d % SW == 0 && d / SW < P) acc[d / SW] += x * f[j];
      }
    }
  }
  if (t.bias != nullptr) {
    Lanes b;
    std::memcpy(&b, t.bias + c0, sizeof b);
    for (int p = 0; p < P; ++p) acc[p] += b;
  }
  for (int p = 0; p < P; ++p) std::memcpy(out_row + (ow + p) * g.c + c0, &acc[p], sizeof acc[p]);
}

// Output pixels [ow, ow + count) of a row, every channel, over filter columns [j0, j1), for
// fewer than 16 channels.
[[gnu::always_inline]] inline void NarrowPixels(const Geometry& g, const RowTaps& t, int64_t ow, int64_t count,
                                                int64_t j0, int64_t j1, float* out_row) {
  for (int64_t p = ow; p < ow + count; ++p) {
    const int64_t left = p * g.sw - g.ww.pad_before;
    float* o = out_row + p * g.c;
    for (int64_t k = 0; k < g.c; ++k) {
      float sum = 0.0f;
      for (int64_t i = t.i0; i < t.i1; ++i) {
        for (int64_t j = j0; j < j1; ++j) {
          sum += t.image[((t.top + i) * g.w + left + j) * g.c + k] * t.filter[(i * g.kw + j) * g.c + k];
        }
      }
      o[k] = t.bias != nullptr ? sum + t.bias[k] : sum;
    }
  }
}

// The last `count` (< P) inner pixels of a row from `ow`, channels [c0, c0 + 16), as one group.
template <int P, int KW, int SW>
[[gnu::always_inline]] inline void Tail(const Geometry& g, const RowTaps& t, int64_t ow, int64_t count, int64_t c0,
                                        float* out_row) {
  if constexpr (P > 0) {
    if (count == P) {
      if constexpr (KW > 0) {
        InteriorGroup<P, KW, SW>(g, t, ow, c0, out_row);
      } else {
        PixelGroup<P>(g, t, ow, 0, g.kw, c0, out_row);
      }
      return;
    }
    Tail<P - 1, KW, SW>(g, t, ow, count, c0, out_row);
  }
}

// Output rows [begin, end), a block of 16 channels at a time along each row (the last block
// overlapping the one before when C is not a multiple of 16: its channels are computed again, to
// the same bits): windows crossing the left or right edge one pixel at a time, the others in
// groups of P and one last group of fewer. KW > 0: a filter KW wide at stride SW, unrolled
// (InteriorGroup); KW = 0, any.
template <int P, int KW, int SW>
[[gnu::always_inline]] inline void RowsFloatM1(const Geometry& g, const float* in, const float* filter,
                                               const float* bias, float* out, int64_t begin, int64_t end) {
  // Output columns whose whole window is inside the image: [inner_begin, inner_end).
  const int64_t inner_begin = std::min(g.ww.out, (g.ww.pad_before + g.sw - 1) / g.sw);
  const int64_t inner_end =
      std::max(inner_begin, std::min(g.ww.out, g.w + g.ww.pad_before - g.kw < 0
                                                   ? int64_t{0}
                                                   : (g.w + g.ww.pad_before - g.kw) / g.sw + 1));
  for (int64_t row = begin; row < end; ++row) {
    const int64_t n = row / g.wh.out;
    const int64_t oh = row % g.wh.out;
    const int64_t top = oh * g.sh - g.wh.pad_before;
    const RowTaps t{in + n * g.h * g.w * g.c, filter, bias, top, std::max<int64_t>(0, -top),
                    std::min(g.kh, g.h - top)};
    float* out_row = out + row * g.ww.out * g.c;
    // The input rows the next output row reads that this one does not (and, at a stride
    // larger than the window, the rows between), asked for while this row is computed: the channel blocks below read a row 64 bytes in every C * 4, a pattern whose
    // misses the hardware prefetchers do not run ahead of. EfficientNet-B0 at batch 8 (inputs
    // from memory), one thread: 56x56x144 4.2 -> 2.0-2.5 ms, 112x112x96 stride 2 5.4 -> 3.8-4.6
    // (oneDNN 3.4-3.6 and 5.6-5.9); at batch 1 (inputs in cache) no change.
    for (int64_t ih = std::max<int64_t>(0, top + g.kh); ih < std::min(g.h, top + g.sh + g.kh); ++ih) {
      const char* line = reinterpret_cast<const char*>(t.image + ih * g.w * g.c);
      const char* line_end = line + g.w * g.c * static_cast<int64_t>(sizeof(float));
      for (; line < line_end; line += 64) __builtin_prefetch(line, 0, 2);
    }
    auto columns = [&](int64_t ow, int64_t* j0, int64_t* j1) {
      const int64_t left = ow * g.sw - g.ww.pad_before;
      *j0 = std::max<int64_t>(0, -left);
      *j1 = std::min(g.kw, g.w - left);
    };
    if (g.c < kLanes) {
      int64_t j0, j1;
      for (int64_t ow = 0; ow < g.ww.out; ++ow) {
        columns(ow, &j0, &j1);
        NarrowPixels(g, t, ow, 1, j0, j1, out_row);
      }
      continue;
    }
    for (int64_t c = 0; c < g.c; c += kLanes) {
      const int64_t c0 = std::min(c, g.c - kLanes);
      int64_t ow = 0, j0, j1;
      for (; ow < inner_begin; ++ow) {
        columns(ow, &j0, &j1);
        PixelGroup<1>(g, t, ow, j0, j1, c0, out_row);
      }
      for (; ow + P <= inner_end; ow += P) {
        if constexpr (KW > 0) {
          InteriorGroup<P, KW, SW>(g, t, ow, c0, out_row);
        } else {
          PixelGroup<P>(g, t, ow, 0, g.kw, c0, out_row);
        }
      }
      Tail<P - 1, KW, SW>(g, t, ow, inner_end - ow, c0, out_row);
      for (ow = inner_end; ow < g.ww.out; ++ow) {
        columns(ow, &j0, &j1);
        PixelGroup<1>(g, t, ow, j0, j1, c0, out_row);
      }
    }
  }
}

// RowsFloatM1 for the filter's width and stride: 3 and 5 wide (MobileNets, EfficientNets) at
// stride 1 and 2, and 7 (ConvNeXt) at stride 1 unrolled, others through the general loop.
template <int P>
[[gnu::always_inline]] inline void RowsFloatM1Any(const Geometry& g, const float* in, const float* filter,
                                                  const float* bias, float* out, int64_t begin, int64_t end) {
  if (g.kw == 3 && g.sw == 1) return RowsFloatM1<P, 3, 1>(g, in, filter, bias, out, begin, end);
  if (g.kw == 3 && g.sw == 2) return RowsFloatM1<P, 3, 2>(g, in, filter, bias, out, begin, end);
  if (g.kw == 5 && g.sw == 1) return RowsFloatM1<P, 5, 1>(g, in, filter, bias, out, begin, end);
  if (g.kw == 5 && g.sw == 2) return RowsFloatM1<P, 5, 2>(g, in, filter, bias, out, begin, end);
  if (g.kw == 7 && g.sw == 1) return RowsFloatM1<P, 7, 1>(g, in, filter, bias, out, begin, end);
  RowsFloatM1<P, 0, 0>(g, in, filter, bias, out, begin, end);
}

using RowsFn = void (*)(const Geometry&, const float*, const float*, const float*, float*, int64_t, int64_t);

void RowsFloatM1Baseline(const Geometry& g, const float* in, const float* filter, const float* bias, float* out,
                         int64_t begin, int64_t end) {
  RowsFloatM1Any<4>(g, in, filter, bias, out, begin, end);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) void RowsFloatM1Avx2(const Geometry& g, const float* in, const float* filter,
                                                     const float* bias, float* out, int64_t begin, int64_t end) {
  RowsFloatM1Any<4>(g, in, filter, bias, out, begin, end);
}

__attribute__((target("avx512f"))) void RowsFloatM1Avx512(const Geometry& g, const float* in,
                                                          const float* filter, const float* bias, float* out,
                                                          int64_t begin, int64_t end) {
  RowsFloatM1Any<8>(g, in, filter, bias, out, begin, end);
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
                               const int64_t cm = g.c * m;
                               if (m == 1) {
                                 // A row, then its activation while it is in cache.
                                 const int64_t row_size = g.ww.out * cm;
                                 for (int64_t row = begin; row < end; ++row) {
                                   rows_float_m1(g, in, f, epilogue.bias, po, row, row + 1);
                                   float* out_row = po + row * row_size;
                                   ApplyActivation(epilogue.activation, out_row, out_row, row_size);
                                 }
                                 return;
                               }
                               DepthwiseRows(g, m, in, f, po, begin, end);
                               // Each pixel of these rows again while it is in cache.
                               if (epilogue.empty()) return;
                               for (int64_t p = begin * g.ww.out; p < end * g.ww.out; ++p) epilogue.Apply(po + p * cm, cm);
                             } else {
                               DepthwiseRows(g, m, in, f, po, begin, end);
                             }
                           });
    return Status::Ok();
  });
}

Status DepthwiseKernel(KernelContext& ctx) {
  LS_ASSIGN_OR_RETURN(Geometry g, DepthwiseGeometry(kOp, ctx.attrs(), {ctx.input(0).dtype(), ctx.input(0).shape()},
                                                    {ctx.input(1).dtype(), ctx.input(1).shape()}));
  return DepthwiseForward(ctx, g, PixelEpilogue{});
}

Status FusedDepthwiseKernel(KernelContext& ctx) {
  const int n = std::min(ctx.num_inputs(), 3);
  TensorSpec specs[3];  // an array, not a vector: this runs per request
  for (int i = 0; i < n; ++i) specs[i] = {ctx.input(i).dtype(), ctx.input(i).shape()};
  LS_ASSIGN_OR_RETURN(Geometry g, DepthwiseGeometry(kOp, ctx.attrs(), specs[0], specs[1]));
  PixelEpilogue epilogue;
  LS_ASSIGN_OR_RETURN(epilogue.activation,
                      FusedEpilogue(ctx.attrs(), std::span<const TensorSpec>(specs, static_cast<size_t>(n)), g.out.dim(3)));
  if (n == 3) epilogue.bias = ctx.input(2).data<float>().data();
  return DepthwiseForward(ctx, g, epilogue);
}

}  // namespace

void RegisterDepthwiseConvOps(OpRegistry& registry) {
  (void)registry.Register(SimpleOpDef(std::string(kOp), 2, InferDepthwise, DepthwiseKernel, DepthwiseConv2DGrad));
  RegisterDepthwiseConvGradOps(registry);
  OpDef fused = SimpleOpDef(std::string(kFusedOp), 2, InferFusedDepthwise, FusedDepthwiseKernel);
  fused.max_inputs = 3;
  (void)registry.Register(std::move(fused));
}

}  // namespace lockstep
