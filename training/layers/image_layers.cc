// The layers of images ([height, width, channels] per example, NHWC as Keras): conv2d,
// depthwise_conv2d, upsampling2d, the windowed pools and the global pools. Windows follow TensorFlow's "valid" / "same" padding.
#include <algorithm>
#include <cmath>

#include "training/layers/layer_kind.h"
#include "training/layers/layer_ops.h"

namespace lockstep::training {
namespace {

// One spatial dimension of a window's output, as the runtime's ops compute it (runtime/ops/window.h).
StatusOr<int64_t> WindowOutput(const std::string& path, int64_t in, int64_t k, int64_t stride, bool same) {
  if (same) return (in + stride - 1) / stride;
  if (in < k) {
    return InvalidArgument(path + ": window " + std::to_string(k) + " is larger than its input (" +
                           std::to_string(in) + ") with padding \"valid\"");
  }
  return (in - k) / stride + 1;
}

AttrMap WindowAttrs(const LayerConfig& layer, bool pool) {
  AttrMap attrs;
  attrs.Set("strides", std::vector<int64_t>{layer.strides, layer.strides});
  attrs.Set("padding", std::string(layer.padding == "same" ? "SAME" : "VALID"));
  if (pool) attrs.Set("ksize", std::vector<int64_t>{layer.pool_size, layer.pool_size});
  if (layer.dilation != 1) attrs.Set("dilations", std::vector<int64_t>{layer.dilation, layer.dilation});
  return attrs;
}

Status CheckImage(const LayerPlan& p, const char* hint) {
  if (p.inputs[0].size() == 3) return Status::Ok();
  return InvalidArgument(p.path + ": a " + p.layer.type + " layer needs an input of [height, width, channels], got " +
                         ShapeString(p.inputs[0]) + hint);
}

// The output of a window k wide (its taps the layer's dilation apart) at the layer's strides and
// padding over the input image.
StatusOr<std::vector<int64_t>> WindowShape(const LayerPlan& p, int64_t k, int64_t channels) {
  k = (k - 1) * p.layer.dilation + 1;
  LS_RETURN_IF_ERROR(CheckImage(p, "; set model.input_shape (e.g. [8, 8, 1])"));
  const bool same = p.layer.padding == "same";
  LS_ASSIGN_OR_RETURN(const int64_t h, WindowOutput(p.path, p.inputs[0][0], k, p.layer.strides, same));
  LS_ASSIGN_OR_RETURN(const int64_t w, WindowOutput(p.path, p.inputs[0][1], k, p.layer.strides, same));
  return std::vector<int64_t>{h, w, channels};
}

// The keys conv2d and depthwise_conv2d share.
void ReadConvKeys(ConfigFields& f, LayerConfig& l) {
  f.Get("kernel_size", l.kernel_size, 1, 64);
  f.Get("strides", l.strides, 1, 64);
  f.Get("padding", l.padding, {"valid", "same"});
  f.Get("activation", l.activation, ActivationNames());
  f.Get("initializer", l.initializer, kInitializerNames);
  f.Get("use_bias", l.use_bias);
}

void WriteConvKeys(const LayerConfig& l, Json& out) {
  out.update({{"kernel_size", l.kernel_size},
              {"strides", l.strides},
              {"padding", l.padding},
              {"activation", l.activation},
              {"initializer", l.initializer},
              {"use_bias", l.use_bias}});
}

// With groups (ResNeXt's, ShuffleNet's, Keras's Conv2D(groups=)), the input channels are cut
// into that many groups, each convolved with its own filters / groups filters, and the outputs
// laid side by side: a Slice of the input per group, a Conv2D each, a Concat; as the ONNX
// importer translates a grouped Conv, and as an ONNX export writes one back.
LayerKind Conv2D() {
  LayerKind k{.type = "conv2d"};
  k.read = [](ConfigFields& f, LayerConfig& l) {
    f.Get("filters", l.filters, 1);
    f.Get("dilation", l.dilation, 1, 64);
    f.Get("groups", l.groups, 1, 1024);
    ReadConvKeys(f, l);
  };
  k.check = [](ConfigFields& f, const LayerConfig& l) {
    if (l.filters == 0) f.Fail("is required for a conv2d layer", "filters");
    if (l.filters % l.groups != 0) {
      f.Fail("must divide filters (" + std::to_string(l.filters) + "), got " + std::to_string(l.groups), "groups");
    }
  };
  k.write = [](const LayerConfig& l, Json& out) {
    out.update({{"filters", l.filters}, {"dilation", l.dilation}, {"groups", l.groups}});
    WriteConvKeys(l, out);
  };
  k.plan = [](const LayerPlan& p) -> StatusOr<PlannedLayer> {
    const int64_t kk = p.layer.kernel_size, filters = p.layer.filters, groups = p.layer.groups;
    LS_ASSIGN_OR_RETURN(std::vector<int64_t> shape, WindowShape(p, kk, filters));
    const int64_t cin = p.inputs[0][2];
    if (cin % groups != 0) {
      return InvalidArgument(p.path + ": groups " + std::to_string(groups) + " must divide the input's " +
                             std::to_string(cin) + " channels");
    }
    PlannedLayer out{.shape = shape};
    // Keras's fans for a grouped kernel [k, k, cin / groups, filters].
    const int64_t fan_in = kk * kk * (cin / groups), fan_out = kk * kk * filters;
    for (int64_t g = 0; g < groups; ++g) {
      out.weights.push_back({GroupKernelName(p.name, groups, g), Shape{kk, kk, cin / groups, filters / groups}, fan_in,
                             fan_out, InitializerOr(p.layer, "glorot_uniform"), true});
    }
    if (p.layer.use_bias) out.weights.push_back({p.name + "/bias", Shape{filters}, fan_in, fan_out, "zeros"});
    return out;
  };
  k.build = [](const LayerGraph& b) {
    const int64_t groups = b.layer.groups;
    const AttrMap attrs = b.weights.ProductAttrs(WindowAttrs(b.layer, false));
    if (groups == 1) {
      const std::string y = b.g.Op("Conv2D", {b.inputs[0], b.weights.ForProduct(GroupKernelName(b.name, 1, 0))}, attrs,
                                   b.node + "/Conv2D");
      return BiasOps(b, y, b.name, b.node, b.layer.use_bias);
    }
    const int64_t cin = b.input_shapes[0][2] / groups;
    auto ints = [&](const std::string& name, int64_t v) {
      return b.g.Const(name, Tensor::FromVector<int64_t>(Shape{1}, {v}));
    };
    const std::string axis = ints(b.node + "/channel_axis", 3);
    std::vector<std::string> parts;
    for (int64_t g = 0; g < groups; ++g) {
      const std::string tag = b.node + "/group_" + std::to_string(g);
      const std::string x = b.g.Op(
          "Slice", {b.inputs[0], ints(tag + "/begin", g * cin), ints(tag + "/end", (g + 1) * cin), axis}, {}, tag + "/input");
      parts.push_back(b.g.Op("Conv2D", {x, b.weights.ForProduct(GroupKernelName(b.name, groups, g))}, attrs, tag + "/Conv2D"));
    }
    AttrMap channels;
    channels.Set("axis", int64_t{3});
    return BiasOps(b, b.g.Op("Concat", parts, channels, b.node + "/Conv2D"), b.name, b.node, b.layer.use_bias);
  };
  return k;
}

// Each input channel convolved with its own depth_multiplier filters (MobileNet's, Keras's
// DepthwiseConv2D); channels never mix. Its filter is not a product on the matmul core, so it
// stays float32 under precision bfloat16.
LayerKind DepthwiseConv2D() {
  LayerKind k{.type = "depthwise_conv2d"};
  k.read = [](ConfigFields& f, LayerConfig& l) {
    f.Get("depth_multiplier", l.depth_multiplier, 1, 64);
    ReadConvKeys(f, l);
  };
  k.write = [](const LayerConfig& l, Json& out) {
    out["depth_multiplier"] = l.depth_multiplier;
    WriteConvKeys(l, out);
  };
  k.plan = [](const LayerPlan& p) -> StatusOr<PlannedLayer> {
    const int64_t kk = p.layer.kernel_size, m = p.layer.depth_multiplier;
    const int64_t cin = p.inputs[0].size() == 3 ? p.inputs[0][2] : 0;
    LS_ASSIGN_OR_RETURN(std::vector<int64_t> shape, WindowShape(p, kk, cin * m));
    PlannedLayer out{.shape = shape};
    out.weights.push_back({p.name + "/kernel", Shape{kk, kk, cin, m}, kk * kk, kk * kk * m,
                           InitializerOr(p.layer, "glorot_uniform")});
    if (p.layer.use_bias) out.weights.push_back({p.name + "/bias", Shape{cin * m}, kk * kk, kk * kk * m, "zeros"});
    return out;
  };
  k.build = [](const LayerGraph& b) {
    const std::string y = b.g.Op("DepthwiseConv2D", {b.inputs[0], b.weights.Get(b.name + "/kernel")},
                                 WindowAttrs(b.layer, false), b.node + "/DepthwiseConv2D");
    return BiasOps(b, y, b.name, b.node, b.layer.use_bias);
  };
  return k;
}

// max_pool2d and avg_pool2d.
LayerKind Pool(std::string_view type, std::string (*build)(const LayerGraph&)) {
  LayerKind k{.type = type};
  k.read = [](ConfigFields& f, LayerConfig& l) {
    f.Get("pool_size", l.pool_size, 1, 64);
    l.strides = l.pool_size;
    f.Get("strides", l.strides, 1, 64);
    f.Get("padding", l.padding, {"valid", "same"});
  };
  k.write = [](const LayerConfig& l, Json& out) {
    out.update({{"pool_size", l.pool_size}, {"strides", l.strides}, {"padding", l.padding}});
  };
  k.plan = [](const LayerPlan& p) -> StatusOr<PlannedLayer> {
    LS_ASSIGN_OR_RETURN(std::vector<int64_t> shape,
                        WindowShape(p, p.layer.pool_size, p.inputs[0].size() == 3 ? p.inputs[0][2] : 0));
    return PlannedLayer{.shape = shape};
  };
  k.build = build;
  return k;
}

// global_avg_pool and global_max_pool: [height, width, channels] -> [channels]; the average
// also of tokens, [tokens, dimension] -> [dimension] (a ViT's mean pooling).
LayerKind GlobalPool(std::string_view type, std::string (*build)(const LayerGraph&)) {
  LayerKind k{.type = type};
  k.read = [](ConfigFields&, LayerConfig&) {};
  k.write = [](const LayerConfig&, Json&) {};
  k.plan = [](const LayerPlan& p) -> StatusOr<PlannedLayer> {
    const bool tokens = p.layer.type == "global_avg_pool";
    if (tokens && p.inputs[0].size() == 2) return PlannedLayer{.shape = {p.inputs[0][1]}};
    if (p.inputs[0].size() == 3) return PlannedLayer{.shape = {p.inputs[0][2]}};
    return InvalidArgument(p.path + ": " + ALayer(p.layer.type) + " needs an input of [height, width, channels]" +
                           (tokens ? " or [tokens, dimension]" : "") + ", got " + ShapeString(p.inputs[0]));
  };
  k.build = build;
  return k;
}

// The [in * size, in] matrix of bilinear upsampling along one axis, with half-pixel centres
// (TensorFlow 2's tf.image.resize, Keras's UpSampling2D(interpolation="bilinear"), ONNX's Resize
// linear half_pixel): output i samples the input at (i + 0.5) / size - 0.5, between its two
// neighbours, clamped at the edges. Weights k / (2 size) and their complements: exact in float.
Tensor BilinearWeights(int64_t in, int64_t size) {
  Tensor a(DType::kFloat32, Shape{in * size, in});
  auto w = a.mutable_data<float>();
  for (int64_t i = 0; i < in * size; ++i) {
    const double at = (static_cast<double>(i) + 0.5) / static_cast<double>(size) - 0.5;
    const double below = std::floor(at), frac = at - below;
    const int64_t lo = std::clamp<int64_t>(static_cast<int64_t>(below), 0, in - 1);
    const int64_t hi = std::clamp<int64_t>(static_cast<int64_t>(below) + 1, 0, in - 1);
    w[static_cast<size_t>(i * in + lo)] += static_cast<float>(1.0 - frac);
    w[static_cast<size_t>(i * in + hi)] += static_cast<float>(frac);
  }
  return a;
}

// Bilinear upsampling as two products, one per axis: each row of pixels along the axis times
// the axis's weights (BilinearWeights), the image turned so that the axis comes last.
std::string BilinearOps(const LayerGraph& b) {
  const std::vector<int64_t>& in = b.input_shapes[0];
  const int64_t s = b.layer.size, h = in[0], w = in[1], c = in[2];
  auto reshape = [&](const std::string& x, std::vector<int64_t> shape, const std::string& name) {
    AttrMap attrs;
    attrs.Set("shape", std::move(shape));
    return b.g.Op("Reshape", {x}, attrs, name);
  };
  auto transpose = [&](const std::string& x, std::vector<int64_t> perm, const std::string& name) {
    AttrMap attrs;
    attrs.Set("perm", std::move(perm));
    return b.g.Op("Transpose", {x}, attrs, name);
  };
  AttrMap against_weights;
  against_weights.Set("transpose_b", true);
  // [N, h, w, c] -> [N, w, c, h]: rows along the height, then [N * w * c, h * s].
  std::string y = reshape(transpose(b.inputs[0], {0, 2, 3, 1}, b.node + "/height_last"), {-1, h}, b.node + "/columns");
  y = b.g.Op("MatMul", {y, b.g.Const(b.node + "/height_weights", BilinearWeights(h, s))}, against_weights,
             b.node + "/height");
  // [N, w, c, h * s] -> [N, h * s, c, w]: rows along the width, then [N * h * s * c, w * s].
  y = transpose(reshape(y, {-1, w, c, h * s}, b.node + "/heightened"), {0, 3, 2, 1}, b.node + "/width_last");
  y = b.g.Op("MatMul", {reshape(y, {-1, w}, b.node + "/rows"), b.g.Const(b.node + "/width_weights", BilinearWeights(w, s))},
             against_weights, b.node + "/width");
  // [N, h * s, c, w * s] -> [N, h * s, w * s, c].
  return transpose(reshape(y, {-1, h * s, c, w * s}, b.node + "/widened"), {0, 1, 3, 2}, b.node);
}

// Upsampling by an integer factor along height and width: [h, w, c] -> [h * size, w * size, c]
// (Keras's UpSampling2D). "nearest" repeats each pixel size x size times, built as a broadcast
// multiply by ones, [h, 1, w, 1, c] times [1, size, 1, size, 1], whose gradient sums each block
// back into its pixel; "bilinear" interpolates (BilinearOps). Neither has weights.
LayerKind UpSampling2D() {
  LayerKind k{.type = "upsampling2d"};
  k.read = [](ConfigFields& f, LayerConfig& l) {
    f.Get("size", l.size, 1, 64);
    f.Get("interpolation", l.interpolation, {"nearest", "bilinear"});
  };
  k.write = [](const LayerConfig& l, Json& out) { out.update({{"size", l.size}, {"interpolation", l.interpolation}}); };
  k.plan = [](const LayerPlan& p) -> StatusOr<PlannedLayer> {
    LS_RETURN_IF_ERROR(CheckImage(p, "; set model.input_shape (e.g. [8, 8, 1])"));
    const std::vector<int64_t>& in = p.inputs[0];
    return PlannedLayer{.shape = {in[0] * p.layer.size, in[1] * p.layer.size, in[2]}};
  };
  k.build = [](const LayerGraph& b) {
    if (b.layer.interpolation == "bilinear") return BilinearOps(b);
    const std::vector<int64_t>& in = b.input_shapes[0];
    const int64_t s = b.layer.size;
    AttrMap split;
    split.Set("shape", std::vector<int64_t>{-1, in[0], 1, in[1], 1, in[2]});
    const std::string blocks = b.g.Op("Reshape", {b.inputs[0]}, split, b.node + "/pixels");
    const std::string ones = b.g.Const(
        b.node + "/ones", Tensor::FromVector<float>(Shape{1, 1, s, 1, s, 1}, std::vector<float>(static_cast<size_t>(s * s), 1.0f)));
    AttrMap joined;
    joined.Set("shape", std::vector<int64_t>{-1, in[0] * s, in[1] * s, in[2]});
    return b.g.Op("Reshape", {b.g.Op("Mul", {blocks, ones}, {}, b.node + "/repeated")}, joined, b.node);
  };
  return k;
}

}  // namespace

void AddImageLayers(std::vector<LayerKind>& kinds) {
  kinds.push_back(Conv2D());
  kinds.push_back(DepthwiseConv2D());
  kinds.push_back(UpSampling2D());
  kinds.push_back(Pool("max_pool2d", [](const LayerGraph& b) {
    return b.g.Op("MaxPool2D", {b.inputs[0]}, WindowAttrs(b.layer, true), b.node);
  }));
  kinds.push_back(Pool("avg_pool2d", [](const LayerGraph& b) {
    return b.g.Op("AvgPool2D", {b.inputs[0]}, WindowAttrs(b.layer, true), b.node);
  }));
  kinds.push_back(GlobalPool("global_avg_pool", [](const LayerGraph& b) {
    AttrMap attrs;
    attrs.Set("axes", b.input_shapes[0].size() == 2 ? std::vector<int64_t>{1} : std::vector<int64_t>{1, 2});
    return b.g.Op("Mean", {b.inputs[0]}, attrs, b.node);
  }));
  // A max pool whose window is the whole image, then [batch, 1, 1, C] -> [batch, C].
  kinds.push_back(GlobalPool("global_max_pool", [](const LayerGraph& b) {
    const std::vector<int64_t>& image = b.input_shapes[0];
    AttrMap attrs;
    attrs.Set("ksize", std::vector<int64_t>{image[0], image[1]});
    attrs.Set("strides", std::vector<int64_t>{1, 1});
    attrs.Set("padding", std::string("VALID"));
    return b.g.Op("Flatten", {b.g.Op("MaxPool2D", {b.inputs[0]}, attrs, b.node + "/MaxPool2D")}, {}, b.node);
  }));
}

}  // namespace lockstep::training
