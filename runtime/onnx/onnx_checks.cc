#include "runtime/onnx/onnx_checks.h"

#include <algorithm>
#include <set>
#include <string>
#include <unordered_map>

#include "runtime/onnx/onnx_model.h"
#include "runtime/onnx/onnx_schemas.h"
#include "runtime/onnx/onnx_tensor.h"

#include "onnx/checker.h"
#include "onnx/defs/schema.h"
#include "onnx/shape_inference/implementation.h"

namespace lockstep {
namespace {

// onnx::checker::check_model on a ModelProto looks for external data beside the process's
// working directory; this is the same check with the model's directory (ONNX 1.12's own steps:
// the IR version, the opsets, the graph, the model's local functions).
void CheckModel(const onnx::ModelProto& model, const std::filesystem::path& dir) {
  namespace checker = onnx::checker;
  if (model.ir_version() <= 0) fail_check("the model does not set its ir_version");
  if (model.ir_version() > kMaxOnnxIrVersion) {
    fail_check("ir_version ", model.ir_version(), " is newer than the newest Lockstep reads (", kMaxOnnxIrVersion, ")");
  }
  checker::CheckerContext ctx;
  // IR versions 9 to 11 add types (float8, int4, float4) and fields the checker of IR 8 does not
  // read; the types are refused where a tensor of them is read, and the rest is as IR 8 has it.
  ctx.set_ir_version(static_cast<int>(std::min<int64_t>(model.ir_version(), onnx::Version::IR_VERSION)));
  std::unordered_map<std::string, int> opsets;
  for (const auto& o : model.opset_import()) opsets[o.domain()] = static_cast<int>(o.version());
  if (opsets.empty()) fail_check("the model imports no opset");
  ctx.set_opset_imports(std::move(opsets));
  ctx.set_model_dir(dir.string());
  ctx.set_schema_registry(&LaterOnnxSchemas::Instance());
  checker::LexicalScopeContext lex;
  checker::check_graph(model.graph(), ctx, lex);
  if (model.ir_version() >= 8) checker::check_model_local_functions(model, ctx, lex);
}

// Window attributes ONNX 1.12's shape inference divides by without checking them (a stride of
// 0 ends the process with SIGFPE, which no catch can stop), and pads it adds to sizes: refused
// before it runs, on every node whatever its op.
Status CheckWindowAttrs(const onnx::GraphProto& graph) {
  for (const onnx::NodeProto& node : graph.node()) {
    for (const onnx::AttributeProto& a : node.attribute()) {
      if (a.has_g()) LS_RETURN_IF_ERROR(CheckWindowAttrs(a.g()));
      for (const onnx::GraphProto& g : a.graphs()) LS_RETURN_IF_ERROR(CheckWindowAttrs(g));
      if (a.name() == "pads") {
        // Pads are added to image sizes: bounded so that no sum overflows (Pad-2 takes
        // negative ones, which crop).
        for (int64_t v : a.ints()) {
          if (v < -(int64_t{1} << 40) || v > (int64_t{1} << 40)) {
            return InvalidArgument("node '" + node.name() + "' (" + node.op_type() + "): attribute 'pads' holds " +
                                   std::to_string(v) + ", outside [-2^40, 2^40]");
          }
        }
        continue;
      }
      if (a.name() != "strides" && a.name() != "dilations" && a.name() != "kernel_shape") continue;
      for (int64_t v : a.ints()) {
        if (v < 1 || v > (int64_t{1} << 20)) {
          return InvalidArgument("node '" + node.name() + "' (" + node.op_type() + "): attribute '" + a.name() +
                                 "' holds " + std::to_string(v) + ", outside [1, 2^20]");
        }
      }
    }
  }
  return Status::Ok();
}

// ONNX 1.12's shape inference trusts some attributes it should check, and a hostile model
// then crashes it (found by the onnx_model fuzz target): LayerNormalization's Mean and
// InvStdDev shapes are written from `axis` on, out of bounds for an axis below -rank. Those two
// outputs are taken off such nodes while ONNX infers (Lockstep's own inference gives their
// shapes; the translator checks the axis), and put back by the destructor.
// Subgraphs are guarded as their graph is.
class ShapeInferenceGuard {
 public:
  explicit ShapeInferenceGuard(onnx::GraphProto& graph) { Guard(graph); }
  ~ShapeInferenceGuard() {
    for (auto& [node, extra] : removed_) {
      for (std::string& out : extra) node->add_output(std::move(out));
    }
  }
  ShapeInferenceGuard(const ShapeInferenceGuard&) = delete;
  ShapeInferenceGuard& operator=(const ShapeInferenceGuard&) = delete;

 private:
  void Guard(onnx::GraphProto& graph) {
    for (onnx::NodeProto& node : *graph.mutable_node()) {
      for (onnx::AttributeProto& a : *node.mutable_attribute()) {
        if (a.has_g()) Guard(*a.mutable_g());
        for (onnx::GraphProto& g : *a.mutable_graphs()) Guard(g);
      }
      if (node.op_type() != "LayerNormalization" || node.output_size() <= 1) continue;
      std::vector<std::string> extra(node.output().begin() + 1, node.output().end());
      node.mutable_output()->DeleteSubrange(1, node.output_size() - 1);
      removed_.emplace_back(&node, std::move(extra));
    }
  }

  std::vector<std::pair<onnx::NodeProto*, std::vector<std::string>>> removed_;
};

// An exporter's value_info may hold sizes traced for one batch, which inference would keep
// where it only knows a dim_param: shapes come from the inputs and initializers alone.
void ClearValueInfo(onnx::GraphProto& graph) {
  graph.clear_value_info();
  for (onnx::NodeProto& node : *graph.mutable_node()) {
    for (onnx::AttributeProto& a : *node.mutable_attribute()) {
      if (a.has_g()) ClearValueInfo(*a.mutable_g());
      for (onnx::GraphProto& g : *a.mutable_graphs()) ClearValueInfo(g);
    }
  }
}

}  // namespace

Status CheckAndInferOnnxShapes(onnx::ModelProto& proto, const std::filesystem::path& dir) {
  LS_RETURN_IF_ERROR(CheckWindowAttrs(proto.graph()));
  ClearValueInfo(*proto.mutable_graph());
  // ONNX's checker and inference report by exception; none may cross into the runtime.
  try {
    CheckModel(proto, dir);
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("not a valid ONNX model: ") + e.what());
  }
  ShapeInferenceGuard guard(*proto.mutable_graph());
  try {
    onnx::ShapeInferenceOptions options{/*check_type=*/true, /*error_mode=*/1, /*enable_data_propagation=*/true};
    onnx::shape_inference::InferShapes(proto, &LaterOnnxSchemas::Instance(), options);
  } catch (const std::exception& strict) {
    // Exporters write models that strict inference faults where an old opset's schema is
    // narrower than what every runtime accepts (an int64 Constant in opset 6). Inference then
    // runs leniently, leaving unknown what it cannot infer; Lockstep's own inference checks
    // every node again when the model is compiled.
    try {
      onnx::ShapeInferenceOptions lenient{/*check_type=*/false, /*error_mode=*/0, /*enable_data_propagation=*/true};
      onnx::shape_inference::InferShapes(proto, &LaterOnnxSchemas::Instance(), lenient);
    } catch (const std::exception& e) {
      return InvalidArgument(std::string("ONNX shape inference failed: ") + e.what());
    }
  }
  return Status::Ok();
}

Status RefuseComputedFourBitValues(const onnx::GraphProto& graph) {
  std::set<std::string> weights;
  for (const onnx::TensorProto& init : graph.initializer()) weights.insert(init.name());
  for (const onnx::NodeProto& node : graph.node()) {
    if (node.op_type() == "Constant") weights.insert(node.output().begin(), node.output().end());
    for (const onnx::AttributeProto& a : node.attribute()) {
      if (a.has_g()) LS_RETURN_IF_ERROR(RefuseComputedFourBitValues(a.g()));
      for (const onnx::GraphProto& g : a.graphs()) LS_RETURN_IF_ERROR(RefuseComputedFourBitValues(g));
    }
  }
  for (const auto& list : {&graph.input(), &graph.value_info(), &graph.output()}) {
    for (const onnx::ValueInfoProto& vi : *list) {
      const int32_t elem = vi.type().tensor_type().elem_type();
      if ((elem == kOnnxInt4 || elem == kOnnxUInt4) && weights.count(vi.name()) == 0) {
        return Unimplemented("value '" + vi.name() + "' is of type " + OnnxElemTypeName(elem) +
                             ": 4-bit weights are read, 4-bit values are not computed");
      }
    }
  }
  return Status::Ok();
}

}  // namespace lockstep
