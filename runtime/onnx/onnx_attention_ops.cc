// The translators of the transformer ops opset 23 added, which current LLM-style exports write:
// RMSNormalization, RotaryEmbedding and Attention, each composed of Lockstep's reductions,
// slices, element-wise ops and batched products (BatchMatMul) as ONNX's definitions compose
// them. Sizes known only at run time (sequence lengths, a cache's length) are read from the
// shapes of the run.
#include <cmath>
#include <limits>

#include "runtime/onnx/onnx_translators.h"
#include "runtime/onnx/onnx_window.h"

namespace lockstep::onnx_import {
namespace {

constexpr int64_t kToEnd = std::numeric_limits<int64_t>::max();

// x[..., begin:end:step] along `axis`.
std::string SliceAxis(OnnxNodeContext& ctx, const std::string& x, int64_t axis, int64_t begin, int64_t end, int64_t step,
                      const std::string& tag) {
  return ctx.Emit("Slice",
                  {x, IntsConstant(ctx, {begin}, tag + "/begin"), IntsConstant(ctx, {end}, tag + "/end"),
                   IntsConstant(ctx, {axis}, tag + "/axis"), IntsConstant(ctx, {step}, tag + "/step")},
                  {}, tag);
}

// [b, s, heads * d] as [b, heads, s, d] (Attention's and RotaryEmbedding's 3-D inputs).
std::string SplitHeads(OnnxNodeContext& ctx, const std::string& x, int64_t heads, const std::string& tag) {
  const std::string shape =
      Joined(ctx, {DimsOf(ctx, x, 0, 2, tag + "/bs"), IntsConstant(ctx, {heads, -1}, tag + "/hd")}, tag + "/shape");
  const std::string split = ctx.Emit("Reshape", {x, shape}, {}, tag + "/split");
  return ctx.Emit("Transpose", {split}, AttrMap{{"perm", std::vector<int64_t>{0, 2, 1, 3}}}, tag);
}

// [b, heads, s, d] back to [b, s, heads * d].
std::string MergeHeads(OnnxNodeContext& ctx, const std::string& x, const std::string& tag) {
  const std::string bshd = ctx.Emit("Transpose", {x}, AttrMap{{"perm", std::vector<int64_t>{0, 2, 1, 3}}}, tag + "/bshd");
  const std::string shape =
      Joined(ctx, {DimsOf(ctx, bshd, 0, 2, tag + "/bs"), IntsConstant(ctx, {-1}, tag + "/hidden")}, tag + "/shape");
  return ctx.Emit("Reshape", {bshd, shape}, {}, tag);
}

// A scalar -inf or 0 where `masked` (bool) is true or false.
std::string MaskBias(OnnxNodeContext& ctx, const std::string& masked, DType dtype, const std::string& tag) {
  return ctx.Emit("Where",
                  {masked, ctx.EmitConstant(Scalar(dtype, -std::numeric_limits<double>::infinity()), tag + "/minus_inf"),
                   ctx.EmitConstant(Scalar(dtype, 0.0), tag + "/zero")},
                  {}, tag);
}

}  // namespace

// RMSNormalization(X, scale; axis, epsilon): X / sqrt(mean(X^2) + epsilon) * scale, the mean over
// the axes from `axis` on.
Status RmsNormalization(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(int rank, ctx.InputRank(0));
  LS_ASSIGN_OR_RETURN(int64_t axis, ctx.IntAttr("axis", -1));
  LS_ASSIGN_OR_RETURN(float epsilon, ctx.FloatAttr("epsilon", 1e-5f));
  LS_ASSIGN_OR_RETURN(DType dtype, InputDType(ctx, 0));
  if (axis < -rank || axis >= rank) return ctx.Error("axis " + std::to_string(axis) + " is out of range");
  if (axis < 0) axis += rank;
  std::vector<int64_t> axes;
  for (int64_t d = axis; d < rank; ++d) axes.push_back(d);
  const std::string& x = ctx.input(0);
  const std::string mean_square = ctx.Emit("Mean", {ctx.Emit("Mul", {x, x}, {}, "square")},
                                           AttrMap{{"axes", axes}, {"keep_dims", true}}, "mean_square");
  const std::string rms = ctx.Emit(
      "Sqrt", {ctx.Emit("Add", {mean_square, ctx.EmitConstant(Scalar(dtype, epsilon), "epsilon")}, {}, "shifted")}, {}, "rms");
  outputs->push_back(ctx.Emit("Mul", {ctx.Emit("Div", {x, rms}, {}, "normalized"), ctx.input(1)}));
  return Status::Ok();
}

// RotaryEmbedding(X, cos_cache, sin_cache[, position_ids]; interleaved, num_heads,
// rotary_embedding_dim): the first rotary_embedding_dim channels of each head rotated pairwise
// by its position's angles (halves, or interleaved pairs), the rest kept. X is [b, heads, s, d],
// or [b, s, heads * d] with num_heads; the caches [max position + 1, rot / 2] read at
// position_ids [b, s], or [b, s, rot / 2] without them.
Status RotaryEmbedding(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(int rank, ctx.InputRank(0));
  LS_ASSIGN_OR_RETURN(int64_t interleaved, ctx.IntAttr("interleaved", 0));
  LS_ASSIGN_OR_RETURN(int64_t heads, ctx.IntAttr("num_heads", 0));
  LS_ASSIGN_OR_RETURN(int64_t rot, ctx.IntAttr("rotary_embedding_dim", 0));
  if (rank != 3 && rank != 4) return ctx.Error("the input must have rank 3 or 4");
  if (rank == 3 && heads < 1) return ctx.Error("a 3-D input needs num_heads");
  if (rot == 0) {
    // The whole head: twice the caches' last dimension.
    LS_ASSIGN_OR_RETURN(int cache_rank, ctx.InputRank(1));
    rot = cache_rank > 0 ? 2 * ctx.InputSpec(1)->shape.dim(cache_rank - 1) : -1;
    if (rot <= 0) return ctx.UnknownUntilRunTime("rotary_embedding_dim 0 with caches whose last dimension is unknown until run time");
  }
  if (rot < 0 || rot % 2 != 0) return ctx.Error("rotary_embedding_dim " + std::to_string(rot) + " is negative or odd");
  const int64_t head_size = rank == 4 ? ctx.InputSpec(0)->shape.dim(3) : -1;
  if (head_size >= 0 && rot > head_size) {
    return ctx.Error("rotary_embedding_dim " + std::to_string(rot) + " exceeds the head size " + std::to_string(head_size));
  }
  // [b, s, heads, d], as ONNX's definition works.
  const std::string x = rank == 4 ? ctx.Emit("Transpose", {ctx.input(0)}, AttrMap{{"perm", std::vector<int64_t>{0, 2, 1, 3}}}, "bshd")
                                  : ctx.Emit("Transpose", {SplitHeads(ctx, ctx.input(0), heads, "heads")},
                                             AttrMap{{"perm", std::vector<int64_t>{0, 2, 1, 3}}}, "bshd");
  std::string cos = ctx.input(1), sin = ctx.input(2);
  if (ctx.HasInput(3)) {
    cos = ctx.Emit("Gather", {cos, ctx.input(3)}, AttrMap{{"axis", int64_t{0}}}, "cos_at");
    sin = ctx.Emit("Gather", {sin, ctx.input(3)}, AttrMap{{"axis", int64_t{0}}}, "sin_at");
  }
  cos = ctx.Emit("ExpandDims", {cos}, AttrMap{{"axis", int64_t{2}}}, "cos_per_head");
  sin = ctx.Emit("ExpandDims", {sin}, AttrMap{{"axis", int64_t{2}}}, "sin_per_head");
  const std::string rotated = SliceAxis(ctx, x, 3, 0, rot, 1, "rotated");
  const std::string kept = SliceAxis(ctx, x, 3, rot, kToEnd, 1, "kept");
  const std::string x1 = interleaved ? SliceAxis(ctx, rotated, 3, 0, rot, 2, "even") : SliceAxis(ctx, rotated, 3, 0, rot / 2, 1, "first_half");
  const std::string x2 = interleaved ? SliceAxis(ctx, rotated, 3, 1, rot, 2, "odd") : SliceAxis(ctx, rotated, 3, rot / 2, rot, 1, "second_half");
  const std::string real = ctx.Emit(
      "Sub", {ctx.Emit("Mul", {cos, x1}, {}, "cos_x1"), ctx.Emit("Mul", {sin, x2}, {}, "sin_x2")}, {}, "real");
  const std::string imag = ctx.Emit(
      "Add", {ctx.Emit("Mul", {sin, x1}, {}, "sin_x1"), ctx.Emit("Mul", {cos, x2}, {}, "cos_x2")}, {}, "imag");
  std::string turned;
  if (interleaved) {
    // (real, imag) pairs back in place: [..., rot / 2, 2] read as [..., rot].
    const std::string pairs = ctx.Emit("Concat",
                                       {ctx.Emit("ExpandDims", {real}, AttrMap{{"axis", int64_t{4}}}, "real_pair"),
                                        ctx.Emit("ExpandDims", {imag}, AttrMap{{"axis", int64_t{4}}}, "imag_pair")},
                                       AttrMap{{"axis", int64_t{4}}}, "pairs");
    turned = ctx.Emit("Reshape", {pairs, ctx.Emit("Shape", {rotated}, {}, "rotated_shape")}, {}, "turned");
  } else {
    turned = ctx.Emit("Concat", {real, imag}, AttrMap{{"axis", int64_t{3}}}, "turned");
  }
  const std::string y = ctx.Emit("Concat", {turned, kept}, AttrMap{{"axis", int64_t{3}}}, "bshd_out");
  if (rank == 4) {
    outputs->push_back(ctx.Emit("Transpose", {y}, AttrMap{{"perm", std::vector<int64_t>{0, 2, 1, 3}}}));
  } else {
    outputs->push_back(ctx.Emit("Reshape", {y, ctx.Emit("Shape", {ctx.input(0)}, {}, "shape")}));
  }
  return Status::Ok();
}

// Attention(Q, K, V[, attn_mask, past_key, past_value]; is_causal, q_num_heads, kv_num_heads,
// scale, softcap, qk_matmul_output_mode): softmax(Q K^T * scale (softcapped) + mask) V per head,
// the past keys and values before the new ones (the present outputs), a causal mask aligned to
// the past (query i sees keys up to i + the past's length), grouped K/V heads repeated for the
// query heads that share them. 3-D inputs are [b, s, heads * d], with the heads' counts given.
Status Attention(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(int rank, ctx.InputRank(0));
  LS_ASSIGN_OR_RETURN(DType dtype, InputDType(ctx, 0));
  LS_ASSIGN_OR_RETURN(int64_t causal, ctx.IntAttr("is_causal", 0));
  LS_ASSIGN_OR_RETURN(int64_t q_heads, ctx.IntAttr("q_num_heads", 0));
  LS_ASSIGN_OR_RETURN(int64_t kv_heads, ctx.IntAttr("kv_num_heads", 0));
  LS_ASSIGN_OR_RETURN(float softcap, ctx.FloatAttr("softcap", 0.0f));
  LS_ASSIGN_OR_RETURN(int64_t qk_mode, ctx.IntAttr("qk_matmul_output_mode", 0));
  if (rank != 3 && rank != 4) return ctx.Error("Q must have rank 3 or 4");
  if (rank == 3 && (q_heads < 1 || kv_heads < 1)) return ctx.Error("3-D inputs need q_num_heads and kv_num_heads");
  if (qk_mode < 0 || qk_mode > 3) return ctx.Error("qk_matmul_output_mode " + std::to_string(qk_mode) + " is not 0 to 3");
  std::string q = ctx.input(0), k = ctx.input(1), v = ctx.input(2);
  if (rank == 3) {
    q = SplitHeads(ctx, q, q_heads, "q_heads");
    k = SplitHeads(ctx, k, kv_heads, "k_heads");
    v = SplitHeads(ctx, v, kv_heads, "v_heads");
  } else {
    LS_ASSIGN_OR_RETURN(int k_rank, ctx.InputRank(1));
    LS_ASSIGN_OR_RETURN(int v_rank, ctx.InputRank(2));
    if (k_rank != 4 || v_rank != 4) return ctx.Error("Q, K and V must all have rank 3 or all rank 4");
    if (q_heads < 1) q_heads = ctx.InputSpec(0)->shape.dim(1);
    if (kv_heads < 1) kv_heads = ctx.InputSpec(1)->shape.dim(1);
  }
  // The past's length, 0 without one: where the causal mask's diagonal starts.
  const std::string past_len =
      ctx.HasInput(4) ? ctx.Emit("Reshape", {DimsOf(ctx, ctx.input(4), 2, 3, "past_len_dims")},
                                 AttrMap{{"shape", std::vector<int64_t>{}}}, "past_len")
                      : ctx.EmitConstant(Tensor::Scalar<int64_t>(0), "no_past");
  if (ctx.HasInput(4)) k = ctx.Emit("Concat", {ctx.input(4), k}, AttrMap{{"axis", int64_t{2}}}, "present_key");
  if (ctx.HasInput(5)) v = ctx.Emit("Concat", {ctx.input(5), v}, AttrMap{{"axis", int64_t{2}}}, "present_value");
  const std::string present_key = k, present_value = v;
  // Grouped heads: K/V head h serves query heads h * reps .. (h + 1) * reps - 1.
  if (q_heads != kv_heads) {
    if (q_heads < 1 || kv_heads < 1) return ctx.UnknownUntilRunTime("query and key heads whose counts are unknown until run time");
    if (q_heads % kv_heads != 0) {
      return ctx.Error(std::to_string(q_heads) + " query heads do not share " + std::to_string(kv_heads) + " key heads");
    }
    const int64_t reps = q_heads / kv_heads;
    auto repeat = [&](const std::string& t, const std::string& tag) {
      const std::string wide = ctx.Emit("ExpandDims", {t}, AttrMap{{"axis", int64_t{2}}}, tag + "/wide");
      const std::string target = Joined(ctx, {DimsOf(ctx, t, 0, 2, tag + "/bh"), IntsConstant(ctx, {reps}, tag + "/reps"),
                                              DimsOf(ctx, t, 2, 4, tag + "/sd")},
                                        tag + "/target");
      const std::string tiled = ctx.Emit("Expand", {wide, target}, {}, tag + "/tiled");
      const std::string shape = Joined(ctx, {DimsOf(ctx, t, 0, 1, tag + "/b"), IntsConstant(ctx, {q_heads}, tag + "/heads"),
                                             DimsOf(ctx, t, 2, 4, tag + "/sd2")},
                                       tag + "/shape");
      return ctx.Emit("Reshape", {tiled, shape}, {}, tag);
    };
    k = repeat(k, "k_shared");
    v = repeat(v, "v_shared");
  }
  // The scale: given, else 1 / sqrt(the head size).
  std::string scale;
  if (ctx.HasAttr("scale")) {
    LS_ASSIGN_OR_RETURN(float given, ctx.FloatAttr("scale", 1.0f));
    scale = ctx.EmitConstant(Scalar(dtype, given), "scale");
  } else {
    const std::string head_size = ctx.Emit(
        "Cast", {ctx.Emit("Reshape", {DimsOf(ctx, q, 3, 4, "head_dims")}, AttrMap{{"shape", std::vector<int64_t>{}}}, "head_size")},
        AttrMap{{"dtype", dtype}}, "head_size_real");
    scale = ctx.Emit("Reciprocal", {ctx.Emit("Sqrt", {head_size}, {}, "sqrt_head_size")}, {}, "scale");
  }
  std::string scores = ctx.Emit("Mul", {ctx.Emit("BatchMatMul", {q, k}, AttrMap{{"transpose_b", true}}, "qk"), scale}, {}, "scaled");
  const std::string raw = scores;
  if (softcap > 0) {
    const std::string cap = ctx.EmitConstant(Scalar(dtype, softcap), "softcap");
    scores = ctx.Emit("Mul", {ctx.Emit("Tanh", {ctx.Emit("Div", {scores, cap}, {}, "over_cap")}, {}, "tanh_cap"), cap}, {}, "capped");
  }
  const std::string capped = scores;
  if (ctx.HasInput(3)) {
    LS_ASSIGN_OR_RETURN(DType mask_dtype, InputDType(ctx, 3));
    const std::string bias = mask_dtype == DType::kBool ? MaskBias(ctx, ctx.Emit("Not", {ctx.input(3)}, {}, "masked"), dtype, "mask_bias")
                                                        : ctx.input(3);
    scores = ctx.Emit("Add", {scores, bias}, {}, "masked_scores");
  }
  if (causal != 0) {
    // Key j is hidden from query i where j > i + the past's length (as onnxruntime aligns it).
    const std::string queries = ctx.Emit("Reshape", {DimsOf(ctx, q, 2, 3, "q_len_dims")}, AttrMap{{"shape", std::vector<int64_t>{}}}, "q_len");
    const std::string keys = ctx.Emit("Reshape", {DimsOf(ctx, k, 2, 3, "kv_len_dims")}, AttrMap{{"shape", std::vector<int64_t>{}}}, "kv_len");
    const std::string zero = ctx.EmitConstant(Tensor::Scalar<int64_t>(0), "zero_index");
    const std::string one = ctx.EmitConstant(Tensor::Scalar<int64_t>(1), "one_index");
    const std::string rows =
        ctx.Emit("Add", {ctx.Emit("Range", {zero, queries, one}, {}, "query_index"), past_len}, {}, "last_key");
    const std::string masked = ctx.Emit(
        "Greater", {ctx.Emit("Range", {zero, keys, one}, {}, "key_index"), ctx.Emit("ExpandDims", {rows}, AttrMap{{"axis", int64_t{1}}}, "last_key_column")},
        {}, "future");
    scores = ctx.Emit("Add", {scores, MaskBias(ctx, masked, dtype, "causal_bias")}, {}, "causal_scores");
  }
  const std::string weights = ctx.Emit("Softmax", {scores}, {}, "weights");
  std::string y = ctx.Emit("BatchMatMul", {weights, v}, {}, rank == 3 ? "per_head" : "");
  if (rank == 3) y = MergeHeads(ctx, y, "merged");
  outputs->push_back(y);
  outputs->push_back(present_key);
  outputs->push_back(present_value);
  outputs->push_back(qk_mode == 0 ? raw : qk_mode == 1 ? capped : qk_mode == 2 ? scores : weights);
  return Status::Ok();
}

}  // namespace lockstep::onnx_import
