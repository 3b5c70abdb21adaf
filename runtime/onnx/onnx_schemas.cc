#include "runtime/onnx/onnx_schemas.h"

#include <algorithm>
#include <functional>
#include <utility>
#include <vector>

#include "onnx/defs/shape_inference.h"
#include "runtime/shape.h"
#include "runtime/window_pads.h"

namespace lockstep {
namespace {

using onnx::AttributeProto;
using onnx::InferenceContext;
using onnx::OpSchema;

const std::vector<std::string> kFloats = {"tensor(float16)", "tensor(float)", "tensor(double)", "tensor(bfloat16)"};
const std::vector<std::string> kIndices = {"tensor(int32)", "tensor(int64)"};

std::vector<std::string> Plus(std::vector<std::string> types, std::initializer_list<const char*> more) {
  types.insert(types.end(), more.begin(), more.end());
  return types;
}

// libonnx's inference of `op` at `version`, for a later schema whose change it does not affect.
onnx::InferenceFunction LibonnxInference(const char* op, int version) {
  const OpSchema* schema = onnx::OpSchemaRegistry::Schema(op, version);
  return schema != nullptr ? schema->GetTypeAndShapeInferenceFunction() : onnx::InferenceFunction();
}

// Output `out` of input 0's element type and rank, its dimensions left unknown: where what a
// later opset added (axes that pick dimensions, dilations) makes the sizes libonnx's inference
// would give wrong. Lockstep's own inference finds them when the model is compiled.
void ElemTypeAndRank(InferenceContext& ctx, size_t out) {
  onnx::propagateElemTypeFromInputToOutput(ctx, 0, out);
  if (!onnx::hasInputShape(ctx, 0)) return;
  auto* shape = ctx.getOutputType(out)->mutable_tensor_type()->mutable_shape();
  shape->clear_dim();
  for (int d = 0; d < onnx::getInputShape(ctx, 0).dim_size(); ++d) shape->add_dim();
}

// `fallback` unless `later_form` says the node uses what the later opset added.
onnx::InferenceFunction UnlessLaterForm(onnx::InferenceFunction fallback, std::function<bool(InferenceContext&)> later_form) {
  return [fallback = std::move(fallback), later_form = std::move(later_form)](InferenceContext& ctx) {
    if (later_form(ctx) || !fallback) {
      ElemTypeAndRank(ctx, 0);
      return;
    }
    fallback(ctx);
  };
}

// Output `out` of input `in`'s element type and of rank `rank` (-1: input `in`'s), its
// dimensions unknown.
void ElemTypeAndRankOf(InferenceContext& ctx, size_t in, size_t out, int rank) {
  if (ctx.getNumOutputs() <= out || ctx.getNumInputs() <= in || ctx.getInputType(in) == nullptr) return;
  onnx::propagateElemTypeFromInputToOutput(ctx, in, out);
  if (rank < 0 && !onnx::hasInputShape(ctx, in)) return;
  if (rank < 0) rank = onnx::getInputShape(ctx, in).dim_size();
  auto* shape = ctx.getOutputType(out)->mutable_tensor_type()->mutable_shape();
  shape->clear_dim();
  for (int d = 0; d < rank; ++d) shape->add_dim();
}

bool HasInput(InferenceContext& ctx, size_t i) { return ctx.getNumInputs() > i && ctx.getInputType(i) != nullptr; }

// Split, opset 18: equal parts (the last smaller) when num_outputs says, or the sizes input.
void InferSplit18(InferenceContext& ctx) {
  const size_t outputs = ctx.getNumOutputs();
  for (size_t k = 0; k < outputs; ++k) onnx::propagateElemTypeFromInputToOutput(ctx, 0, k);
  if (!onnx::hasInputShape(ctx, 0)) return;
  const auto& shape = onnx::getInputShape(ctx, 0);
  const int rank = shape.dim_size();
  int64_t axis = onnx::getAttribute(ctx, "axis", 0);
  if (axis < -rank || axis >= rank) fail_shape_inference("Split: axis ", axis, " is out of range for rank ", rank);
  if (axis < 0) axis += rank;
  const auto& dim = shape.dim(static_cast<int>(axis));
  const int64_t n = static_cast<int64_t>(outputs);
  const bool equal = !HasInput(ctx, 1) && dim.has_dim_value() && dim.dim_value() >= 0 &&
                     dim.dim_value() <= Shape::kMaxElements;
  const int64_t part = equal ? (dim.dim_value() + n - 1) / n : -1;
  for (int64_t k = 0; k < n; ++k) {
    auto* out = ctx.getOutputType(static_cast<size_t>(k))->mutable_tensor_type()->mutable_shape();
    *out = shape;
    auto* split = out->mutable_dim(static_cast<int>(axis));
    split->Clear();
    const int64_t size = k + 1 < n ? part : dim.dim_value() - part * (n - 1);
    if (equal && size >= 0) split->set_dim_value(size);
  }
}

constexpr int64_t kMaxPad = int64_t{1} << 40;

// libonnx 1.12 sizes a pool's output with ceil_mode by the formula alone; onnxruntime (as
// PyTorch, and ONNX's later inference) drops a last window that would start in the end's
// padding. The output dimensions it inferred are redone here as OnnxAxisPads pads the image.
onnx::InferenceFunction WithLastWindowInTheImage(onnx::InferenceFunction libonnx) {
  return [libonnx](InferenceContext& ctx) {
    if (libonnx) libonnx(ctx);
    if (onnx::getAttribute(ctx, "ceil_mode", 0) == 0 || !onnx::hasInputShape(ctx, 0)) return;
    const std::string auto_pad = onnx::getAttribute(ctx, "auto_pad", std::string("NOTSET"));
    const AutoPad mode = auto_pad == "VALID"        ? AutoPad::kValid
                         : auto_pad == "SAME_UPPER" ? AutoPad::kSameUpper
                         : auto_pad == "SAME_LOWER" ? AutoPad::kSameLower
                                                    : AutoPad::kNotSet;
    const auto& in = onnx::getInputShape(ctx, 0);
    const int spatial = in.dim_size() - 2;
    if (spatial < 1) return;
    auto ints = [&](const char* name, int64_t fallback, int n) {
      std::vector<int64_t> v(static_cast<size_t>(n), fallback);
      if (const AttributeProto* a = ctx.getAttribute(name); a != nullptr && a->ints_size() == n) {
        v.assign(a->ints().begin(), a->ints().end());
      }
      return v;
    };
    const std::vector<int64_t> kernel = ints("kernel_shape", 0, spatial), strides = ints("strides", 1, spatial),
                               dilations = ints("dilations", 1, spatial), pads = ints("pads", 0, 2 * spatial);
    for (size_t k = 0; k < ctx.getNumOutputs(); ++k) {
      auto* type = ctx.getOutputType(k);
      if (type == nullptr || !type->has_tensor_type() || type->tensor_type().shape().dim_size() != in.dim_size()) continue;
      auto* out = type->mutable_tensor_type()->mutable_shape();
      for (int d = 0; d < spatial; ++d) {
        const auto& dim = in.dim(2 + d);
        const size_t i = static_cast<size_t>(d);
        // Window attributes are bounded before inference (onnx_checks.cc); sizes and pads
        // beyond any tensor's are left to the checks that refuse them.
        if (!dim.has_dim_value() || dim.dim_value() < 0 || dim.dim_value() > Shape::kMaxElements || kernel[i] < 1 ||
            strides[i] < 1 || pads[i] < 0 || pads[spatial + i] < 0 || pads[i] > kMaxPad || pads[spatial + i] > kMaxPad) {
          continue;
        }
        const int64_t extent = (kernel[i] - 1) * dilations[i] + 1;
        const AxisPads p =
            OnnxAxisPads(dim.dim_value(), extent, strides[i], mode, {pads[i], pads[spatial + i]}, true);
        const int64_t room = dim.dim_value() + p.begin + p.end - extent;
        if (room >= 0) out->mutable_dim(2 + d)->set_dim_value(room / strides[i] + 1);
      }
    }
  };
}

OpSchema Named(const char* name, int since) {
  OpSchema s;
  s.SetName(name).SetDomain(onnx::ONNX_DOMAIN).SinceVersion(since);
  return s;
}

OpSchema Reduce(const char* name, int since, const std::vector<std::string>& types) {
  OpSchema s = Named(name, since);
  s.Input(0, "data", "", "T")
      .Input(1, "axes", "", "tensor(int64)", OpSchema::Optional)
      .Output(0, "reduced", "", "T")
      .TypeConstraint("T", types, "")
      .Attr("keepdims", "", AttributeProto::INT, int64_t{1})
      .Attr("noop_with_empty_axes", "", AttributeProto::INT, int64_t{0})
      .TypeAndShapeInferenceFunction(LibonnxInference("ReduceSum", 13));
  return s;
}

// An element-wise op of floats, its shape its input's.
OpSchema Unary(const char* name, int since) {
  OpSchema s = Named(name, since);
  s.Input(0, "X", "", "T").Output(0, "Y", "", "T").TypeConstraint("T", kFloats, "").TypeAndShapeInferenceFunction(
      onnx::propagateShapeAndTypeFromFirstInput);
  return s;
}

std::vector<OpSchema> MakeSchemas() {
  std::vector<OpSchema> all;
  const std::vector<std::string> numeric = OpSchema::all_numeric_types_with_bfloat();
  // Opset 18: every reduction takes its axes as an input (ReduceSum did from 13).
  for (const char* op : {"ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum",
                         "ReduceLogSumExp", "ReduceSumSquare"}) {
    all.push_back(Reduce(op, 18, numeric));
  }
  // Opset 20: ReduceMax and ReduceMin of booleans.
  for (const char* op : {"ReduceMax", "ReduceMin"}) all.push_back(Reduce(op, 20, Plus(numeric, {"tensor(bool)"})));

  OpSchema split = Named("Split", 18);
  split.Input(0, "input", "", "T")
      .Input(1, "split", "", "tensor(int64)", OpSchema::Optional)
      .Output(0, "outputs", "", "T", OpSchema::Variadic)
      .TypeConstraint("T", OpSchema::all_tensor_types_with_bfloat(), "")
      .Attr("axis", "", AttributeProto::INT, int64_t{0})
      .Attr("num_outputs", "", AttributeProto::INT, false)
      .TypeAndShapeInferenceFunction(InferSplit18);
  all.push_back(std::move(split));

  // Opset 18: Pad's axes input; 19 adds the 'wrap' mode (a value, not a signature).
  OpSchema pad = Named("Pad", 18);
  pad.Input(0, "data", "", "T")
      .Input(1, "pads", "", "tensor(int64)")
      .Input(2, "constant_value", "", "T", OpSchema::Optional)
      .Input(3, "axes", "", "Tind", OpSchema::Optional)
      .Output(0, "output", "", "T")
      .TypeConstraint("T", OpSchema::all_tensor_types_with_bfloat(), "")
      .TypeConstraint("Tind", kIndices, "")
      .Attr("mode", "", AttributeProto::STRING, std::string("constant"))
      .TypeAndShapeInferenceFunction(
          UnlessLaterForm(LibonnxInference("Pad", 13), [](InferenceContext& ctx) { return HasInput(ctx, 3); }));
  all.push_back(std::move(pad));

  OpSchema resize = Named("Resize", 18);
  resize.Input(0, "X", "", "T1")
      .Input(1, "roi", "", "T2", OpSchema::Optional)
      .Input(2, "scales", "", "tensor(float)", OpSchema::Optional)
      .Input(3, "sizes", "", "tensor(int64)", OpSchema::Optional)
      .Output(0, "Y", "", "T1")
      .TypeConstraint("T1", OpSchema::all_tensor_types_with_bfloat(), "")
      .TypeConstraint("T2", {"tensor(float16)", "tensor(float)", "tensor(double)"}, "")
      .Attr("antialias", "", AttributeProto::INT, int64_t{0})
      .Attr("axes", "", AttributeProto::INTS, false)
      .Attr("coordinate_transformation_mode", "", AttributeProto::STRING, std::string("half_pixel"))
      .Attr("cubic_coeff_a", "", AttributeProto::FLOAT, -0.75f)
      .Attr("exclude_outside", "", AttributeProto::INT, int64_t{0})
      .Attr("extrapolation_value", "", AttributeProto::FLOAT, 0.0f)
      .Attr("keep_aspect_ratio_policy", "", AttributeProto::STRING, std::string("stretch"))
      .Attr("mode", "", AttributeProto::STRING, std::string("nearest"))
      .Attr("nearest_mode", "", AttributeProto::STRING, std::string("round_prefer_floor"))
      .TypeAndShapeInferenceFunction(UnlessLaterForm(LibonnxInference("Resize", 13), [](InferenceContext& ctx) {
        const AttributeProto* policy = ctx.getAttribute("keep_aspect_ratio_policy");
        return ctx.getAttribute("axes") != nullptr || (policy != nullptr && policy->s() != "stretch");
      }));
  all.push_back(std::move(resize));

  // Opset 19: Cast's and CastLike's saturate (for float8 targets).
  for (bool like : {false, true}) {
    OpSchema cast = Named(like ? "CastLike" : "Cast", 19);
    cast.Input(0, "input", "", "T1");
    if (like) cast.Input(1, "target_type", "", "T2");
    cast.Output(0, "output", "", "T2")
        .TypeConstraint("T1", OpSchema::all_tensor_types_with_bfloat(), "")
        .TypeConstraint("T2", OpSchema::all_tensor_types_with_bfloat(), "")
        .Attr("saturate", "", AttributeProto::INT, int64_t{1})
        .TypeAndShapeInferenceFunction(like ? LibonnxInference("CastLike", 15) : LibonnxInference("Cast", 13));
    if (!like) cast.Attr("to", "", AttributeProto::INT);
    all.push_back(std::move(cast));
  }

  // Opset 19: AveragePool's dilations.
  OpSchema average = Named("AveragePool", 19);
  average.Input(0, "X", "", "T")
      .Output(0, "Y", "", "T")
      .TypeConstraint("T", kFloats, "")
      .Attr("auto_pad", "", AttributeProto::STRING, std::string("NOTSET"))
      .Attr("ceil_mode", "", AttributeProto::INT, int64_t{0})
      .Attr("count_include_pad", "", AttributeProto::INT, int64_t{0})
      .Attr("dilations", "", AttributeProto::INTS, false)
      .Attr("kernel_shape", "", AttributeProto::INTS)
      .Attr("pads", "", AttributeProto::INTS, false)
      .Attr("strides", "", AttributeProto::INTS, false)
      .TypeAndShapeInferenceFunction(UnlessLaterForm(LibonnxInference("AveragePool", 11), [](InferenceContext& ctx) {
        const AttributeProto* d = ctx.getAttribute("dilations");
        return d != nullptr && std::any_of(d->ints().begin(), d->ints().end(), [](int64_t v) { return v != 1; });
      }));
  all.push_back(std::move(average));

  all.push_back(Unary("Mish", 18));
  OpSchema gelu = Unary("Gelu", 20);
  gelu.Attr("approximate", "", AttributeProto::STRING, std::string("none"));
  all.push_back(std::move(gelu));

  // GroupNormalization: 18's scale and bias are per group, 21's per channel (and stash_type).
  for (int since : {18, 21}) {
    OpSchema group = Named("GroupNormalization", since);
    group.Input(0, "X", "", "T")
        .Input(1, "scale", "", "T")
        .Input(2, "bias", "", "T")
        .Output(0, "Y", "", "T")
        .TypeConstraint("T", kFloats, "")
        .Attr("epsilon", "", AttributeProto::FLOAT, 1e-5f)
        .Attr("num_groups", "", AttributeProto::INT)
        .TypeAndShapeInferenceFunction(onnx::propagateShapeAndTypeFromFirstInput);
    if (since >= 21) group.Attr("stash_type", "", AttributeProto::INT, int64_t{1});
    all.push_back(std::move(group));
  }
  // Opsets 19 and 21: DequantizeLinear's half-precision scales, then its blocks (block_size);
  // QuantizeLinear's saturate, then its blocks and output_dtype. (4-bit types are not named in
  // the constraints: libonnx 1.12 cannot parse them; its checker does not check input types.)
  const std::vector<std::string> quantized = {"tensor(int8)", "tensor(uint8)", "tensor(int16)", "tensor(uint16)",
                                              "tensor(int32)"};
  for (int since : {19, 21}) {
    OpSchema dq = Named("DequantizeLinear", since);
    dq.Input(0, "x", "", "T1")
        .Input(1, "x_scale", "", "T2")
        .Input(2, "x_zero_point", "", "T1", OpSchema::Optional)
        .Output(0, "y", "", "T2")
        .TypeConstraint("T1", quantized, "")
        .TypeConstraint("T2", kFloats, "")
        .Attr("axis", "", AttributeProto::INT, int64_t{1})
        .TypeAndShapeInferenceFunction([](InferenceContext& ctx) {
          onnx::propagateElemTypeFromInputToOutput(ctx, 1, 0);
          if (onnx::hasInputShape(ctx, 0)) onnx::propagateShapeFromInputToOutput(ctx, 0, 0);
        });
    if (since >= 21) dq.Attr("block_size", "", AttributeProto::INT, int64_t{0});
    all.push_back(std::move(dq));
    OpSchema q = Named("QuantizeLinear", since);
    q.Input(0, "x", "", "T1")
        .Input(1, "y_scale", "", "T1")
        .Input(2, "y_zero_point", "", "T2", OpSchema::Optional)
        .Output(0, "y", "", "T2")
        .TypeConstraint("T1", Plus(kFloats, {"tensor(int32)"}), "")
        .TypeConstraint("T2", quantized, "")
        .Attr("axis", "", AttributeProto::INT, int64_t{1})
        .Attr("saturate", "", AttributeProto::INT, int64_t{1})
        .TypeAndShapeInferenceFunction([](InferenceContext& ctx) {
          if (HasInput(ctx, 2)) {
            onnx::propagateElemTypeFromInputToOutput(ctx, 2, 0);
          } else {
            const int64_t type = onnx::getAttribute(ctx, "output_dtype", int64_t{0});
            ctx.getOutputType(0)->mutable_tensor_type()->set_elem_type(
                type != 0 ? static_cast<int32_t>(type) : static_cast<int32_t>(onnx::TensorProto::UINT8));
          }
          if (onnx::hasInputShape(ctx, 0)) onnx::propagateShapeFromInputToOutput(ctx, 0, 0);
        });
    if (since >= 21) {
      q.Attr("block_size", "", AttributeProto::INT, int64_t{0}).Attr("output_dtype", "", AttributeProto::INT, int64_t{0});
    }
    all.push_back(std::move(q));
  }

  // Opset 18: the bitwise ops, on integers.
  const std::vector<std::string> integers = {"tensor(int8)",   "tensor(int16)",  "tensor(int32)",  "tensor(int64)",
                                             "tensor(uint8)",  "tensor(uint16)", "tensor(uint32)", "tensor(uint64)"};
  for (const char* op : {"BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot"}) {
    OpSchema bitwise = Named(op, 18);
    const bool unary = std::string_view(op) == "BitwiseNot";
    bitwise.Input(0, "A", "", "T");
    if (!unary) bitwise.Input(1, "B", "", "T");
    bitwise.Output(0, "C", "", "T").TypeConstraint("T", integers, "").TypeAndShapeInferenceFunction(
        unary ? onnx::InferenceFunction(onnx::propagateShapeAndTypeFromFirstInput) : LibonnxInference("Add", 14));
    all.push_back(std::move(bitwise));
  }

  // Opset 23's transformer ops.
  OpSchema rms = Named("RMSNormalization", 23);
  rms.Input(0, "X", "", "T")
      .Input(1, "scale", "", "V")
      .Output(0, "Y", "", "V")
      .TypeConstraint("T", kFloats, "")
      .TypeConstraint("V", kFloats, "")
      .Attr("axis", "", AttributeProto::INT, int64_t{-1})
      .Attr("epsilon", "", AttributeProto::FLOAT, 1e-5f)
      .Attr("stash_type", "", AttributeProto::INT, int64_t{1})
      .TypeAndShapeInferenceFunction(onnx::propagateShapeAndTypeFromFirstInput);
  all.push_back(std::move(rms));
  OpSchema rotary = Named("RotaryEmbedding", 23);
  rotary.Input(0, "X", "", "T")
      .Input(1, "cos_cache", "", "T")
      .Input(2, "sin_cache", "", "T")
      .Input(3, "position_ids", "", "M", OpSchema::Optional)
      .Output(0, "Y", "", "T")
      .TypeConstraint("T", kFloats, "")
      .TypeConstraint("M", {"tensor(int64)"}, "")
      .Attr("interleaved", "", AttributeProto::INT, int64_t{0})
      .Attr("num_heads", "", AttributeProto::INT, false)
      .Attr("rotary_embedding_dim", "", AttributeProto::INT, int64_t{0})
      .TypeAndShapeInferenceFunction(onnx::propagateShapeAndTypeFromFirstInput);
  all.push_back(std::move(rotary));
  OpSchema attention = Named("Attention", 23);
  attention.Input(0, "Q", "", "T1")
      .Input(1, "K", "", "T1")
      .Input(2, "V", "", "T2")
      .Input(3, "attn_mask", "", "U", OpSchema::Optional)
      .Input(4, "past_key", "", "T1", OpSchema::Optional)
      .Input(5, "past_value", "", "T2", OpSchema::Optional)
      .Output(0, "Y", "", "T1")
      .Output(1, "present_key", "", "T1", OpSchema::Optional)
      .Output(2, "present_value", "", "T2", OpSchema::Optional)
      .Output(3, "qk_matmul_output", "", "T1", OpSchema::Optional)
      .TypeConstraint("T1", kFloats, "")
      .TypeConstraint("T2", kFloats, "")
      .TypeConstraint("U", Plus(kFloats, {"tensor(bool)"}), "")
      .Attr("is_causal", "", AttributeProto::INT, int64_t{0})
      .Attr("kv_num_heads", "", AttributeProto::INT, false)
      .Attr("q_num_heads", "", AttributeProto::INT, false)
      .Attr("qk_matmul_output_mode", "", AttributeProto::INT, int64_t{0})
      .Attr("scale", "", AttributeProto::FLOAT, false)
      .Attr("softcap", "", AttributeProto::FLOAT, 0.0f)
      .Attr("softmax_precision", "", AttributeProto::INT, false)
      .TypeAndShapeInferenceFunction([](InferenceContext& ctx) {
        ElemTypeAndRankOf(ctx, 0, 0, -1);
        ElemTypeAndRankOf(ctx, 1, 1, 4);
        ElemTypeAndRankOf(ctx, 2, 2, 4);
        ElemTypeAndRankOf(ctx, 0, 3, 4);
      });
  all.push_back(std::move(attention));

  for (OpSchema& s : all) s.Finalize();
  // Every version of the pools that take ceil_mode, their output sizes as onnxruntime's.
  const std::vector<OpSchema> history = onnx::OpSchemaRegistry::get_all_schemas_with_history();
  for (const OpSchema& libonnx : history) {
    if (libonnx.domain() != onnx::ONNX_DOMAIN || (libonnx.Name() != "MaxPool" && libonnx.Name() != "AveragePool")) continue;
    OpSchema corrected = libonnx;
    corrected.TypeAndShapeInferenceFunction(WithLastWindowInTheImage(libonnx.GetTypeAndShapeInferenceFunction()));
    all.push_back(std::move(corrected));
  }
  for (OpSchema& s : all) {
    if (s.Name() == "AveragePool" && s.SinceVersion() == 19) {
      s.TypeAndShapeInferenceFunction(WithLastWindowInTheImage(s.GetTypeAndShapeInferenceFunction()));
    }
  }
  return all;
}

bool DefaultDomain(const std::string& domain) { return domain.empty() || domain == "ai.onnx"; }

}  // namespace

LaterOnnxSchemas::LaterOnnxSchemas() : schemas_(MakeSchemas()) {}

const LaterOnnxSchemas& LaterOnnxSchemas::Instance() {
  static const LaterOnnxSchemas registry;
  return registry;
}

const onnx::OpSchema* LaterOnnxSchemas::GetSchema(const std::string& op, int version, const std::string& domain) const {
  const OpSchema* later = nullptr;
  if (DefaultDomain(domain)) {
    for (const OpSchema& s : schemas_) {
      if (s.Name() == op && s.SinceVersion() <= version && (later == nullptr || s.SinceVersion() > later->SinceVersion())) {
        later = &s;
      }
    }
  }
  if (later != nullptr) return later;
  return onnx::OpSchemaRegistry::Instance()->GetSchema(op, version, domain);
}

}  // namespace lockstep
