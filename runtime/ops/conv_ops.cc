// Conv2D (NHWC input, [KH, KW, Cin, Cout] filter) and its two gradients, all through the Gemm
// core. With col the im2col matrix (row r: output pixel r's receptive field in filter order
// (kh, kw, cin), zeros over the padding) and F the filter as a [KH * KW * Cin, Cout] matrix:
//   Conv2D                 out  = col · F
//   Conv2DBackpropInput    dcol = dy · Fᵀ, then col2im adds each row of dcol back into dx; at
//                          stride 1 instead the convolution of dy with F turned half a turn
//                          (conv_lowering.h's TransposedConvolution)
//   Conv2DBackpropFilter   dF   = colᵀ · dy
//   FusedConv2D            Conv2D with a bias [Cout], a residual (input 3, the output's shape:
//                          a skip connection's Add) and an activation in the Gemm's epilogue
//                          (attr "activation", as FusedMatMul's; the fusion pass makes it
//                          from Conv2D -> BiasAdd -> Add -> activation, float32 only)
//   Conv2DTranspose        Conv2DBackpropInput as an op of its own (a "deconvolution"):
//                          x [N, H, W, Cin] and a filter [KH, KW, Cout, Cin] give the
//                          [N, (H - 1) * sh + KH, (W - 1) * sw + KW, Cout] whose VALID Conv2D
//                          with that filter has x's shape. Padding and output padding are the
//                          caller's crops and pads around it.
// Attrs (all three): strides [sh, sw] (default [1, 1]), dilations [dh, dw] (default [1, 1]: taps
// that far apart, ONNX's and TensorFlow's dilated convolution), padding "SAME" / "VALID" / "EXPLICIT" (window.h),
// precision "float32" / "bfloat16" (op_util.h). The input is float32; the filter float32 or
// bfloat16 (a bf16 filter, or precision bfloat16, makes every product bf16 with float32
// accumulation, and the filter's gradient float32). float64 input and filter (gradient checks
// only) run plain loops over the same windows.
//
// Two forward layers take other ways: a stem's (at most 4 input channels, float32) runs
// directly, to the im2col path's bits (conv_direct.h); a 3x3 stride-1 layer of 32 to 512
// channels in float32 runs as Winograd F(2x2, 3x3) on the Gemm core (conv_winograd.h), its filter
// packed transformed (in bf16 only with attr bf16_winograd, ChooseConvWay). The session's packing
// (PackFilter) follows the same choice, from the filter's shape and the attrs alone.
//
// bf16 products take the image rounded once to bf16 and im2col copies bf16 (conv_lowering.h).
// im2col runs block by block, so the scratch stays small however large the batch. The
// backward ops cut blocks of whole images: a block's col2im touches only its own images, so
// blocks run in parallel without sharing a write, and every sum is taken in the same order
// whatever the thread count.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "runtime/activation.h"
#include "runtime/autodiff/gradient_builder.h"
#include "runtime/matmul/gemm.h"
#include "runtime/matmul/packed_b.h"
#include "runtime/op_registry.h"
#include "runtime/ops/conv_direct.h"
#include "runtime/ops/conv_lowering.h"
#include "runtime/ops/conv_winograd.h"
#include "runtime/ops/op_util.h"
#include "runtime/ops/ops.h"
#include "runtime/ops/window.h"

namespace lockstep {
namespace {

// `op`'s geometry from the input and filter specs (both float32 or both float64).
StatusOr<Geometry> ConvGeometry(std::string_view op, const AttrMap& attrs, const TensorSpec& input,
                                const TensorSpec& filter) {
  LS_RETURN_IF_ERROR(CheckReal(op, "input", input.dtype));
  if (!(input.dtype == DType::kFloat32 && filter.dtype == DType::kBFloat16)) {
    LS_RETURN_IF_ERROR(CheckDType(op, "filter", filter.dtype, input.dtype));
  }
  LS_RETURN_IF_ERROR(CheckRank(op, "filter [KH, KW, Cin, Cout]", filter.shape, 4));
  LS_ASSIGN_OR_RETURN(auto strides, SpatialPair(op, attrs, "strides", std::pair<int64_t, int64_t>{1, 1}));
  LS_ASSIGN_OR_RETURN(auto dilations, SpatialPair(op, attrs, "dilations", std::pair<int64_t, int64_t>{1, 1}));
  LS_ASSIGN_OR_RETURN(WindowPadding padding, ReadConvPadding(op, attrs));
  LS_RETURN_IF_ERROR(CheckRank(op, "input (NHWC)", input.shape, 4));
  int64_t cin;
  if (!MergeDim(input.shape.dim(3), filter.shape.dim(2), &cin)) {
    return InvalidArgument(Str(op) + ": input channels " + std::to_string(input.shape.dim(3)) + " of input " +
                           input.shape.ToString() + " differ from filter " + filter.shape.ToString());
  }
  Shape in = input.shape;
  in.set_dim(3, cin);
  return MakeGeometry(op, in, filter.shape.dim(0), filter.shape.dim(1), strides, padding, filter.shape.dim(3),
                      dilations);
}

StatusOr<std::vector<TensorSpec>> InferConv2D(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("Conv2D", ctx.inputs.size(), 2, 2));
  LS_ASSIGN_OR_RETURN(Geometry g, ConvGeometry("Conv2D", ctx.attrs, ctx.inputs[0], ctx.inputs[1]));
  return Single(ctx.inputs[0].dtype, g.out);
}

// FusedConv2D's epilogue: its bias (input 2, when given, [Cout] float32), residual (input 3,
// when given, float32 of the output's shape `out`) and activation.
StatusOr<GemmEpilogue> FusedConvEpilogue(const AttrMap& attrs, std::span<const TensorSpec> in, const Shape& out) {
  const int64_t cout = out.rank() == 4 ? out.dim(3) : -1;
  constexpr std::string_view op = "FusedConv2D";
  LS_RETURN_IF_ERROR(CheckDType(op, "input", in[0].dtype, DType::kFloat32));
  GemmEpilogue epilogue;
  LS_ASSIGN_OR_RETURN(std::string_view name, attrs.GetStringViewOr("activation", "none"));
  LS_ASSIGN_OR_RETURN(epilogue.activation, ParseActivation(name));
  if (in.size() == 4) {
    LS_RETURN_IF_ERROR(CheckDType(op, "residual", in[3].dtype, DType::kFloat32));
    Shape merged;
    if (!MergeShapes(in[3].shape, out, &merged)) {
      return InvalidArgument(Str(op) + ": residual " + in[3].shape.ToString() + " is not the output's shape " +
                             out.ToString());
    }
  }
  if (in.size() >= 3) LS_RETURN_IF_ERROR(CheckChannelBias(op, in[2], cout));
  return epilogue;
}

StatusOr<std::vector<TensorSpec>> InferFusedConv2D(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("FusedConv2D", ctx.inputs.size(), 2, 4));
  LS_ASSIGN_OR_RETURN(Geometry g, ConvGeometry("FusedConv2D", ctx.attrs, ctx.inputs[0], ctx.inputs[1]));
  LS_RETURN_IF_ERROR(FusedConvEpilogue(ctx.attrs, ctx.inputs, g.out).status());
  return Single(DType::kFloat32, g.out);
}

// Conv2DBackpropInput(dy, filter, input) -> the input's shape;
// Conv2DBackpropFilter(input, dy, filter) -> the filter's shape. The third input is there for
// its shape (and keeps the geometry checkable); its values are not read.
StatusOr<std::vector<TensorSpec>> InferBackpropInput(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("Conv2DBackpropInput", ctx.inputs.size(), 3, 3));
  LS_RETURN_IF_ERROR(ConvGeometry("Conv2DBackpropInput", ctx.attrs, ctx.inputs[2], ctx.inputs[1]).status());
  return Single(ctx.inputs[2].dtype, ctx.inputs[2].shape);
}

// The output of Conv2DTranspose: the input of the VALID convolution it is the gradient of.
// Its attrs may not choose a padding (VALID is the op's definition).
StatusOr<TensorSpec> TransposeOutput(const AttrMap& attrs, const TensorSpec& x, const TensorSpec& filter) {
  constexpr std::string_view op = "Conv2DTranspose";
  if (attrs.Has("padding")) return InvalidArgument(Str(op) + ": takes no attr 'padding' (crop its output instead)");
  LS_RETURN_IF_ERROR(CheckReal(op, "input", x.dtype));
  LS_RETURN_IF_ERROR(CheckRank(op, "input (NHWC)", x.shape, 4));
  LS_RETURN_IF_ERROR(CheckRank(op, "filter [KH, KW, Cout, Cin]", filter.shape, 4));
  LS_ASSIGN_OR_RETURN(auto strides, SpatialPair(op, attrs, "strides", std::pair<int64_t, int64_t>{1, 1}));
  LS_ASSIGN_OR_RETURN(auto dilations, SpatialPair(op, attrs, "dilations", std::pair<int64_t, int64_t>{1, 1}));
  int64_t cin;
  if (!MergeDim(x.shape.dim(3), filter.shape.dim(3), &cin)) {
    return InvalidArgument(Str(op) + ": input channels of input " + x.shape.ToString() + " differ from filter " +
                           filter.shape.ToString());
  }
  auto full = [](int64_t in, int64_t k, int64_t s, int64_t d) {
    return in < 0 || k < 0 ? int64_t{-1} : in == 0 ? 0 : (in - 1) * s + (k - 1) * d + 1;
  };
  return TensorSpec{x.dtype, Shape{x.shape.dim(0), full(x.shape.dim(1), filter.shape.dim(0), strides.first, dilations.first),
                                   full(x.shape.dim(2), filter.shape.dim(1), strides.second, dilations.second),
                                   filter.shape.dim(2)}};
}

StatusOr<std::vector<TensorSpec>> InferConv2DTranspose(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("Conv2DTranspose", ctx.inputs.size(), 2, 2));
  LS_ASSIGN_OR_RETURN(TensorSpec out, TransposeOutput(ctx.attrs, ctx.inputs[0], ctx.inputs[1]));
  LS_RETURN_IF_ERROR(ConvGeometry("Conv2DTranspose", ctx.attrs, out, ctx.inputs[1]).status());
  return std::vector<TensorSpec>{out};
}

StatusOr<std::vector<TensorSpec>> InferBackpropFilter(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("Conv2DBackpropFilter", ctx.inputs.size(), 3, 3));
  LS_RETURN_IF_ERROR(ConvGeometry("Conv2DBackpropFilter", ctx.attrs, ctx.inputs[0], ctx.inputs[2]).status());
  return Single(ctx.inputs[0].dtype, ctx.inputs[2].shape);  // a bf16 filter's gradient is float32
}

// Which way a forward convolution runs. ConvForward and the session's packing (PackFilter)
// both ask here, from the filter's shape, the strides and dilations and the products' type
// alone, so that a filter is packed for the way it will be read.
enum class ConvWay { kIm2col, kDirect, kWinograd };
ConvWay ChooseConvWay(int64_t kh, int64_t kw, std::pair<int64_t, int64_t> strides,
                      std::pair<int64_t, int64_t> dilations, int64_t cin, int64_t cout, DType filter, DType compute,
                      bool bf16_winograd) {
  const bool float32 = compute == DType::kFloat32 && filter == DType::kFloat32;
  if (float32 && DirectConvApplies(cin, cout)) return ConvWay::kDirect;
  // Winograd's products are of transformed tiles: in bf16 they round other numbers than the
  // operands that precision bfloat16 promises to round (what training computes, and an ONNX
  // export's Casts), so a bf16 layer takes im2col, unless attr bf16_winograd (set by
  // UseBf16Products: the server's opt-in bf16, approximate by any route) lets it.
  if ((float32 || bf16_winograd) &&
      WinogradApplies(kh, kw, strides.first, strides.second, dilations.first, dilations.second, cin, cout)) {
    return ConvWay::kWinograd;
  }
  return ConvWay::kIm2col;
}

// The products' compute type: bf16 for a bf16 filter or precision bfloat16, else float32.
StatusOr<DType> ComputeType(const AttrMap& attrs, DType filter) {
  LS_ASSIGN_OR_RETURN(const bool bf16, ReadBf16Precision("Conv2D", attrs));
  return bf16 || filter == DType::kBFloat16 ? DType::kBFloat16 : DType::kFloat32;
}

// ---- float64: plain loops, for gradient checks ----

// Calls fn(n, oh, ow, ih, iw, i, j) for every (output pixel, filter tap) that lands on the
// input, in the order the float32 kernels sum.
template <typename Fn>
void ForEachTap(const Geometry& g, Fn fn) {
  for (int64_t n = 0; n < g.n; ++n) {
    for (int64_t oh = 0; oh < g.wh.out; ++oh) {
      for (int64_t ow = 0; ow < g.ww.out; ++ow) {
        for (int64_t i = 0; i < g.kh; ++i) {
          const int64_t ih = oh * g.sh - g.wh.pad_before + i * g.dh;
          if (ih < 0 || ih >= g.h) continue;
          for (int64_t j = 0; j < g.kw; ++j) {
            const int64_t iw = ow * g.sw - g.ww.pad_before + j * g.dw;
            if (iw >= 0 && iw < g.w) fn(n, oh, ow, ih, iw, i, j);
          }
        }
      }
    }
  }
}

// The three products on float64, selected by `which`: out, dx or dF (zeroed here).
enum class ConvProduct { kForward, kInputGradient, kFilterGradient };

void Float64Conv(const Geometry& g, ConvProduct which, const double* x, const double* f, const double* dy,
                 double* out, int64_t out_elements) {
  std::fill(out, out + out_elements, 0.0);
  const int64_t cout = g.out.dim(3);
  ForEachTap(g, [&](int64_t n, int64_t oh, int64_t ow, int64_t ih, int64_t iw, int64_t i, int64_t j) {
    const int64_t xi = ((n * g.h + ih) * g.w + iw) * g.c;
    const int64_t fi = (i * g.kw + j) * g.c * cout;
    const int64_t yi = ((n * g.wh.out + oh) * g.ww.out + ow) * cout;
    for (int64_t ci = 0; ci < g.c; ++ci) {
      for (int64_t co = 0; co < cout; ++co) {
        const int64_t fo = fi + ci * cout + co;
        switch (which) {
          case ConvProduct::kForward:
            out[yi + co] += x[xi + ci] * f[fo];
            break;
          case ConvProduct::kInputGradient:
            out[xi + ci] += dy[yi + co] * f[fo];
            break;
          case ConvProduct::kFilterGradient:
            out[fo] += x[xi + ci] * dy[yi + co];
            break;
        }
      }
    }
  });
}

// ---- Conv2D ----

// out = the convolution of `in` with `filter` ([KH, KW, C, Cout], float32 or bf16) over `g`,
// products in `compute`, then `epilogue`: the float32 and bf16 forward product of Conv2D, and
// of a stride-1 input gradient (InputGradient). `packed` is the session's packing of the
// filter, or null.
Status ConvProductInto(ThreadPool& pool, std::string_view op, const Geometry& g, const float* in, const void* filter,
                       DType filter_type, DType compute, bool bf16_winograd, const PackedB* packed,
                       const GemmEpilogue& epilogue, float* po) {
  const int64_t rows = g.n * g.pixels_per_image();
  const int64_t cout = g.out.dim(3);
  const int64_t kdim = g.kh * g.kw * g.c;
  if (rows == 0 || cout == 0) return Status::Ok();
  const ConvWay way =
      ChooseConvWay(g.kh, g.kw, {g.sh, g.sw}, {g.dh, g.dw}, g.c, cout, filter_type, compute, bf16_winograd);
  if (way == ConvWay::kDirect) {
    DirectConv(g, cout, in, static_cast<const float*>(filter), epilogue, po, pool);
    return Status::Ok();
  }
  if (way == ConvWay::kWinograd) {
    if (packed == nullptr) {
      thread_local PackedB per_call;
      PackWinogradFilter(filter, filter_type, g.c, cout, compute, per_call, &pool);
      packed = &per_call;
    }
    if (packed->k() != g.c || packed->n() != WinogradPackedColumns(cout)) {
      return Internal(std::string(op) + ": the packed filter is " + std::to_string(packed->k()) + " x " +
                      std::to_string(packed->n()) + ", Winograd's needs " + std::to_string(g.c) + " x " +
                      std::to_string(WinogradPackedColumns(cout)));
    }
    WinogradConv(g, cout, in, *packed, epilogue, po, pool);
    return Status::Ok();
  }
  // The filter is the product's B, [KH * KW * Cin, Cout]: packed when the session was built
  // if it is a constant, else once here for all the blocks below.
  if (packed != nullptr && (packed->k() != kdim || packed->n() != cout)) {
    return Internal(std::string(op) + ": the packed filter is " + std::to_string(packed->k()) + " x " +
                    std::to_string(packed->n()) + ", the product needs " + std::to_string(kdim) + " x " +
                    std::to_string(cout));
  }
  if (packed == nullptr) {
    thread_local PackedB per_call;
    per_call.Repack(filter, filter_type, false, kdim, cout, cout, compute);
    packed = &per_call;
  }
  GemmArgs gemm;
  gemm.n = cout;
  gemm.k = kdim;
  gemm.packed_b = packed;
  gemm.epilogue = epilogue;
  gemm.lda = kdim;
  gemm.ldc = cout;

  // A 1x1, stride-1 convolution without padding is a plain matmul over the pixels (and with
  // no input channels, A is never read).
  const bool pointwise = g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.wh.pad_before == 0 &&
                         g.ww.pad_before == 0 && g.wh.out == g.h && g.ww.out == g.w;
  if (pointwise || kdim == 0) {
    gemm.m = rows;
    gemm.a = in;
    gemm.c = po;
    Gemm(gemm, &pool);
    return Status::Ok();
  }
  // Gemm computes each row of C the same way whatever M, so the blocking changes speed only;
  // blocks need not hold whole images here (nothing is summed across rows).
  const int64_t threads = pool.num_threads();
  int64_t block_rows = std::max(kMinBlockRows, kIm2colFloats / std::max<int64_t>(kdim, 1));
  if (threads > 1) block_rows = std::min(block_rows, std::max(kMinBlockRows, rows / (threads * 4)));
  block_rows = std::min(block_rows, rows);
  const int64_t count = (rows + block_rows - 1) / block_rows;
  // bf16 columns when the products are bf16 and each row holds whole pairs.
  const uint16_t* in16 = compute == DType::kBFloat16 && kdim % 2 == 0
                             ? RoundedToBf16(in, g.n * g.h * g.w * g.c, 0)
                             : nullptr;
  ForEachBlock(pool, count, [&](int64_t block, ThreadPool* block_pool) {
    const int64_t row0 = block * block_rows;
    const int64_t m = std::min(block_rows, rows - row0);
    GemmArgs args = gemm;
    if (in16 != nullptr) {
      uint16_t* col = Bf16Scratch(m * kdim);
      Im2Col(g, in16, row0, m, col);
      args.a = col;
      args.a_type = DType::kBFloat16;
    } else {
      float* col = ThreadScratch(m * kdim);
      Im2Col(g, in, row0, m, col);
      args.a = col;
    }
    args.m = m;
    args.c = po + row0 * cout;
    if (args.epilogue.residual != nullptr) args.epilogue.residual += row0 * cout;
    Gemm(args, block_pool);
  });
  return Status::Ok();
}

// Conv2D, and FusedConv2D when `epilogue` is given; `g` is ConvGeometry of the op's inputs.
Status ConvForward(KernelContext& ctx, std::string_view op, const Geometry& g, const GemmEpilogue& epilogue) {
  const Tensor& input = ctx.input(0);
  const Tensor& filter = ctx.input(1);
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, input.dtype(), g.out));
  if (input.dtype() == DType::kFloat64) {
    Float64Conv(g, ConvProduct::kForward, input.data<double>().data(), filter.data<double>().data(), nullptr,
                out->mutable_data<double>().data(), out->num_elements());
    return Status::Ok();
  }
  LS_ASSIGN_OR_RETURN(const DType compute, ComputeType(ctx.attrs(), filter.dtype()));
  LS_ASSIGN_OR_RETURN(const bool bf16_winograd, ctx.attrs().GetBoolOr("bf16_winograd", false));
  return ConvProductInto(ctx.pool(), op, g, input.data<float>().data(), filter.raw_data(), filter.dtype(), compute,
                         bf16_winograd, ctx.packed_input(1), epilogue, out->mutable_data<float>().data());
}

Status Conv2DKernel(KernelContext& ctx) {
  LS_ASSIGN_OR_RETURN(Geometry g, ConvGeometry("Conv2D", ctx.attrs(), {ctx.input(0).dtype(), ctx.input(0).shape()},
                                               {ctx.input(1).dtype(), ctx.input(1).shape()}));
  return ConvForward(ctx, "Conv2D", g, GemmEpilogue{});
}

Status FusedConv2DKernel(KernelContext& ctx) {
  const int n = std::min(ctx.num_inputs(), 4);
  TensorSpec specs[4];  // an array, not a vector: this runs per request
  for (int i = 0; i < n; ++i) specs[i] = {ctx.input(i).dtype(), ctx.input(i).shape()};
  LS_ASSIGN_OR_RETURN(Geometry g, ConvGeometry("FusedConv2D", ctx.attrs(), specs[0], specs[1]));
  LS_ASSIGN_OR_RETURN(GemmEpilogue epilogue,
                      FusedConvEpilogue(ctx.attrs(), std::span<const TensorSpec>(specs, static_cast<size_t>(n)), g.out));
  if (n >= 3) epilogue.bias = ctx.input(2).data<float>().data();
  if (n == 4) {
    // MergeShapes let a dimension unknown at inference through; here both are known.
    if (!(ctx.input(3).shape() == g.out)) {
      return InvalidArgument("FusedConv2D: residual " + ctx.input(3).shape().ToString() + " is not the output's shape " +
                             g.out.ToString());
    }
    epilogue.residual = ctx.input(3).data<float>().data();
    epilogue.ldr = g.out.dim(3);
  }
  return ConvForward(ctx, "FusedConv2D", g, epilogue);
}

StatusOr<std::shared_ptr<const PackedB>> PackFilter(const AttrMap& attrs, int input, const Tensor& filter,
                                                    ThreadPool* pool) {
  const bool packable = filter.dtype() == DType::kFloat32 || filter.dtype() == DType::kBFloat16;
  if (input != 1 || !packable || filter.shape().rank() != 4) return std::shared_ptr<const PackedB>();
  LS_ASSIGN_OR_RETURN(const DType compute, ComputeType(attrs, filter.dtype()));
  const Shape& f = filter.shape();
  LS_ASSIGN_OR_RETURN(auto strides, SpatialPair("Conv2D", attrs, "strides", std::pair<int64_t, int64_t>{1, 1}));
  LS_ASSIGN_OR_RETURN(auto dilations, SpatialPair("Conv2D", attrs, "dilations", std::pair<int64_t, int64_t>{1, 1}));
  LS_ASSIGN_OR_RETURN(const bool bf16_winograd, attrs.GetBoolOr("bf16_winograd", false));
  const ConvWay way = ChooseConvWay(f.dim(0), f.dim(1), strides, dilations, f.dim(2), f.dim(3), filter.dtype(),
                                    compute, bf16_winograd);
  // A stem's filter is read as it is (conv_direct.h); a Winograd layer's is transformed first.
  if (way == ConvWay::kDirect) return std::shared_ptr<const PackedB>();
  if (way == ConvWay::kWinograd) {
    auto packed = std::make_shared<PackedB>();
    PackWinogradFilter(filter.raw_data(), filter.dtype(), f.dim(2), f.dim(3), compute, *packed, pool);
    return std::shared_ptr<const PackedB>(std::move(packed));
  }
  const int64_t k = f.dim(0) * f.dim(1) * f.dim(2);
  return std::make_shared<const PackedB>(
      PackedB::Pack(filter.raw_data(), filter.dtype(), false, k, f.dim(3), f.dim(3), compute, pool));
}

// ---- Conv2DBackpropInput(dy, filter, input) ----

// dx = the gradient of a convolution with `filter` whose input is like `like`, for its output
// gradient dy: Conv2DBackpropInput's and Conv2DTranspose's kernel.
Status InputGradient(KernelContext& ctx, std::string_view op, const Tensor& dy, const Tensor& filter,
                     const TensorSpec& like) {
  LS_ASSIGN_OR_RETURN(Geometry g, ConvGeometry(op, ctx.attrs(), like, {filter.dtype(), filter.shape()}));
  LS_RETURN_IF_ERROR(CheckDType(op, "dy", dy.dtype(), like.dtype));
  LS_RETURN_IF_ERROR(CheckOutputGradient(op, dy.shape(), g));
  LS_ASSIGN_OR_RETURN(Tensor * dx, ctx.AllocateOutput(0, like.dtype, like.shape));
  if (like.dtype == DType::kFloat64) {
    Float64Conv(g, ConvProduct::kInputGradient, nullptr, filter.data<double>().data(),
                dy.data<double>().data(), dx->mutable_data<double>().data(), dx->num_elements());
    return Status::Ok();
  }
  float* pdx = dx->mutable_data<float>().data();
  const int64_t cout = g.out.dim(3);
  const int64_t kdim = g.kh * g.kw * g.c;
  LS_ASSIGN_OR_RETURN(const DType compute, ComputeType(ctx.attrs(), filter.dtype()));
  if (g.n * g.pixels_per_image() > 0 && cout > 0 && kdim > 0 && g.sh == 1 && g.sw == 1) {
    const StridedOneTranspose t = TransposedConvolution(g, filter);
    if (t.applies) {
      LS_ASSIGN_OR_RETURN(const bool bf16_winograd, ctx.attrs().GetBoolOr("bf16_winograd", false));
      return ConvProductInto(ctx.pool(), op, t.g, dy.data<float>().data(), t.filter, filter.dtype(), compute,
                             bf16_winograd, nullptr, GemmEpilogue{}, pdx);
    }
  }
  std::fill(pdx, pdx + dx->num_elements(), 0.0f);
  if (g.n * g.pixels_per_image() == 0 || cout == 0 || kdim == 0) return Status::Ok();

  // Fᵀ, [Cout, KH * KW * Cin], packed once for every block. (The pointer, not the name, goes
  // into the lambda: a thread_local's name would mean each worker's own, empty one.)
  thread_local PackedB per_call;
  per_call.Repack(filter.raw_data(), filter.dtype(), true, cout, kdim, cout, compute);
  const PackedB* filter_t = &per_call;
  const float* pdy = dy.data<float>().data();
  const Blocks blocks = ImageBlocks(g, ctx.pool().num_threads(), /*spread=*/true);
  ForEachBlock(ctx.pool(), blocks.count, [&](int64_t block, ThreadPool* pool) {
    const int64_t image0 = block * blocks.images_per_block;
    const int64_t images = std::min(blocks.images_per_block, g.n - image0);
    const int64_t row0 = image0 * g.pixels_per_image();
    const int64_t m = images * g.pixels_per_image();
    float* dcol = ThreadScratch(m * kdim);
    GemmArgs args;
    args.m = m;
    args.n = kdim;
    args.k = cout;
    args.a = pdy + row0 * cout;
    args.lda = cout;
    args.packed_b = filter_t;
    args.c = dcol;
    args.ldc = kdim;
    Gemm(args, pool);
    // Row indices are global, so the images land where they belong; the block writes only
    // its own images of dx.
    Col2ImAdd(g, dcol, row0, m, pdx);
  });
  return Status::Ok();
}

Status BackpropInputKernel(KernelContext& ctx) {
  const Tensor& like = ctx.input(2);
  return InputGradient(ctx, "Conv2DBackpropInput", ctx.input(0), ctx.input(1), {like.dtype(), like.shape()});
}

Status Conv2DTransposeKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& filter = ctx.input(1);
  LS_ASSIGN_OR_RETURN(TensorSpec out, TransposeOutput(ctx.attrs(), {x.dtype(), x.shape()}, {filter.dtype(), filter.shape()}));
  return InputGradient(ctx, "Conv2DTranspose", x, filter, out);
}

// ---- Conv2DBackpropFilter(input, dy, filter) ----

Status BackpropFilterKernel(KernelContext& ctx) {
  const Tensor& input = ctx.input(0);
  const Tensor& dy = ctx.input(1);
  const Tensor& like = ctx.input(2);
  LS_ASSIGN_OR_RETURN(Geometry g, ConvGeometry("Conv2DBackpropFilter", ctx.attrs(),
                                               {input.dtype(), input.shape()}, {like.dtype(), like.shape()}));
  LS_RETURN_IF_ERROR(CheckDType("Conv2DBackpropFilter", "dy", dy.dtype(), input.dtype()));
  LS_RETURN_IF_ERROR(CheckOutputGradient("Conv2DBackpropFilter", dy.shape(), g));
  LS_ASSIGN_OR_RETURN(const DType compute, ComputeType(ctx.attrs(), like.dtype()));
  LS_ASSIGN_OR_RETURN(Tensor * df, ctx.AllocateOutput(0, input.dtype(), like.shape()));
  if (input.dtype() == DType::kFloat64) {
    Float64Conv(g, ConvProduct::kFilterGradient, input.data<double>().data(), nullptr,
                dy.data<double>().data(), df->mutable_data<double>().data(), df->num_elements());
    return Status::Ok();
  }
  float* pdf = df->mutable_data<float>().data();
  std::fill(pdf, pdf + df->num_elements(), 0.0f);
  const int64_t cout = g.out.dim(3);
  const int64_t kdim = g.kh * g.kw * g.c;
  const int64_t rows = g.n * g.pixels_per_image();
  if (rows == 0 || cout == 0 || kdim == 0) return Status::Ok();

  // Every block adds into all of dF, so the blocks run one after the other, in order, and
  // their size does not depend on the thread count: the sums are the same on every machine.
  const Blocks blocks = ImageBlocks(g, 1, /*spread=*/false);
  const float* in = input.data<float>().data();
  const float* pdy = dy.data<float>().data();
  // bf16 products: x and dy rounded once (RoundedToBf16), the columns and dy packed from bf16.
  const bool bf16 = compute == DType::kBFloat16;
  const uint16_t* in16 = bf16 ? RoundedToBf16(in, g.n * g.h * g.w * g.c, 0) : nullptr;
  const uint16_t* dy16 = bf16 ? RoundedToBf16(pdy, rows * cout, 1) : nullptr;
  for (int64_t block = 0; block < blocks.count; ++block) {
    const int64_t row0 = block * blocks.rows(g);
    const int64_t m = std::min(blocks.rows(g), rows - row0);
    GemmArgs args;
    if (bf16) {
      uint16_t* col = Bf16Scratch(m * kdim);
      Im2Col(g, in16, row0, m, col);
      args.a = col;
      args.a_type = DType::kBFloat16;
      args.b = dy16 + row0 * cout;
      args.b_type = DType::kBFloat16;
    } else {
      float* col = ThreadScratch(m * kdim);
      Im2Col(g, in, row0, m, col);
      args.a = col;
      args.b = pdy + row0 * cout;
    }
    args.transpose_a = true;  // col is [m, kdim]: op(A) = colᵀ
    args.m = kdim;
    args.n = cout;
    args.k = m;
    args.lda = kdim;
    args.ldb = cout;
    args.beta = block == 0 ? 0.0f : 1.0f;
    args.bf16_compute = compute == DType::kBFloat16;
    args.c = pdf;
    args.ldc = cout;
    Gemm(args, &ctx.pool());
  }
  return Status::Ok();
}

// A bf16 convolution has bf16 gradient products too.
Status Conv2DGrad(GradientBuilder& g) {
  LS_RETURN_IF_ERROR(CheckDifferentiable(g));
  const std::string& dy = g.output_grad(0);
  AttrMap attrs = g.attrs();
  if (g.input_spec(1).dtype == DType::kBFloat16) attrs.Set("precision", std::string("bfloat16"));
  if (g.needs_input_grad(0))
    g.SetInputGrad(0, g.Op("Conv2DBackpropInput", {dy, g.input(1), g.input(0)}, attrs));
  if (g.needs_input_grad(1))
    g.SetInputGrad(1, g.Op("Conv2DBackpropFilter", {g.input(0), dy, g.input(1)}, attrs));
  return Status::Ok();
}

}  // namespace

void RegisterConvOps(OpRegistry& registry) {
  OpDef conv = SimpleOpDef("Conv2D", 2, InferConv2D, Conv2DKernel, Conv2DGrad);
  conv.pack_constant = PackFilter;
  (void)registry.Register(std::move(conv));
  (void)registry.Register(SimpleOpDef("Conv2DBackpropInput", 3, InferBackpropInput, BackpropInputKernel));
  OpDef fused = SimpleOpDef("FusedConv2D", 2, InferFusedConv2D, FusedConv2DKernel);
  fused.max_inputs = 4;
  fused.pack_constant = PackFilter;
  (void)registry.Register(std::move(fused));
  (void)registry.Register(SimpleOpDef("Conv2DTranspose", 2, InferConv2DTranspose, Conv2DTransposeKernel));
  (void)registry.Register(SimpleOpDef("Conv2DBackpropFilter", 3, InferBackpropFilter, BackpropFilterKernel));
}

}  // namespace lockstep
