// Conv2D (NHWC input, [KH, KW, Cin, Cout] filter) through the Gemm core, and MaxPool2D /
// AvgPool2D. Padding follows TensorFlow:
//   VALID: out = ceil((in - k + 1) / s), no padding (in < k is an error);
//   SAME:  out = ceil(in / s), pad_total = max((out - 1) * s + k - in, 0), of which
//          pad_total / 2 goes before (top/left) and the rest, one more when odd, after.
// Attrs: strides [sh, sw] (default [1, 1] for Conv2D, ksize for pooling, as Keras), ksize
// [kh, kw] (pooling), padding "SAME" / "VALID" (default "VALID"; lower case accepted); 4-element
// NHWC lists [1, h, w, 1] are accepted for strides and ksize.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "runtime/matmul/gemm.h"
#include "runtime/matmul/packed_b.h"
#include "runtime/op_registry.h"
#include "runtime/ops/op_util.h"
#include "runtime/ops/ops.h"

namespace lockstep {
namespace {

// One spatial dimension of a sliding window.
struct Window {
  int64_t out = 0;         // -1 when the input size is unknown
  int64_t pad_before = 0;  // top or left
};

StatusOr<bool> ReadSamePadding(std::string_view op, const AttrMap& attrs) {
  LS_ASSIGN_OR_RETURN(std::string padding, attrs.GetStringOr("padding", "VALID"));
  if (padding == "SAME" || padding == "same") return true;
  if (padding == "VALID" || padding == "valid") return false;
  return InvalidArgument(Str(op) + ": attr 'padding' must be SAME or VALID, got '" + padding + "'");
}

StatusOr<Window> ComputeWindow(std::string_view op, std::string_view dim_name, int64_t in,
                               int64_t k, int64_t stride, bool same) {
  if (in < 0 || k < 0) return Window{-1, 0};
  if (same) {
    const int64_t out = (in + stride - 1) / stride;
    const int64_t pad_total = std::max<int64_t>((out - 1) * stride + k - in, 0);
    return Window{out, pad_total / 2};
  }
  if (in < k) {
    return InvalidArgument(Str(op) + ": window " + std::to_string(k) +
                           " is larger than the input " + Str(dim_name) + " " + std::to_string(in) +
                           " with VALID padding");
  }
  return Window{(in - k) / stride + 1, 0};
}

// Everything a kernel needs about one NHWC sliding-window op.
struct Geometry {
  int64_t n = 0, h = 0, w = 0, c = 0;  // input
  int64_t kh = 0, kw = 0, sh = 1, sw = 1;
  Window wh, ww;
  Shape out;
};

// `window` is [kh, kw]; `cout` is the output depth.
StatusOr<Geometry> MakeGeometry(std::string_view op, const Shape& input, int64_t kh, int64_t kw,
                                std::pair<int64_t, int64_t> strides, bool same, int64_t cout) {
  LS_RETURN_IF_ERROR(CheckRank(op, "input (NHWC)", input, 4));
  if (kh == 0 || kw == 0) {
    return InvalidArgument(Str(op) + ": window " + std::to_string(kh) + "x" + std::to_string(kw) +
                           " is empty");
  }
  Geometry g;
  g.n = input.dim(0);
  g.h = input.dim(1);
  g.w = input.dim(2);
  g.c = input.dim(3);
  g.kh = kh;
  g.kw = kw;
  g.sh = strides.first;
  g.sw = strides.second;
  LS_ASSIGN_OR_RETURN(g.wh, ComputeWindow(op, "height", g.h, kh, g.sh, same));
  LS_ASSIGN_OR_RETURN(g.ww, ComputeWindow(op, "width", g.w, kw, g.sw, same));
  g.out = Shape{g.n, g.wh.out, g.ww.out, cout};
  return g;
}

// ---- Conv2D ----

StatusOr<Geometry> ConvGeometry(const AttrMap& attrs, const TensorSpec& input,
                                const TensorSpec& filter) {
  LS_RETURN_IF_ERROR(CheckDType("Conv2D", "input", input.dtype, DType::kFloat32));
  LS_RETURN_IF_ERROR(CheckDType("Conv2D", "filter", filter.dtype, DType::kFloat32));
  LS_RETURN_IF_ERROR(CheckRank("Conv2D", "filter [KH, KW, Cin, Cout]", filter.shape, 4));
  const std::vector<int64_t> unit{1, 1};
  LS_ASSIGN_OR_RETURN(auto strides, SpatialPair("Conv2D", attrs, "strides", &unit));
  LS_ASSIGN_OR_RETURN(bool same, ReadSamePadding("Conv2D", attrs));
  LS_RETURN_IF_ERROR(CheckRank("Conv2D", "input (NHWC)", input.shape, 4));
  int64_t cin;
  if (!MergeDim(input.shape.dim(3), filter.shape.dim(2), &cin)) {
    return InvalidArgument("Conv2D: input channels " + std::to_string(input.shape.dim(3)) +
                           " of input " + input.shape.ToString() + " differ from filter " +
                           filter.shape.ToString());
  }
  Shape in = input.shape;
  in.set_dim(3, cin);
  return MakeGeometry("Conv2D", in, filter.shape.dim(0), filter.shape.dim(1), strides, same,
                      filter.shape.dim(3));
}

StatusOr<std::vector<TensorSpec>> InferConv2D(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("Conv2D", ctx.inputs.size(), 2, 2));
  LS_ASSIGN_OR_RETURN(Geometry g, ConvGeometry(ctx.attrs, ctx.inputs[0], ctx.inputs[1]));
  return Single(DType::kFloat32, g.out);
}

// Budget of one im2col block, in floats: it and the Gemm's packed copy of it stay near L2.
constexpr int64_t kIm2colFloats = 128 * 1024;
constexpr int64_t kMinBlockRows = 32;

// Rows [row0, row0 + rows) of the im2col matrix: row r is output pixel r (n, oh, ow) and holds
// its receptive field in filter order (kh, kw, cin), zeros where it hangs over the padding.
void Im2Col(const Geometry& g, const float* in, int64_t row0, int64_t rows, float* dst) {
  const int64_t oh_n = g.wh.out, ow_n = g.ww.out;
  const int64_t kdim = g.kh * g.kw * g.c;
  const size_t pixel_bytes = static_cast<size_t>(g.c) * sizeof(float);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t row = row0 + r;
    const int64_t ow = row % ow_n;
    const int64_t oh = (row / ow_n) % oh_n;
    const int64_t n = row / (ow_n * oh_n);
    float* d = dst + r * kdim;
    for (int64_t i = 0; i < g.kh; ++i) {
      const int64_t ih = oh * g.sh - g.wh.pad_before + i;
      if (ih < 0 || ih >= g.h) {
        std::fill(d, d + g.kw * g.c, 0.0f);
        d += g.kw * g.c;
        continue;
      }
      const float* src_row = in + (n * g.h + ih) * g.w * g.c;
      for (int64_t j = 0; j < g.kw; ++j, d += g.c) {
        const int64_t iw = ow * g.sw - g.ww.pad_before + j;
        if (iw < 0 || iw >= g.w) {
          std::fill(d, d + g.c, 0.0f);
        } else {
          std::memcpy(d, src_row + iw * g.c, pixel_bytes);
        }
      }
    }
  }
}

Status Conv2DKernel(KernelContext& ctx) {
  const Tensor& input = ctx.input(0);
  const Tensor& filter = ctx.input(1);
  LS_ASSIGN_OR_RETURN(Geometry g, ConvGeometry(ctx.attrs(), {input.dtype(), input.shape()},
                                               {filter.dtype(), filter.shape()}));
  LS_ASSIGN_OR_RETURN(Tensor* out_ptr, ctx.AllocateOutput(0, DType::kFloat32, g.out));
  Tensor& out = *out_ptr;
  const int64_t rows = g.n * g.wh.out * g.ww.out;
  const int64_t cout = g.out.dim(3);
  const int64_t kdim = g.kh * g.kw * g.c;
  if (rows == 0 || cout == 0) return Status::Ok();

  const float* in = input.data<float>().data();
  float* po = out.mutable_data<float>().data();
  // The filter is the product's B, [KH * KW * Cin, Cout]: packed when the session was built
  // if it is a constant, else once here for all the blocks below.
  const PackedB* packed = ctx.packed_input(1);
  if (packed == nullptr) {
    thread_local PackedB per_call;
    per_call.Repack(filter.raw_data(), DType::kFloat32, false, kdim, cout, cout, DType::kFloat32);
    packed = &per_call;
  }
  GemmArgs gemm;
  gemm.n = cout;
  gemm.k = kdim;
  gemm.packed_b = packed;
  gemm.lda = kdim;
  gemm.ldc = cout;

  // A 1x1, stride-1 convolution without padding is a plain matmul over the pixels (and with
  // no input channels, A is never read).
  const bool pointwise = g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.wh.pad_before == 0 &&
                         g.ww.pad_before == 0;
  if (pointwise || kdim == 0) {
    gemm.m = rows;
    gemm.a = in;
    gemm.c = po;
    Gemm(gemm, &ctx.pool());
    return Status::Ok();
  }

  // Otherwise im2col block by block, so the scratch stays small however large the batch.
  // Gemm sums each output in the same order whatever the blocking, so the choice below changes
  // speed only: many blocks run in parallel (each one Gemm on its thread), few blocks run one
  // after the other, each Gemm using the whole pool.
  const int64_t threads = ctx.pool().num_threads();
  int64_t block_rows = std::max(kMinBlockRows, kIm2colFloats / std::max<int64_t>(kdim, 1));
  if (threads > 1) {  // enough blocks to share out
    block_rows =
        std::min(block_rows, std::max(kMinBlockRows, (rows + threads * 4 - 1) / (threads * 4)));
  }
  block_rows = std::min(block_rows, rows);
  const int64_t blocks = (rows + block_rows - 1) / block_rows;
  auto run_block = [&](int64_t block, ThreadPool* pool) {
    thread_local std::vector<float> scratch;
    const int64_t row0 = block * block_rows;
    const int64_t m = std::min(block_rows, rows - row0);
    if (static_cast<int64_t>(scratch.size()) < m * kdim) {
      scratch.resize(static_cast<size_t>(m * kdim));
    }
    Im2Col(g, in, row0, m, scratch.data());
    GemmArgs args = gemm;
    args.m = m;
    args.a = scratch.data();
    args.c = po + row0 * cout;
    Gemm(args, pool);
  };
  if (threads > 1 && blocks >= threads) {
    ctx.pool().ParallelFor(blocks, 1, [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) run_block(b, nullptr);
    });
  } else {
    for (int64_t b = 0; b < blocks; ++b) run_block(b, &ctx.pool());
  }
  return Status::Ok();
}

StatusOr<std::shared_ptr<const PackedB>> PackFilter(const AttrMap&, int input, const Tensor& filter) {
  if (input != 1 || filter.dtype() != DType::kFloat32 || filter.shape().rank() != 4) {
    return std::shared_ptr<const PackedB>();
  }
  const Shape& f = filter.shape();
  const int64_t k = f.dim(0) * f.dim(1) * f.dim(2);
  return std::make_shared<const PackedB>(PackedB::Pack(filter.raw_data(), DType::kFloat32, false, k,
                                                       f.dim(3), f.dim(3), DType::kFloat32));
}

// ---- MaxPool2D / AvgPool2D ----

template <bool Max>
constexpr std::string_view PoolName() {
  return Max ? "MaxPool2D" : "AvgPool2D";
}

template <bool Max>
StatusOr<Geometry> PoolGeometry(const AttrMap& attrs, const TensorSpec& input) {
  constexpr std::string_view name = PoolName<Max>();
  LS_RETURN_IF_ERROR(CheckDType(name, "input", input.dtype, DType::kFloat32));
  LS_ASSIGN_OR_RETURN(auto ksize, SpatialPair(name, attrs, "ksize", nullptr));
  const std::vector<int64_t> ksize_list{ksize.first, ksize.second};
  LS_ASSIGN_OR_RETURN(auto strides, SpatialPair(name, attrs, "strides", &ksize_list));
  LS_ASSIGN_OR_RETURN(bool same, ReadSamePadding(name, attrs));
  return MakeGeometry(name, input.shape, ksize.first, ksize.second, strides, same,
                      input.shape.rank() == 4 ? input.shape.dim(3) : 0);
}

template <bool Max>
StatusOr<std::vector<TensorSpec>> InferPool(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount(PoolName<Max>(), ctx.inputs.size(), 1, 1));
  LS_ASSIGN_OR_RETURN(Geometry g, PoolGeometry<Max>(ctx.attrs, ctx.inputs[0]));
  return Single(DType::kFloat32, g.out);
}

// Output rows [begin, end) of the flattened (n, oh) index. Channels are innermost, so every
// step is a vectorisable loop over C. MaxPool skips the padding (it is not -inf, it is absent);
// a NaN in the window wins, as in numpy's max. AvgPool divides by the number of real elements
// under the window, as TensorFlow does.
template <bool Max>
void PoolRows(const Geometry& g, const float* in, float* out, int64_t begin, int64_t end) {
  const int64_t c = g.c;
  for (int64_t row = begin; row < end; ++row) {
    const int64_t n = row / g.wh.out;
    const int64_t oh = row % g.wh.out;
    const int64_t h0 = oh * g.sh - g.wh.pad_before;
    const int64_t h_lo = std::max<int64_t>(h0, 0), h_hi = std::min(h0 + g.kh, g.h);
    for (int64_t ow = 0; ow < g.ww.out; ++ow) {
      const int64_t w0 = ow * g.sw - g.ww.pad_before;
      const int64_t w_lo = std::max<int64_t>(w0, 0), w_hi = std::min(w0 + g.kw, g.w);
      float* __restrict o = out + (row * g.ww.out + ow) * c;
      std::fill(o, o + c, Max ? -std::numeric_limits<float>::infinity() : 0.0f);
      for (int64_t ih = h_lo; ih < h_hi; ++ih) {
        for (int64_t iw = w_lo; iw < w_hi; ++iw) {
          const float* __restrict p = in + ((n * g.h + ih) * g.w + iw) * c;
          for (int64_t k = 0; k < c; ++k) {
            if constexpr (Max) {
              o[k] = (p[k] > o[k] || p[k] != p[k]) ? p[k] : o[k];
            } else {
              o[k] += p[k];
            }
          }
        }
      }
      if constexpr (!Max) {
        // SAME padding leaves at least one real element under every window, VALID all of them.
        const float count = static_cast<float>((h_hi - h_lo) * (w_hi - w_lo));
        for (int64_t k = 0; k < c; ++k) o[k] /= count;
      }
    }
  }
}

template <bool Max>
Status PoolKernel(KernelContext& ctx) {
  const Tensor& input = ctx.input(0);
  LS_ASSIGN_OR_RETURN(Geometry g, PoolGeometry<Max>(ctx.attrs(), {input.dtype(), input.shape()}));
  LS_ASSIGN_OR_RETURN(Tensor* out_ptr, ctx.AllocateOutput(0, DType::kFloat32, g.out));
  Tensor& out = *out_ptr;
  if (out.num_elements() == 0) return Status::Ok();
  const float* in = input.data<float>().data();
  float* po = out.mutable_data<float>().data();
  const int64_t row_cost = std::max<int64_t>(1, g.ww.out * g.c * g.kh * g.kw);
  auto rows = [&](int64_t begin, int64_t end) { PoolRows<Max>(g, in, po, begin, end); };
  ctx.pool().ParallelFor(g.n * g.wh.out, std::max<int64_t>(1, kElementGrain / row_cost), rows);
  return Status::Ok();
}

template <bool Max>
OpDef PoolDef() {
  OpDef def;
  def.name = std::string(PoolName<Max>());
  def.min_inputs = def.max_inputs = 1;
  def.infer = InferPool<Max>;
  def.compute = PoolKernel<Max>;
  return def;
}

}  // namespace

void RegisterConvOps(OpRegistry& registry) {
  OpDef conv;
  conv.name = "Conv2D";
  conv.min_inputs = conv.max_inputs = 2;
  conv.infer = InferConv2D;
  conv.compute = Conv2DKernel;
  conv.pack_constant = PackFilter;
  (void)registry.Register(std::move(conv));
  (void)registry.Register(PoolDef<true>());
  (void)registry.Register(PoolDef<false>());
}

}  // namespace lockstep
