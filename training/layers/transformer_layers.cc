// The layers of transformers, on sequences of tokens ([tokens, dimension] per example):
// patch_embedding (an image's square patches, each projected: a ViT's tokens),
// position_embedding (a learned vector added per position), multi_head_attention (scaled
// dot-product self-attention) and transformer_encoder (attention and a feed-forward layer, each
// with a layer norm and a residual connection, pre- or post-norm). The last two take the token
// ids as an optional second input: keys whose id is padding_id are then masked out. Every product runs through
// WeightNodes, so precision bfloat16 makes each a bf16 one, attention's included.
#include <cmath>
#include <limits>

#include "training/layers/layer_kind.h"
#include "training/layers/layer_ops.h"

namespace lockstep::training {
namespace {

Status CheckTokens(const LayerPlan& p) {
  if (p.inputs[0].size() == 2) return Status::Ok();
  return InvalidArgument(p.path + ": " + ALayer(p.layer.type) + " needs an input of [tokens, dimension], got " +
                         ShapeString(p.inputs[0]) + "; a patch_embedding or an embedding makes one");
}

// A second input, the token ids [tokens] the padding mask comes from: the model's input.
Status CheckMaskInput(const LayerPlan& p) {
  if (p.inputs.size() < 2) return Status::Ok();
  if (p.sources[1] != -1) {
    return InvalidArgument(p.path + ".inputs[1]: the padding mask's ids are the model's input (\"input\"), not a "
                           "layer's output");
  }
  if (p.inputs[1] == std::vector<int64_t>{p.inputs[0][0]}) return Status::Ok();
  return InvalidArgument(p.path + ".inputs[1]: the ids of the padding mask must be [" + std::to_string(p.inputs[0][0]) +
                         "], one per token, got " + ShapeString(p.inputs[1]));
}

Status CheckHeads(const LayerPlan& p) {
  const int64_t d = p.inputs[0][1];
  if (d % p.layer.heads == 0) return Status::Ok();
  return InvalidArgument(p.path + ".heads: " + std::to_string(p.layer.heads) + " heads do not divide the dimension " +
                         std::to_string(d));
}

void AddAttentionWeights(const std::string& prefix, int64_t d, const std::string& initializer,
                         std::vector<WeightInfo>& weights) {
  for (const char* part : {"query", "key", "value", "output"}) {
    AddDenseWeights(prefix + "/" + part, d, d, initializer, weights);
  }
}

// The padding mask of the token ids `ids` [batch, t] (float, as the features come): 0 for a
// token, -1e9 for one whose id is the layer's padding_id, as [batch, 1, 1, t], added to the
// scores so that no query attends to a padded key.
std::string PaddingMaskOps(const LayerGraph& b, const std::string& ids, int64_t t, const std::string& node) {
  const std::string padding = b.g.Const(node + "/padding_id", Tensor::Scalar<float>(static_cast<float>(b.layer.padding_id)));
  AttrMap to_float;
  to_float.Set("dtype", DType::kFloat32);
  const std::string padded =
      b.g.Op("Cast", {b.g.Op("Equal", {ids, padding}, {}, node + "/padded")}, to_float, node + "/padded_float");
  const std::string masked = b.g.Op(
      "Mul", {padded, b.g.Const(node + "/mask_value", Tensor::Scalar<float>(-1e9f))}, {}, node + "/mask_values");
  return ReshapeOps(b, masked, {-1, 1, 1, t}, node + "/mask");
}

// The mask from the layer's second input, or "".
std::string MaskOf(const LayerGraph& b) {
  return b.inputs.size() < 2 ? "" : PaddingMaskOps(b, b.inputs[1], b.input_shapes[0][0], b.node);
}

// Self-attention on x [batch, t, d] with `heads` heads of d / heads: softmax(q kᵀ / √(d / heads)
// + mask) v per head, the heads joined and projected. `mask` (PaddingMaskOps) may be "". Weights
// under `prefix`, nodes under `node`.
std::string AttentionOps(const LayerGraph& b, const std::string& x, int64_t t, int64_t d, int64_t heads,
                         const std::string& prefix, const std::string& node, const std::string& mask) {
  const int64_t dh = d / heads;
  const std::string rows = ReshapeOps(b, x, {-1, d}, node + "/rows");
  AttrMap to_heads;
  to_heads.Set("perm", std::vector<int64_t>{0, 2, 1, 3});  // [batch, t, heads, dh] <-> [batch, heads, t, dh]
  auto heads_of = [&](const std::string& part) {
    const std::string y = DenseOps(b, rows, prefix + "/" + part, node + "/" + part);
    return b.g.Op("Transpose", {ReshapeOps(b, y, {-1, t, heads, dh}, node + "/" + part + "/split")}, to_heads,
                  node + "/" + part + "/heads");
  };
  // The query scaled before its product, as Keras and PyTorch do.
  const std::string scale = b.g.Const(node + "/scale", Tensor::Scalar<float>(1.0f / std::sqrt(static_cast<float>(dh))));
  const std::string q = b.g.Op("Mul", {heads_of("query"), scale}, {}, node + "/query/scaled");
  const std::string k = heads_of("key"), v = heads_of("value");
  AttrMap against_keys = b.weights.ProductAttrs({});
  against_keys.Set("transpose_b", true);
  std::string scores = b.g.Op("BatchMatMul", {q, k}, against_keys, node + "/scores");
  if (!mask.empty()) scores = b.g.Op("Add", {scores, mask}, {}, node + "/masked_scores");
  const std::string weights = b.g.Op("Softmax", {scores}, {}, node + "/weights");
  const std::string context = b.g.Op("BatchMatMul", {weights, v}, b.weights.ProductAttrs({}), node + "/context");
  const std::string joined =
      ReshapeOps(b, b.g.Op("Transpose", {context}, to_heads, node + "/join"), {-1, d}, node + "/joined");
  return ReshapeOps(b, DenseOps(b, joined, prefix + "/output", node + "/output"), {-1, t, d}, node);
}

// An image's non-overlapping patch_size x patch_size patches, each projected to `dimension`
// (a convolution of that kernel and stride), as [tokens, dimension] in row-major patch order.
LayerKind PatchEmbedding() {
  LayerKind k{.type = "patch_embedding"};
  k.read = [](ConfigFields& f, LayerConfig& l) {
    f.Get("patch_size", l.patch_size, 1, 256);
    f.Get("dimension", l.dimension, 1);
    f.Get("initializer", l.initializer, kInitializerNames);
  };
  k.check = [](ConfigFields& f, const LayerConfig& l) {
    if (l.patch_size == 0 || l.dimension == 0) {
      f.Fail("is required for a patch_embedding layer", l.patch_size == 0 ? "patch_size" : "dimension");
    }
  };
  k.write = [](const LayerConfig& l, Json& out) {
    out.update({{"patch_size", l.patch_size}, {"dimension", l.dimension}, {"initializer", l.initializer}});
  };
  k.plan = [](const LayerPlan& p) -> StatusOr<PlannedLayer> {
    const std::vector<int64_t>& in = p.inputs[0];
    const int64_t ps = p.layer.patch_size, d = p.layer.dimension;
    if (in.size() != 3) {
      return InvalidArgument(p.path + ": a patch_embedding layer needs an input of [height, width, channels], got " +
                             ShapeString(in) + "; set model.input_shape (e.g. [28, 28, 1])");
    }
    if (in[0] % ps != 0 || in[1] % ps != 0) {
      return InvalidArgument(p.path + ".patch_size: " + std::to_string(ps) + " does not divide the image " +
                             ShapeString(in));
    }
    PlannedLayer out{.shape = {(in[0] / ps) * (in[1] / ps), d}};
    out.weights.push_back({p.name + "/kernel", Shape{ps, ps, in[2], d}, ps * ps * in[2], d,
                           InitializerOr(p.layer, "glorot_uniform"), true});
    out.weights.push_back({p.name + "/bias", Shape{d}, ps * ps * in[2], d, "zeros"});
    return out;
  };
  k.build = [](const LayerGraph& b) {
    const int64_t ps = b.layer.patch_size;
    AttrMap attrs = b.weights.ProductAttrs({});
    attrs.Set("strides", std::vector<int64_t>{ps, ps});
    attrs.Set("padding", std::string("VALID"));
    std::string y = b.g.Op("Conv2D", {b.inputs[0], b.weights.ForProduct(b.name + "/kernel")}, attrs, b.node + "/Conv2D");
    y = b.g.Op("BiasAdd", {y, b.weights.Get(b.name + "/bias")}, {}, b.node + "/BiasAdd");
    const std::vector<int64_t>& image = b.input_shapes[0];
    return ReshapeOps(b, y, {-1, (image[0] / ps) * (image[1] / ps), b.layer.dimension}, b.node);
  };
  return k;
}

// A learned vector per position, added to the tokens.
LayerKind PositionEmbedding() {
  LayerKind k{.type = "position_embedding"};
  k.read = [](ConfigFields& f, LayerConfig& l) { f.Get("initializer", l.initializer, kInitializerNames); };
  k.write = [](const LayerConfig& l, Json& out) { out["initializer"] = l.initializer; };
  k.plan = [](const LayerPlan& p) -> StatusOr<PlannedLayer> {
    LS_RETURN_IF_ERROR(CheckTokens(p));
    const int64_t t = p.inputs[0][0], d = p.inputs[0][1];
    PlannedLayer out{.shape = p.inputs[0]};
    out.weights.push_back({p.name + "/embeddings", Shape{t, d}, t, d, InitializerOr(p.layer, "glorot_uniform")});
    return out;
  };
  k.build = [](const LayerGraph& b) {
    return b.g.Op("Add", {b.inputs[0], b.weights.Get(b.name + "/embeddings")}, {}, b.node);
  };
  return k;
}

// The keys multi_head_attention and transformer_encoder share, and their inputs' checks.
void ReadAttentionKeys(ConfigFields& f, LayerConfig& l) {
  f.Get("heads", l.heads, 1, 1024);
  f.Get("padding_id", l.padding_id, std::numeric_limits<int64_t>::min());
  f.Get("initializer", l.initializer, kInitializerNames);
}

void WriteAttentionKeys(const LayerConfig& l, Json& out) {
  out.update({{"heads", l.heads}, {"padding_id", l.padding_id}, {"initializer", l.initializer}});
}

Status CheckAttentionInputs(const LayerPlan& p) {
  LS_RETURN_IF_ERROR(CheckTokens(p));
  LS_RETURN_IF_ERROR(CheckHeads(p));
  return CheckMaskInput(p);
}

// With a second input, the token ids: keys whose id is padding_id are masked out.
LayerKind MultiHeadAttention() {
  LayerKind k{.type = "multi_head_attention", .max_inputs = 2};
  k.read = ReadAttentionKeys;
  k.check = [](ConfigFields& f, const LayerConfig& l) {
    if (l.heads == 0) f.Fail("is required for a multi_head_attention layer", "heads");
  };
  k.write = WriteAttentionKeys;
  k.plan = [](const LayerPlan& p) -> StatusOr<PlannedLayer> {
    LS_RETURN_IF_ERROR(CheckAttentionInputs(p));
    PlannedLayer out{.shape = p.inputs[0]};
    AddAttentionWeights(p.name, p.inputs[0][1], InitializerOr(p.layer, "glorot_uniform"), out.weights);
    return out;
  };
  k.build = [](const LayerGraph& b) {
    const std::vector<int64_t>& in = b.input_shapes[0];
    return AttentionOps(b, b.inputs[0], in[0], in[1], b.layer.heads, b.name, b.node, MaskOf(b));
  };
  return k;
}

// Pre-norm (norm_first, ViT's): x + attention(norm1(x)), then y + mlp(norm2(y)). Post-norm
// (BERT's): norm1(x + attention(x)), then norm2(y + mlp(y)). The feed-forward layer is dense
// mlp_dim with GELU, then dense back to the dimension, token by token.
LayerKind TransformerEncoder() {
  LayerKind k{.type = "transformer_encoder", .max_inputs = 2};
  k.read = [](ConfigFields& f, LayerConfig& l) {
    ReadAttentionKeys(f, l);
    f.Get("mlp_dim", l.mlp_dim, 1);
    f.Get("norm_first", l.norm_first);
    f.Get("epsilon", l.epsilon, 0.0, 1.0, true);
  };
  k.check = [](ConfigFields& f, const LayerConfig& l) {
    if (l.heads == 0 || l.mlp_dim == 0) {
      f.Fail("is required for a transformer_encoder layer", l.heads == 0 ? "heads" : "mlp_dim");
    }
  };
  k.write = [](const LayerConfig& l, Json& out) {
    WriteAttentionKeys(l, out);
    out.update({{"mlp_dim", l.mlp_dim}, {"norm_first", l.norm_first}, {"epsilon", l.epsilon}});
  };
  k.plan = [](const LayerPlan& p) -> StatusOr<PlannedLayer> {
    LS_RETURN_IF_ERROR(CheckAttentionInputs(p));
    const int64_t d = p.inputs[0][1];
    const std::string init = InitializerOr(p.layer, "glorot_uniform");
    PlannedLayer out{.shape = p.inputs[0]};
    AddNormWeights(p.name + "/norm1", d, out.weights);
    AddAttentionWeights(p.name + "/attention", d, init, out.weights);
    AddNormWeights(p.name + "/norm2", d, out.weights);
    AddDenseWeights(p.name + "/mlp1", d, p.layer.mlp_dim, init, out.weights);
    AddDenseWeights(p.name + "/mlp2", p.layer.mlp_dim, d, init, out.weights);
    return out;
  };
  k.build = [](const LayerGraph& b) {
    const int64_t t = b.input_shapes[0][0], d = b.input_shapes[0][1];
    const double eps = b.layer.epsilon;
    const std::string& w = b.name;
    const std::string& n = b.node;
    const std::string mask = MaskOf(b);
    auto attention = [&](const std::string& x) {
      return AttentionOps(b, x, t, d, b.layer.heads, w + "/attention", n + "/attention", mask);
    };
    auto mlp = [&](const std::string& x) {
      const std::string rows = ReshapeOps(b, x, {-1, d}, n + "/mlp/rows");
      const std::string hidden = b.g.Op("Gelu", {DenseOps(b, rows, w + "/mlp1", n + "/mlp1")}, {}, n + "/mlp1/Gelu");
      return ReshapeOps(b, DenseOps(b, hidden, w + "/mlp2", n + "/mlp2"), {-1, t, d}, n + "/mlp");
    };
    const std::string& x = b.inputs[0];
    if (b.layer.norm_first) {
      const std::string y =
          b.g.Op("Add", {x, attention(LayerNormOps(b, x, w + "/norm1", n + "/norm1", eps))}, {}, n + "/residual1");
      return b.g.Op("Add", {y, mlp(LayerNormOps(b, y, w + "/norm2", n + "/norm2", eps))}, {}, n);
    }
    const std::string y =
        LayerNormOps(b, b.g.Op("Add", {x, attention(x)}, {}, n + "/residual1"), w + "/norm1", n + "/norm1", eps);
    return LayerNormOps(b, b.g.Op("Add", {y, mlp(y)}, {}, n + "/residual2"), w + "/norm2", n, eps);
  };
  return k;
}

}  // namespace

void AddTransformerLayers(std::vector<LayerKind>& kinds) {
  kinds.push_back(PatchEmbedding());
  kinds.push_back(PositionEmbedding());
  kinds.push_back(MultiHeadAttention());
  kinds.push_back(TransformerEncoder());
}

}  // namespace lockstep::training
