#include "runtime/onnx/onnx_per_input.h"

#include <atomic>
#include <charconv>
#include <map>
#include <set>
#include <string>

#include "onnx/onnx_pb.h"
#include "runtime/import/constants.h"
#include "runtime/onnx/onnx_model.h"
#include "runtime/onnx/onnx_ops.h"
#include "runtime/onnx/onnx_tensor.h"

namespace lockstep {
namespace {

Status CheckOpsTranslated(const onnx::GraphProto& graph) {
  for (const onnx::NodeProto& node : graph.node()) {
    LS_RETURN_IF_ERROR(CheckOnnxOpTranslated(node));
    for (const onnx::AttributeProto& a : node.attribute()) {
      if (a.has_g()) LS_RETURN_IF_ERROR(CheckOpsTranslated(a.g()));
      for (const onnx::GraphProto& g : a.graphs()) LS_RETURN_IF_ERROR(CheckOpsTranslated(g));
    }
  }
  return Status::Ok();
}

// The graph's own inputs (an initializer listed as an input is a constant, IR < 4).
std::vector<const onnx::ValueInfoProto*> FedInputs(const onnx::GraphProto& graph) {
  std::set<std::string> initializers;
  for (const onnx::TensorProto& init : graph.initializer()) initializers.insert(init.name());
  std::vector<const onnx::ValueInfoProto*> fed;
  for (const onnx::ValueInfoProto& vi : graph.input()) {
    if (initializers.count(vi.name()) == 0) fed.push_back(&vi);
  }
  return fed;
}

// A binding as the graph declares it: a dim_param (or a dimension left out) is -1; an input
// whose rank is not declared takes any shape.
StatusOr<TensorBinding> DeclaredBinding(const onnx::ValueInfoProto& vi, bool input) {
  const std::string what = (input ? "input '" : "output '") + vi.name() + "'";
  if (!vi.type().has_tensor_type()) return Unimplemented(what + " is not a tensor");
  StatusOr<DType> dtype = OnnxElemTypeToDType(vi.type().tensor_type().elem_type());
  if (!dtype.ok()) return dtype.status().WithPrefix(what);
  TensorBinding binding{vi.name(), vi.name(), *dtype, Shape()};
  if (!vi.type().tensor_type().has_shape()) {
    binding.any_shape = input;
    return binding;
  }
  for (const auto& d : vi.type().tensor_type().shape().dim()) {
    binding.shape.AddDim(d.has_dim_value() && d.dim_value() >= 0 ? d.dim_value() : Shape::kUnknownDim);
  }
  if (!binding.shape.KnownDimsWithin()) return InvalidArgument(what + " declares a dimension out of range");
  return binding;
}

// A scalar a graph may be made for: an integer or boolean of rank 0 (a sample rate, a flag).
bool Pinnable(const Tensor& t) {
  return t.shape().rank() == 0 && (t.dtype() == DType::kInt64 || t.dtype() == DType::kInt32 || t.dtype() == DType::kBool);
}

void AppendInt(std::string* out, int64_t v) {
  char digits[24];
  const auto end = std::to_chars(digits, digits + sizeof digits, v).ptr;
  out->append(digits, end);
}

struct PerInputOnnx {
  std::shared_ptr<const FileImage> image;
  std::filesystem::path dir;
  // Set once a graph could be made only with the scalar inputs' values pinned.
  std::atomic<bool> pin_scalars{false};

  void Key(std::span<const Tensor* const> inputs, std::string* key) const {
    const bool pin = pin_scalars.load();
    key->assign(pin ? "v" : "s");
    for (const Tensor* t : inputs) {
      key->push_back(';');
      for (int64_t d : t->shape().dims()) {
        AppendInt(key, d);
        key->push_back(',');
      }
      if (pin && Pinnable(*t)) {
        key->push_back('=');
        AppendInt(key, t->dtype() == DType::kInt64 ? t->data<int64_t>()[0]
                       : t->dtype() == DType::kInt32 ? t->data<int32_t>()[0]
                                                     : static_cast<int64_t>(t->data<bool>()[0]));
      }
    }
  }

  StatusOr<Model> MakeFor(std::span<const Tensor* const> inputs, bool pin, bool* unknown_until_run_time) const {
    onnx::ModelProto proto;
    if (!proto.ParseFromArray(image->data(), static_cast<int>(image->size()))) {
      return Internal("the model's bytes no longer parse");
    }
    std::map<std::string, const Tensor*> pinned;
    std::vector<const onnx::ValueInfoProto*> fed = FedInputs(proto.graph());
    if (fed.size() != inputs.size()) return Internal("the run's inputs are not the graph's");
    for (size_t k = 0; k < fed.size(); ++k) {
      auto* shape = const_cast<onnx::ValueInfoProto*>(fed[k])->mutable_type()->mutable_tensor_type()->mutable_shape();
      shape->clear_dim();
      for (int64_t d : inputs[k]->shape().dims()) shape->add_dim()->set_dim_value(d);
      if (pin && Pinnable(*inputs[k])) pinned[fed[k]->name()] = inputs[k];
    }
    return ImportOnnxModelFor(proto, dir, pinned, unknown_until_run_time);
  }

  StatusOr<Model> Make(std::span<const Tensor* const> inputs) {
    const bool pinning = pin_scalars.load();
    bool unknown = false;
    StatusOr<Model> made = MakeFor(inputs, pinning, &unknown);
    bool any_pinnable = false;
    for (const Tensor* t : inputs) any_pinnable = any_pinnable || Pinnable(*t);
    if (!made.ok() && unknown && !pinning && any_pinnable) {
      StatusOr<Model> pinned = MakeFor(inputs, true, nullptr);
      if (pinned.ok()) pin_scalars.store(true);
      // Pinned, the translation gets further: its error (or its graph) is the one to give.
      made = std::move(pinned);
    }
    if (!made.ok()) {
      std::string shapes;
      for (const Tensor* t : inputs) shapes += (shapes.empty() ? "" : ", ") + t->shape().ToString();
      const std::string what = "the graph for inputs of shapes " + shapes;
      // What the inputs cannot be translated for is the request's fault; running short of
      // memory, or anything internal, is not.
      const StatusCode code = made.status().code();
      if (code != StatusCode::kInvalidArgument && code != StatusCode::kUnimplemented) return made.status().WithPrefix(what);
      return InvalidArgument(what + ": " + made.status().message());
    }
    return made;
  }
};

}  // namespace

StatusOr<Model> OnnxModelPerInput(std::shared_ptr<const FileImage> image, const std::filesystem::path& dir) {
  onnx::ModelProto proto;
  if (!proto.ParseFromArray(image->data(), static_cast<int>(image->size()))) {
    return InvalidArgument("not an ONNX ModelProto (corrupted or truncated)");
  }
  LS_RETURN_IF_ERROR(CheckOpsTranslated(proto.graph()));
  Model model;
  Signature sig;
  sig.name = std::string(kDefaultSignature);
  sig.method_name = "tensorflow/serving/predict";
  for (const onnx::ValueInfoProto* vi : FedInputs(proto.graph())) {
    LS_ASSIGN_OR_RETURN(TensorBinding b, DeclaredBinding(*vi, true));
    sig.inputs.push_back(std::move(b));
  }
  for (const onnx::ValueInfoProto& vi : proto.graph().output()) {
    LS_ASSIGN_OR_RETURN(TensorBinding b, DeclaredBinding(vi, false));
    sig.outputs.push_back(std::move(b));
  }
  model.graph.signatures.push_back(std::move(sig));
  model.graph.metadata["format"] = "onnx";
  model.graph.metadata["graph_per_input"] = "the graph is made per input shape at run time";
  auto state = std::make_shared<PerInputOnnx>();
  state->image = std::move(image);
  state->dir = dir;
  auto per_input = std::make_shared<GraphPerInput>();
  per_input->key = [state](std::span<const Tensor* const> inputs, std::string* key) { state->Key(inputs, key); };
  per_input->make = [state](std::span<const Tensor* const> inputs) { return state->Make(inputs); };
  model.per_input = std::move(per_input);
  return model;
}

}  // namespace lockstep
