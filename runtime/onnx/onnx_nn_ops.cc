// The translators of ONNX's matrix, normalisation and softmax ops, and GELU. (Convolutions and pools are
// onnx_window_ops.cc.)
#include <algorithm>
#include <cmath>
#include <tuple>

#include "runtime/import/batch_norm.h"
#include "runtime/onnx/onnx_translators.h"
#include "runtime/op_registry.h"

namespace lockstep::onnx_import {
namespace {

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

// x [d0 .. dn] as rows of the dimensions from `axis` on: a Reshape to [-1, their product] when
// that is known, else a Flatten at the axis, which multiplies at run time.
std::string FlattenAt(OnnxNodeContext& ctx, const std::string& x, const Shape& shape, int64_t axis,
                      std::string_view suffix) {
  int64_t inner = 1;
  for (int d = static_cast<int>(axis); d < shape.rank() && inner >= 0; ++d) {
    inner = shape.dim(d) < 0 ? -1 : inner * shape.dim(d);
  }
  if (inner < 0) return ctx.Emit("Flatten", {x}, AttrMap{{"axis", axis}}, suffix);
  return ctx.Emit("Reshape", {x}, AttrMap{{"shape", std::vector<int64_t>{-1, inner}}}, suffix);
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
  const std::string flat = FlattenAt(ctx, ctx.input(0), shape, axis, "2d");
  const std::string y = ctx.Emit(op, {flat}, {}, "softmax_2d");
  outputs->push_back(ReshapeLike(ctx, y, ctx.input(0), shape, ""));
  return Status::Ok();
}

}  // namespace

Status Softmax(OnnxNodeContext& ctx, std::vector<std::string>* outputs) { return SoftmaxFamily(ctx, "Softmax", outputs); }
Status LogSoftmax(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  return SoftmaxFamily(ctx, "LogSoftmax", outputs);
}
Status Hardmax(OnnxNodeContext& ctx, std::vector<std::string>* outputs) { return SoftmaxFamily(ctx, "Hardmax", outputs); }
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

// Inference: one multiply and one add per channel (axis 1), folded at import
// (runtime/import/batch_norm.h).
namespace {

// training_mode 1: normalised by the batch's own mean and (population) variance over every
// axis but 1, and the running statistics moved towards them:
//   running = input_statistic * momentum + batch_statistic * (1 - momentum).
Status BatchNormalizationTraining(OnnxNodeContext& ctx, int rank, DType dtype, float epsilon,
                                  std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(float momentum, ctx.FloatAttr("momentum", 0.9f));
  std::vector<int64_t> axes{0};
  for (int d = 2; d < rank; ++d) axes.push_back(d);
  const AttrMap over{{"axes", axes}, {"keep_dims", true}};
  std::vector<int64_t> per_channel(static_cast<size_t>(rank), 1);
  per_channel[1] = -1;
  auto along_channels = [&](size_t i, const char* name) {
    return ctx.Emit("Reshape", {ctx.input(i)}, AttrMap{{"shape", per_channel}}, name);
  };
  const std::string mean = ctx.Emit("Mean", {ctx.input(0)}, over, "batch_mean");
  const std::string centred = ctx.Emit("Sub", {ctx.input(0), mean}, {}, "centred");
  const std::string var = ctx.Emit("Mean", {ctx.Emit("Mul", {centred, centred}, {}, "square")}, over, "batch_var");
  const std::string sd = ctx.Emit("Sqrt", {ctx.Emit("Add", {var, ctx.EmitConstant(Scalar(dtype, epsilon), "epsilon")}, {}, "var_eps")},
                                  {}, "sd");
  const std::string normal = ctx.Emit("Div", {centred, sd}, {}, "normal");
  outputs->push_back(ctx.Emit("Add", {ctx.Emit("Mul", {normal, along_channels(1, "scale")}, {}, "scaled"), along_channels(2, "bias")}));
  const std::string keep = ctx.EmitConstant(Scalar(dtype, momentum), "momentum");
  const std::string take = ctx.EmitConstant(Scalar(dtype, 1.0 - static_cast<double>(momentum)), "one_less_momentum");
  const AttrMap flat{{"shape", std::vector<int64_t>{-1}}};
  for (const auto& [input, batch, name] : {std::tuple<size_t, std::string, const char*>{3, mean, "running_mean"},
                                           std::tuple<size_t, std::string, const char*>{4, var, "running_var"}}) {
    const std::string old_part = ctx.Emit("Mul", {ctx.input(input), keep}, {}, std::string(name) + "_kept");
    const std::string new_part = ctx.Emit("Mul", {ctx.Emit("Reshape", {batch}, flat, std::string(name) + "_batch"), take}, {},
                                          std::string(name) + "_taken");
    outputs->push_back(ctx.Emit("Add", {old_part, new_part}, {}, name));
  }
  return Status::Ok();
}

}  // namespace

Status BatchNormalization(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(int64_t training, ctx.IntAttr("training_mode", 0));
  LS_ASSIGN_OR_RETURN(int64_t spatial, ctx.IntAttr("spatial", 1));
  if (spatial != 1) return ctx.Unsupported("spatial 0");
  LS_ASSIGN_OR_RETURN(float epsilon, ctx.FloatAttr("epsilon", 1e-5f));
  LS_ASSIGN_OR_RETURN(int rank, ctx.InputRank(0));
  if (rank < 2) return ctx.Error("input must have rank >= 2");
  LS_ASSIGN_OR_RETURN(DType dtype, InputDType(ctx, 0));
  if (training != 0) return BatchNormalizationTraining(ctx, rank, dtype, epsilon, outputs);
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
    const std::string flat = FlattenAt(ctx, ctx.input(0), shape, axis, "rows");
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

// Gelu (opset 20): x * Phi(x), Lockstep's Gelu; approximate 'tanh' as ONNX writes it,
// 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
Status Gelu(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(std::string approximate, ctx.StringAttr("approximate", "none"));
  if (approximate == "none") {
    outputs->push_back(ctx.Emit("Gelu", {ctx.input(0)}));
    return Status::Ok();
  }
  if (approximate != "tanh") return ctx.Error("approximate '" + approximate + "' is not one of none, tanh");
  LS_ASSIGN_OR_RETURN(DType dtype, InputDType(ctx, 0));
  const std::string& x = ctx.input(0);
  const std::string cube = ctx.Emit("Mul", {x, ctx.Emit("Mul", {x, x}, {}, "square")}, {}, "cube");
  const std::string inner = ctx.Emit("Add", {x, ctx.Emit("Mul", {cube, ctx.EmitConstant(Scalar(dtype, 0.044715), "c")}, {}, "cubic_term")},
                                     {}, "inner");
  const std::string scaled = ctx.Emit("Mul", {inner, ctx.EmitConstant(Scalar(dtype, 0.7978845608028654), "sqrt_2_over_pi")},
                                      {}, "scaled");
  const std::string one_plus = ctx.Emit("Add", {ctx.Emit("Tanh", {scaled}, {}, "tanh"), ctx.EmitConstant(Scalar(dtype, 1.0), "one")},
                                        {}, "one_plus");
  const std::string half_x = ctx.Emit("Mul", {x, ctx.EmitConstant(Scalar(dtype, 0.5), "half")}, {}, "half_x");
  outputs->push_back(ctx.Emit("Mul", {half_x, one_plus}));
  return Status::Ok();
}

}  // namespace lockstep::onnx_import
