// The translators of ONNX's matrix, convolution, pooling, normalisation and softmax ops.
// ONNX images are NCHW and Lockstep's convolutions and pools NHWC: each such node becomes
// Transpose -> op -> Transpose, with its filter transposed once at import.
#include <algorithm>
#include <cmath>

#include "runtime/import/batch_norm.h"
#include "runtime/onnx/onnx_translators.h"
#include "runtime/op_registry.h"

namespace lockstep::onnx_import {
namespace {

const std::vector<int64_t> kToNhwc{0, 2, 3, 1};
const std::vector<int64_t> kToNchw{0, 3, 1, 2};

std::string Ints(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i > 0 ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

// `y` reshaped to `like`'s shape: from ONNX's inferred shape when at most one dimension is
// unknown, else from `like`'s shape at run time.
std::string ReshapeLike(OnnxNodeContext& ctx, const std::string& y, const std::string& like, const Shape& shape,
                        std::string_view suffix) {
  int unknown = 0;
  for (int64_t d : shape.dims()) unknown += d < 0 ? 1 : 0;
  if (unknown <= 1) {
    return ctx.Emit("Reshape", {y}, AttrMap{{"shape", std::vector<int64_t>(shape.dims().begin(), shape.dims().end())}},
                    suffix);
  }
  const std::string dims = ctx.Emit("Shape", {like}, {}, std::string(suffix) + "/shape");
  return ctx.Emit("Reshape", {y, dims}, {}, suffix);
}

// Softmax and LogSoftmax. From opset 13 they run along one axis (default the last); before,
// over the input flattened to 2-D at `axis` (default 1), all dimensions from it on together.
Status SoftmaxFamily(OnnxNodeContext& ctx, const char* op, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(int rank, ctx.InputRank(0));
  LS_ASSIGN_OR_RETURN(int64_t axis, ctx.IntAttr("axis", ctx.opset() >= 13 ? -1 : 1));
  if (rank == 0 || axis < -rank || axis >= rank) return ctx.Error("axis " + std::to_string(axis) + " is out of range");
  if (axis < 0) axis += rank;
  if (axis == rank - 1) {
    outputs->push_back(ctx.Emit(op, {ctx.input(0)}));
    return Status::Ok();
  }
  if (ctx.opset() >= 13) {
    const std::vector<int64_t> perm = SwapWithLast(rank, static_cast<int>(axis));
    const std::string moved = ctx.Emit("Transpose", {ctx.input(0)}, AttrMap{{"perm", perm}}, "to_last");
    const std::string y = ctx.Emit(op, {moved}, {}, "last");
    outputs->push_back(ctx.Emit("Transpose", {y}, AttrMap{{"perm", perm}}));
    return Status::Ok();
  }
  const Shape& shape = ctx.InputSpec(0)->shape;
  int64_t inner = 1;
  for (int d = static_cast<int>(axis); d < rank && inner >= 0; ++d) inner = shape.dim(d) < 0 ? -1 : inner * shape.dim(d);
  if (inner < 0) return ctx.Unsupported("the dimensions from the axis on must be known before run time");
  const std::string flat = ctx.Emit("Reshape", {ctx.input(0)}, AttrMap{{"shape", std::vector<int64_t>{-1, inner}}}, "2d");
  const std::string y = ctx.Emit(op, {flat}, {}, "softmax_2d");
  outputs->push_back(ReshapeLike(ctx, y, ctx.input(0), shape, ""));
  return Status::Ok();
}

// How a convolution or pool is padded, in the terms of Lockstep's NHWC window ops: SAME or
// VALID, after an explicit Pad node where ONNX's pads are neither (or where SAME's would
// average differently).
struct Padding {
  std::string mode;           // "SAME" or "VALID"
  std::vector<int64_t> pads;  // non-empty: pad NCHW first by [0,0,t,l, 0,0,b,r]
};

// The geometry of one 2-D window op as read from the node; a 1-D one ([N, C, L]) is read as
// 2-D with a height of 1.
struct Window {
  bool one_d = false;
  std::vector<int64_t> image;    // [H, W], -1 where unknown
  std::vector<int64_t> kernel;   // [kh, kw]
  std::vector<int64_t> strides;  // [sh, sw]
  std::vector<int64_t> dilations{1, 1};
};

StatusOr<Window> ReadWindow(const OnnxNodeContext& ctx, std::vector<int64_t> kernel) {
  LS_ASSIGN_OR_RETURN(int rank, ctx.InputRank(0));
  if (rank != 3 && rank != 4) {
    return ctx.Unsupported("only 1-D and 2-D windows are supported (input rank " + std::to_string(rank) + ")");
  }
  Window w;
  w.one_d = rank == 3;
  const Shape& x = ctx.InputSpec(0)->shape;
  w.image = w.one_d ? std::vector<int64_t>{1, x.dim(2)} : std::vector<int64_t>{x.dim(2), x.dim(3)};
  LS_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> k, ctx.IntsAttr("kernel_shape"));
  if (k) kernel = *k;
  LS_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> s, ctx.IntsAttr("strides"));
  std::vector<int64_t> strides = s ? *s : std::vector<int64_t>(kernel.size(), 1);
  if (kernel.size() != static_cast<size_t>(rank - 2) || strides.size() != kernel.size()) {
    return ctx.Error("kernel_shape " + Ints(kernel) + " and strides " + Ints(strides) + " do not fit the input's rank");
  }
  LS_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> dilations, ctx.IntsAttr("dilations"));
  if (dilations) {
    if (dilations->size() != kernel.size() || std::any_of(dilations->begin(), dilations->end(), [](int64_t d) { return d < 1; })) {
      return ctx.Error("dilations " + Ints(*dilations) + " do not fit the input's rank");
    }
    w.dilations = w.one_d ? std::vector<int64_t>{1, (*dilations)[0]} : *dilations;
  }
  w.kernel = w.one_d ? std::vector<int64_t>{1, kernel[0]} : kernel;
  w.strides = w.one_d ? std::vector<int64_t>{1, strides[0]} : strides;
  return w;
}

// ONNX's pads, auto_pad and (for pools) ceil_mode as Lockstep padding. `same_allowed`: whether
// padding equal to SAME's may run as SAME (not for an average that counts the padding).
StatusOr<Padding> ReadPadding(const OnnxNodeContext& ctx, const Window& window, bool same_allowed, bool ceil_mode) {
  LS_ASSIGN_OR_RETURN(std::string auto_pad, ctx.StringAttr("auto_pad", "NOTSET"));
  // The window's extent, its taps spread by the dilations.
  Window w = window;
  for (int d = 0; d < 2; ++d) w.kernel[d] = w.kernel[d] + (w.kernel[d] - 1) * (w.dilations[d] - 1);
  std::vector<int64_t> pads(4, 0);  // [t, l, b, r]
  auto same_pads = [&](bool lower) -> Status {
    for (int d = 0; d < 2; ++d) {
      const int64_t in = w.image[d];
      if (in < 0) return ctx.Unsupported("explicit SAME padding of an image whose size is unknown until run time");
      const int64_t out = (in + w.strides[d] - 1) / w.strides[d];
      const int64_t total = std::max<int64_t>((out - 1) * w.strides[d] + w.kernel[d] - in, 0);
      pads[d] = lower ? total - total / 2 : total / 2;
      pads[2 + d] = total - pads[d];
    }
    return Status::Ok();
  };
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    if (auto_pad == "SAME_UPPER" && same_allowed && !ceil_mode) return Padding{"SAME", {}};
    LS_RETURN_IF_ERROR(same_pads(auto_pad == "SAME_LOWER"));
  } else if (auto_pad == "NOTSET") {
    LS_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> given, ctx.IntsAttr("pads"));
    if (given) {
      if (given->size() != (w.one_d ? 2u : 4u)) return ctx.Error("pads " + Ints(*given) + " do not fit the input's rank");
      pads = w.one_d ? std::vector<int64_t>{0, (*given)[0], 0, (*given)[1]} : *given;
    }
  } else if (auto_pad != "VALID") {
    return ctx.Error("auto_pad '" + auto_pad + "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
  }
  for (int64_t p : pads) {
    if (p < 0) return ctx.Error("pads must not be negative, got " + Ints(pads));
  }
  if (ceil_mode) {
    // The last window may start inside the image and run past its end: pad the end so that it
    // fits (what it covers there is never the maximum).
    for (int d = 0; d < 2; ++d) {
      const int64_t in = w.image[d];
      if (in < 0) return ctx.Unsupported("ceil_mode for an image whose size is unknown until run time");
      const int64_t span = in + pads[d] + pads[2 + d] - w.kernel[d];
      if (span < 0) continue;
      const int64_t out = (span + w.strides[d] - 1) / w.strides[d] + 1;
      pads[2 + d] += std::max<int64_t>((out - 1) * w.strides[d] + w.kernel[d] - (in + pads[d] + pads[2 + d]), 0);
    }
  }
  if (std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; })) return Padding{"VALID", {}};
  if (same_allowed) {
    const std::vector<int64_t> given = pads;
    if (same_pads(false).ok() && pads == given) return Padding{"SAME", {}};
    pads = given;
  }
  return Padding{"VALID", {0, 0, pads[0], pads[1], 0, 0, pads[2], pads[3]}};
}

// x (NCHW, or NCL as NC1L) padded as `padding` says, then moved to NHWC.
std::string ToNhwc(OnnxNodeContext& ctx, const Window& w, const Padding& padding, double pad_value) {
  std::string x = ctx.input(0);
  if (w.one_d) x = ctx.Emit("ExpandDims", {x}, AttrMap{{"axis", int64_t{2}}}, "as_2d");
  if (!padding.pads.empty()) {
    const std::string pads = ctx.EmitConstant(Tensor::FromVector<int64_t>(Shape{8}, padding.pads), "pads");
    x = ctx.Emit("Pad", {x, pads}, AttrMap{{"mode", std::string("constant")}, {"value", pad_value}}, "pad");
  }
  return ctx.Emit("Transpose", {x}, AttrMap{{"perm", kToNhwc}}, "nhwc");
}

// y (NHWC) back to NCHW, or to NCL for a 1-D op.
std::string FromNhwc(OnnxNodeContext& ctx, const Window& w, const std::string& y) {
  if (!w.one_d) return ctx.Emit("Transpose", {y}, AttrMap{{"perm", kToNchw}});
  const std::string nchw = ctx.Emit("Transpose", {y}, AttrMap{{"perm", kToNchw}}, "nchw");
  return ctx.Emit("Squeeze", {nchw}, AttrMap{{"axes", std::vector<int64_t>{2}}});
}

template <bool kMax>
Status Pool(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(Window w, ReadWindow(ctx, {}));
  if (w.dilations != std::vector<int64_t>{1, 1}) return ctx.Unsupported("dilations " + Ints(w.dilations) + " (only 1)");
  LS_ASSIGN_OR_RETURN(int64_t ceil_mode, ctx.IntAttr("ceil_mode", 0));
  LS_ASSIGN_OR_RETURN(int64_t include_pad, ctx.IntAttr("count_include_pad", 0));
  if (!kMax && ceil_mode != 0) return ctx.Unsupported("ceil_mode 1 for an average");
  // An average that counts the padding pads explicitly with zeros; one that does not may only
  // run as SAME (Lockstep's average leaves SAME's padding out).
  LS_ASSIGN_OR_RETURN(Padding padding, ReadPadding(ctx, w, kMax || include_pad == 0, ceil_mode != 0));
  if (!kMax && include_pad == 0 && !padding.pads.empty()) {
    return ctx.Unsupported("pads other than SAME's, left out of the average");
  }
  const double pad_value = kMax ? -std::numeric_limits<double>::infinity() : 0.0;
  const std::string x = ToNhwc(ctx, w, padding, pad_value);
  AttrMap attrs{{"ksize", w.kernel}, {"strides", w.strides}, {"padding", padding.mode}};
  const std::string y = ctx.Emit(kMax ? "MaxPool2D" : "AvgPool2D", {x}, std::move(attrs), "pool");
  outputs->push_back(FromNhwc(ctx, w, y));
  return Status::Ok();
}

template <const char* kReduce>
Status GlobalPool(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(int rank, ctx.InputRank(0));
  if (rank < 3) return ctx.Error("input must have rank >= 3");
  std::vector<int64_t> axes;
  for (int d = 2; d < rank; ++d) axes.push_back(d);
  outputs->push_back(ctx.Emit(kReduce, {ctx.input(0)}, AttrMap{{"axes", axes}, {"keep_dims", true}}));
  return Status::Ok();
}
constexpr char kMean[] = "Mean";
constexpr char kMax[] = "Max";

}  // namespace

Status Softmax(OnnxNodeContext& ctx, std::vector<std::string>* outputs) { return SoftmaxFamily(ctx, "Softmax", outputs); }
Status LogSoftmax(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  return SoftmaxFamily(ctx, "LogSoftmax", outputs);
}
Status MaxPool(OnnxNodeContext& ctx, std::vector<std::string>* outputs) { return Pool<true>(ctx, outputs); }
Status AveragePool(OnnxNodeContext& ctx, std::vector<std::string>* outputs) { return Pool<false>(ctx, outputs); }
Status GlobalAveragePool(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  return GlobalPool<kMean>(ctx, outputs);
}
Status GlobalMaxPool(OnnxNodeContext& ctx, std::vector<std::string>* outputs) { return GlobalPool<kMax>(ctx, outputs); }

// Y = alpha * A' B' + beta * C: MatMul with transpose flags, then scale and the bias (BiasAdd
// when C is a row vector, which the fusion pass folds into the matmul core's epilogue).
Status Gemm(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(float alpha, ctx.FloatAttr("alpha", 1.0f));
  LS_ASSIGN_OR_RETURN(float beta, ctx.FloatAttr("beta", 1.0f));
  LS_ASSIGN_OR_RETURN(int64_t trans_a, ctx.IntAttr("transA", 0));
  LS_ASSIGN_OR_RETURN(int64_t trans_b, ctx.IntAttr("transB", 0));
  LS_ASSIGN_OR_RETURN(DType dtype, InputDType(ctx, 0));
  AttrMap attrs;
  if (trans_a != 0) attrs.Set("transpose_a", true);
  if (trans_b != 0) attrs.Set("transpose_b", true);
  const bool has_c = ctx.HasInput(2) && beta != 0.0f;
  const bool last = alpha == 1.0f && !has_c;
  std::string y = ctx.Emit("MatMul", {ctx.input(0), ctx.input(1)}, std::move(attrs), last ? "" : "matmul");
  if (alpha != 1.0f) {
    y = ctx.Emit("Mul", {y, ctx.EmitConstant(Scalar(dtype, alpha), "alpha")}, {}, has_c ? "scaled" : "");
  }
  if (has_c) {
    std::string c = ctx.input(2);
    if (beta != 1.0f) c = ctx.Emit("Mul", {c, ctx.EmitConstant(Scalar(dtype, beta), "beta")}, {}, "c_scaled");
    // A row of N values is the matmul core's bias; any other C broadcasts as Add does.
    const auto& spec = ctx.InputSpec(2);
    const auto& b_spec = ctx.InputSpec(1);
    const int64_t n = b_spec && b_spec->shape.rank() == 2 ? b_spec->shape.dim(trans_b != 0 ? 0 : 1) : -1;
    const bool row = spec && spec->shape.rank() == 1 && n >= 0 && spec->shape.dim(0) == n;
    y = ctx.Emit(row ? "BiasAdd" : "Add", {y, c});
  }
  outputs->push_back(y);
  return Status::Ok();
}

// MatMul as numpy's matmul: two matrices, a stack of matrices [..., M, K] by one constant-shape
// matrix [K, N] (a dense layer over a sequence: flattened to rows for the matmul core, whose
// packed weights and fusions then apply), stacks by stacks (BatchMatMul, batch dimensions
// broadcast), and vectors, which take a dimension of 1 that is squeezed out again.
Status MatMul(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(int rank_a, ctx.InputRank(0));
  LS_ASSIGN_OR_RETURN(int rank_b, ctx.InputRank(1));
  if (rank_a == 0 || rank_b == 0) return ctx.Error("MatMul of a scalar");
  if (rank_a == 2 && rank_b == 2) {
    outputs->push_back(ctx.Emit("MatMul", {ctx.input(0), ctx.input(1)}));
    return Status::Ok();
  }
  const Shape& a = ctx.InputSpec(0)->shape;
  const Shape& b = ctx.InputSpec(1)->shape;
  // Flattening to rows is right only when a's rows are known to have b's K elements (else a
  // request of another width would be read as more rows instead of refused).
  if (rank_a > 2 && rank_b == 2 && b.dim(0) >= 0 && b.dim(1) >= 0 && a.dim(rank_a - 1) == b.dim(0)) {
    const std::string rows =
        ctx.Emit("Reshape", {ctx.input(0)}, AttrMap{{"shape", std::vector<int64_t>{-1, b.dim(0)}}}, "rows");
    const std::string product = ctx.Emit("MatMul", {rows, ctx.input(1)}, {}, "matmul");
    Shape out = a;
    out.set_dim(rank_a - 1, b.dim(1));
    int unknown = 0;
    for (int d = 0; d < rank_a - 1; ++d) unknown += a.dim(d) < 0 ? 1 : 0;
    if (unknown <= 1) {
      outputs->push_back(
          ctx.Emit("Reshape", {product}, AttrMap{{"shape", std::vector<int64_t>(out.dims().begin(), out.dims().end())}}));
      return Status::Ok();
    }
    // [a's leading dimensions..., N], read from a at run time.
    const std::string dims = ctx.Emit("Shape", {ctx.input(0)}, AttrMap{{"end", int64_t{-1}}}, "leading");
    const std::string n = ctx.EmitConstant(Tensor::FromVector<int64_t>(Shape{1}, {b.dim(1)}), "n");
    const std::string shape = ctx.Emit("Concat", {dims, n}, AttrMap{{"axis", int64_t{0}}}, "shape");
    outputs->push_back(ctx.Emit("Reshape", {product, shape}));
    return Status::Ok();
  }
  std::string x = ctx.input(0), y = ctx.input(1);
  if (rank_a == 1) x = ctx.Emit("ExpandDims", {x}, AttrMap{{"axis", int64_t{0}}}, "a_row");
  if (rank_b == 1) y = ctx.Emit("ExpandDims", {y}, AttrMap{{"axis", int64_t{-1}}}, "b_column");
  std::vector<int64_t> squeezed;
  if (rank_a == 1) squeezed.push_back(-2);
  if (rank_b == 1) squeezed.push_back(-1);
  const bool plain = rank_a <= 2 && rank_b <= 2;
  const std::string product = ctx.Emit(plain ? "MatMul" : "BatchMatMul", {x, y}, {}, squeezed.empty() ? "" : "product");
  if (squeezed.empty()) {
    outputs->push_back(product);
    return Status::Ok();
  }
  const int out_rank = std::max(std::max(rank_a, rank_b), 2);
  for (int64_t& axis : squeezed) axis += out_rank;
  outputs->push_back(ctx.Emit("Squeeze", {product}, AttrMap{{"axes", squeezed}}));
  return Status::Ok();
}

// A float32 filter [M, C, KH, KW] with its taps `dilations` apart, zeros between.
Tensor DilatedFilter(const Tensor& f, const Window& w) {
  const Shape& s = f.shape();
  const int64_t m = s.dim(0), c = s.dim(1), kh = w.kernel[0], kw = w.kernel[1];
  const int64_t dh = w.dilations[0], dw = w.dilations[1];
  const int64_t eh = kh + (kh - 1) * (dh - 1), ew = kw + (kw - 1) * (dw - 1);
  Tensor out(DType::kFloat32, Shape{m, c, eh, ew});
  const auto in = f.data<float>();
  auto dst = out.mutable_data<float>();
  for (int64_t i = 0; i < m * c; ++i) {
    for (int64_t y = 0; y < kh; ++y) {
      for (int64_t x = 0; x < kw; ++x) dst[static_cast<size_t>((i * eh + y * dh) * ew + x * dw)] = in[static_cast<size_t>((i * kh + y) * kw + x)];
    }
  }
  return out;
}

// The filter [M, C/g, (KH,) KW] goes to [KH, KW, C, M] for Conv2D (g = 1), or [KH, KW, C, M/C]
// for DepthwiseConv2D (g = C: output channel c * M/C + j reads input channel c); a constant
// filter is transposed once, by constant folding.
Status Conv(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  const auto& w_spec = ctx.InputSpec(1);
  if (!w_spec || !w_spec->shape.IsFullyDefined()) return ctx.Unsupported("a filter whose shape is unknown until run time");
  const Shape& fs = w_spec->shape;
  if (fs.rank() < 3) return ctx.Error("the filter must have rank 3 or 4, got " + fs.ToString());
  std::vector<int64_t> kernel(fs.dims().begin() + 2, fs.dims().end());
  LS_ASSIGN_OR_RETURN(Window w, ReadWindow(ctx, kernel));
  if ((w.one_d ? std::vector<int64_t>{kernel[0]} : w.kernel) != kernel) {
    return ctx.Error("kernel_shape does not match the filter " + fs.ToString());
  }
  LS_ASSIGN_OR_RETURN(int64_t group, ctx.IntAttr("group", 1));
  const int64_t channels = ctx.InputSpec(0)->shape.dim(1);
  const int64_t m = fs.dim(0);
  if (group < 1 || channels < 0 || channels % group != 0 || m % group != 0 || fs.dim(1) != channels / group) {
    return ctx.Error("group " + std::to_string(group) + " does not fit " + std::to_string(channels) +
                     " input channels and the filter " + fs.ToString());
  }
  const bool depthwise = group > 1 && group == channels;
  LS_ASSIGN_OR_RETURN(Padding padding, ReadPadding(ctx, w, true, false));
  const std::string x = ToNhwc(ctx, w, padding, 0.0);
  std::string f = ctx.input(1);
  if (w.one_d) f = ctx.Emit("ExpandDims", {f}, AttrMap{{"axis", int64_t{2}}}, "filter_2d");
  if (w.dilations != std::vector<int64_t>{1, 1}) {
    // A dilated filter is the filter with zeros between its taps: adding exact zeros leaves
    // every sum as it was.
    const Tensor* constant = ctx.ConstantInput(1);
    if (constant == nullptr || constant->dtype() != DType::kFloat32) {
      return ctx.Unsupported("dilations " + Ints(w.dilations) + " of a filter that is not a float32 constant");
    }
    // The stuffed filter costs its extent in work per output pixel: bounded.
    constexpr int64_t kMaxExtent = 1024;
    for (int d = 0; d < 2; ++d) {
      if (w.kernel[d] < 1 || (w.kernel[d] - 1) * w.dilations[d] + 1 > kMaxExtent) {
        return ctx.Unsupported("a dilated window of more than " + std::to_string(kMaxExtent) + " pixels");
      }
    }
    f = ctx.EmitConstant(DilatedFilter(*constant, w), "filter_dilated");
  }
  f = ctx.Emit("Transpose", {f}, AttrMap{{"perm", std::vector<int64_t>{2, 3, 1, 0}}}, "filter_hwio");
  const int64_t kh = w.kernel[0] + (w.kernel[0] - 1) * (w.dilations[0] - 1);
  const int64_t kw = w.kernel[1] + (w.kernel[1] - 1) * (w.dilations[1] - 1);
  AttrMap attrs{{"strides", w.strides}, {"padding", padding.mode}};
  std::string y;
  if (group == 1) {
    y = ctx.Emit("Conv2D", {x, f}, std::move(attrs), "conv");
  } else if (depthwise) {
    f = ctx.Emit("Reshape", {f}, AttrMap{{"shape", std::vector<int64_t>{kh, kw, channels, m / channels}}}, "filter_depthwise");
    y = ctx.Emit("DepthwiseConv2D", {x, f}, std::move(attrs), "conv");
  } else {
    // Groups: each a convolution of its slice of the input channels with its slice of the
    // filters, side by side along the channels.
    const int64_t cin = channels / group, cout = m / group;
    const std::string axis = ctx.EmitConstant(Tensor::FromVector<int64_t>(Shape{1}, {3}), "channel_axis");
    std::vector<std::string> parts;
    for (int64_t g = 0; g < group; ++g) {
      const std::string tag = "group_" + std::to_string(g);
      auto slice = [&](const std::string& v, int64_t begin, int64_t size, const char* what) {
        const std::string b = ctx.EmitConstant(Tensor::FromVector<int64_t>(Shape{1}, {begin}), tag + "/" + what + "_begin");
        const std::string e = ctx.EmitConstant(Tensor::FromVector<int64_t>(Shape{1}, {begin + size}), tag + "/" + what + "_end");
        return ctx.Emit("Slice", {v, b, e, axis}, {}, tag + "/" + what);
      };
      const std::string xg = slice(x, g * cin, cin, "input");
      const std::string fg = slice(f, g * cout, cout, "filter");
      parts.push_back(ctx.Emit("Conv2D", {xg, fg}, attrs, tag + "/conv"));
    }
    y = ctx.Emit("Concat", std::move(parts), AttrMap{{"axis", int64_t{3}}}, "conv");
  }
  if (ctx.HasInput(2)) y = ctx.Emit("BiasAdd", {y, ctx.input(2)}, {}, "bias");
  outputs->push_back(FromNhwc(ctx, w, y));
  return Status::Ok();
}

// Inference: one multiply and one add per channel (axis 1), folded at import
// (runtime/import/batch_norm.h).
Status BatchNormalization(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(int64_t training, ctx.IntAttr("training_mode", 0));
  if (training != 0) return ctx.Unsupported("training_mode 1 (only inference)");
  LS_ASSIGN_OR_RETURN(int64_t spatial, ctx.IntAttr("spatial", 1));
  if (spatial != 1) return ctx.Unsupported("spatial 0");
  LS_ASSIGN_OR_RETURN(float epsilon, ctx.FloatAttr("epsilon", 1e-5f));
  LS_ASSIGN_OR_RETURN(int rank, ctx.InputRank(0));
  if (rank < 2) return ctx.Error("input must have rank >= 2");
  LS_ASSIGN_OR_RETURN(DType dtype, InputDType(ctx, 0));
  bool constant = true;
  for (size_t i = 1; i <= 4; ++i) constant = constant && ctx.ConstantInput(i) != nullptr;
  if (!constant) {
    // Statistics fed at run time: the same formula, computed per request. Each [C] vector is
    // given trailing 1s to broadcast along axis 1.
    std::vector<std::string> p;
    for (size_t i = 1; i <= 4; ++i) {
      std::string v = ctx.input(i);
      for (int d = 2; d < rank; ++d) v = ctx.Emit("ExpandDims", {v}, AttrMap{{"axis", int64_t{-1}}}, "p" + std::to_string(i) + "_" + std::to_string(d));
      p.push_back(v);
    }
    const std::string eps = ctx.EmitConstant(Scalar(dtype, epsilon), "epsilon");
    const std::string sd = ctx.Emit("Sqrt", {ctx.Emit("Add", {p[3], eps}, {}, "var_eps")}, {}, "sd");
    const std::string centred = ctx.Emit("Sub", {ctx.input(0), p[2]}, {}, "centred");
    const std::string normal = ctx.Emit("Div", {centred, sd}, {}, "normal");
    const std::string scaled = ctx.Emit("Mul", {normal, p[0]}, {}, "scaled");
    outputs->push_back(ctx.Emit("Add", {scaled, p[1]}));
    return Status::Ok();
  }
  // [C, 1, ..., 1]: broadcast along axis 1 of an [N, C, ...] input.
  Shape shape{ctx.ConstantInput(1)->num_elements()};
  for (int d = 2; d < rank; ++d) shape.AddDim(1);
  StatusOr<FoldedBatchNorm> folded = FoldBatchNorm(*ctx.ConstantInput(1), *ctx.ConstantInput(2), *ctx.ConstantInput(3),
                                                   *ctx.ConstantInput(4), epsilon, dtype, shape);
  if (!folded.ok()) return ctx.Error(folded.status().message());
  const std::string scale = ctx.EmitConstant(std::move(folded->scale), "scale");
  const std::string scaled = ctx.Emit("Mul", {ctx.input(0), scale}, {}, "scaled");
  const std::string offset = ctx.EmitConstant(std::move(folded->offset), "offset");
  outputs->push_back(ctx.Emit("Add", {scaled, offset}));
  return Status::Ok();
}

// LayerNormalize over the axes from `axis` on, then the scale and the bias; and the Mean and
// InvStdDev outputs.
Status LayerNormalization(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(int rank, ctx.InputRank(0));
  LS_ASSIGN_OR_RETURN(int64_t axis, ctx.IntAttr("axis", -1));
  LS_ASSIGN_OR_RETURN(float epsilon, ctx.FloatAttr("epsilon", 1e-5f));
  if (axis < -rank || axis >= rank) return ctx.Error("axis " + std::to_string(axis) + " is out of range");
  if (axis < 0) axis += rank;
  std::string normal;
  if (axis == rank - 1) {
    normal = ctx.Emit("LayerNormalize", {ctx.input(0)}, AttrMap{{"epsilon", static_cast<double>(epsilon)}}, "normalize");
  } else {
    // Over several axes: they are flattened into one, normalised, and given their shape back.
    const Shape& shape = ctx.InputSpec(0)->shape;
    int64_t inner = 1;
    for (int d = static_cast<int>(axis); d < rank && inner >= 0; ++d) inner = shape.dim(d) < 0 ? -1 : inner * shape.dim(d);
    if (inner < 0) return ctx.Unsupported("normalised dimensions unknown until run time");
    const std::string flat =
        ctx.Emit("Reshape", {ctx.input(0)}, AttrMap{{"shape", std::vector<int64_t>{-1, inner}}}, "rows");
    const std::string rows =
        ctx.Emit("LayerNormalize", {flat}, AttrMap{{"epsilon", static_cast<double>(epsilon)}}, "normalize_rows");
    normal = ReshapeLike(ctx, rows, ctx.input(0), shape, "normalize");
  }
  const bool has_bias = ctx.HasInput(2);
  std::string y = ctx.Emit("Mul", {normal, ctx.input(1)}, {}, has_bias ? "scaled" : "");
  if (has_bias) y = ctx.Emit("Add", {y, ctx.input(2)});
  outputs->push_back(y);
  // Mean and InvStdDev, the optional outputs: over the normalised axes, kept as 1s, in the
  // stash type (float32). Unused, they are dead nodes that the passes remove.
  LS_ASSIGN_OR_RETURN(DType dtype, InputDType(ctx, 0));
  LS_ASSIGN_OR_RETURN(int64_t stash, ctx.IntAttr("stash_type", 1));
  std::vector<int64_t> axes;
  for (int64_t d = axis; d < rank; ++d) axes.push_back(d);
  const AttrMap reduce{{"axes", axes}, {"keep_dims", true}};
  const std::string mean = ctx.Emit("Mean", {ctx.input(0)}, reduce, "mean");
  const std::string centred = ctx.Emit("Sub", {ctx.input(0), mean}, {}, "centred");
  const std::string var = ctx.Emit("Mean", {ctx.Emit("Mul", {centred, centred}, {}, "squares")}, reduce, "variance");
  const std::string eps = ctx.EmitConstant(Scalar(dtype, epsilon), "epsilon");
  const std::string sd = ctx.Emit("Sqrt", {ctx.Emit("Add", {var, eps}, {}, "variance_eps")}, {}, "stddev");
  const std::string inv = ctx.Emit("Reciprocal", {sd}, {}, "inv_stddev");
  const bool cast = stash == 1 && dtype != DType::kFloat32;
  outputs->push_back(cast ? ctx.Emit("Cast", {mean}, AttrMap{{"dtype", DType::kFloat32}}, "mean_f32") : mean);
  outputs->push_back(cast ? ctx.Emit("Cast", {inv}, AttrMap{{"dtype", DType::kFloat32}}, "inv_stddev_f32") : inv);
  return Status::Ok();
}

}  // namespace lockstep::onnx_import
