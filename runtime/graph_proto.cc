#include "runtime/graph_proto.h"

#include <span>
#include <variant>

namespace lockstep {

namespace {

template <typename... Fs>
struct Overloaded : Fs... {
  using Fs::operator()...;
};
template <typename... Fs>
Overloaded(Fs...) -> Overloaded<Fs...>;

void AttrToProto(const AttrValue& value, proto::AttrValue* out) {
  std::visit(Overloaded{
                 [&](int64_t v) { out->set_i(v); },
                 [&](double v) { out->set_f(v); },
                 [&](const std::string& v) { out->set_s(v); },
                 [&](bool v) { out->set_b(v); },
                 [&](const std::vector<int64_t>& v) {
                   // mutable_ints() alone marks the oneof, so an empty list survives the trip.
                   out->mutable_ints()->mutable_values()->Add(v.begin(), v.end());
                 },
                 [&](const std::vector<double>& v) {
                   out->mutable_floats()->mutable_values()->Add(v.begin(), v.end());
                 },
                 [&](DType v) { out->set_dtype(DTypeToProto(v)); },
                 [&](const Shape& v) { ShapeToProto(v, out->mutable_shape()); },
                 [&](const SubgraphAttr& v) {
                   proto::BundleDef* def = out->mutable_subgraph();
                   if (v != nullptr) GraphToProto(*v, def);
                 },
             },
             value);
}

StatusOr<AttrValue> AttrFromProto(const proto::AttrValue& in) {
  switch (in.value_case()) {
    case proto::AttrValue::kI: return AttrValue(in.i());
    case proto::AttrValue::kF: return AttrValue(in.f());
    case proto::AttrValue::kS: return AttrValue(in.s());
    case proto::AttrValue::kB: return AttrValue(in.b());
    case proto::AttrValue::kInts:
      return AttrValue(std::vector<int64_t>(in.ints().values().begin(), in.ints().values().end()));
    case proto::AttrValue::kFloats:
      return AttrValue(std::vector<double>(in.floats().values().begin(), in.floats().values().end()));
    case proto::AttrValue::kDtype: {
      LS_ASSIGN_OR_RETURN(DType d, DTypeFromProto(in.dtype()));
      return AttrValue(d);
    }
    case proto::AttrValue::kShape: {
      LS_ASSIGN_OR_RETURN(Shape s, ShapeFromProto(in.shape()));
      return AttrValue(s);
    }
    case proto::AttrValue::kSubgraph: {
      LS_ASSIGN_OR_RETURN(Graph g, GraphFromProto(in.subgraph()));
      return AttrValue(std::make_shared<const Graph>(std::move(g)));
    }
    case proto::AttrValue::VALUE_NOT_SET: break;
  }
  // Also reached for a oneof case added to the proto after this reader was built.
  return InvalidArgument("has no value");
}

void BindingToProto(const TensorBinding& b, proto::TensorBinding* out) {
  out->set_key(b.key);
  out->set_tensor(b.tensor);
  out->set_dtype(DTypeToProto(b.dtype));
  ShapeToProto(b.shape, out->mutable_shape());
  out->set_any_shape(b.any_shape);
}

StatusOr<TensorBinding> BindingFromProto(const proto::TensorBinding& in, const std::string& where) {
  TensorBinding b;
  b.key = in.key();
  b.tensor = in.tensor();
  auto dtype = DTypeFromProto(in.dtype());
  if (!dtype.ok()) return dtype.status().WithPrefix(where + " '" + b.key + "'");
  b.dtype = *dtype;
  auto shape = ShapeFromProto(in.shape());
  if (!shape.ok()) return shape.status().WithPrefix(where + " '" + b.key + "' shape");
  b.shape = *shape;
  b.any_shape = in.any_shape();
  return b;
}

}  // namespace

proto::DataType DTypeToProto(DType dtype) {
  // The enums share their numbering (dtype.h promises it), so the cast is the mapping.
  return static_cast<proto::DataType>(static_cast<int>(dtype));
}

StatusOr<DType> DTypeFromProto(int value) {
  if (!IsValidDType(value)) return InvalidArgument("invalid dtype " + std::to_string(value));
  return static_cast<DType>(value);
}

void ShapeToProto(const Shape& shape, proto::ShapeProto* out) {
  out->clear_dims();
  for (int64_t d : shape.dims()) out->add_dims(d);
}

StatusOr<Shape> ShapeFromProto(const proto::ShapeProto& in) {
  // FromDims checks the rank before looking at any dimension, so a hostile list of a million
  // dims costs nothing beyond what parsing already spent.
  return Shape::FromDims(std::span<const int64_t>(in.dims().data(), static_cast<size_t>(in.dims_size())));
}

void GraphToProto(const Graph& graph, proto::BundleDef* out) {
  proto::GraphDef* g = out->mutable_graph();
  g->clear_nodes();
  for (const NodeDef& node : graph.nodes) {
    proto::NodeDef* n = g->add_nodes();
    n->set_name(node.name);
    n->set_op(node.op);
    for (const std::string& input : node.inputs) n->add_inputs(input);
    for (const auto& [name, value] : node.attrs.values()) AttrToProto(value, &(*n->mutable_attrs())[name]);
  }
  out->clear_signatures();
  for (const Signature& sig : graph.signatures) {
    proto::SignatureDef* s = out->add_signatures();
    s->set_name(sig.name);
    s->set_method_name(sig.method_name);
    for (const TensorBinding& b : sig.inputs) BindingToProto(b, s->add_inputs());
    for (const TensorBinding& b : sig.outputs) BindingToProto(b, s->add_outputs());
  }
  out->clear_metadata();
  for (const auto& [key, value] : graph.metadata) (*out->mutable_metadata())[key] = value;
}

StatusOr<Graph> GraphFromProto(const proto::BundleDef& in) {
  Graph graph;
  graph.nodes.reserve(static_cast<size_t>(in.graph().nodes_size()));
  for (const proto::NodeDef& n : in.graph().nodes()) {
    NodeDef node;
    node.name = n.name();
    node.op = n.op();
    node.inputs.assign(n.inputs().begin(), n.inputs().end());
    for (const auto& [name, value] : n.attrs()) {
      auto attr = AttrFromProto(value);
      if (!attr.ok()) return attr.status().WithPrefix("node '" + n.name() + "' attr '" + name + "'");
      node.attrs.Set(name, std::move(*attr));
    }
    graph.nodes.push_back(std::move(node));
  }
  for (const proto::SignatureDef& s : in.signatures()) {
    Signature sig;
    sig.name = s.name();
    sig.method_name = s.method_name();
    const std::string where = "signature '" + s.name() + "'";
    for (const proto::TensorBinding& b : s.inputs()) {
      LS_ASSIGN_OR_RETURN(TensorBinding binding, BindingFromProto(b, where + " input"));
      sig.inputs.push_back(std::move(binding));
    }
    for (const proto::TensorBinding& b : s.outputs()) {
      LS_ASSIGN_OR_RETURN(TensorBinding binding, BindingFromProto(b, where + " output"));
      sig.outputs.push_back(std::move(binding));
    }
    graph.signatures.push_back(std::move(sig));
  }
  for (const auto& [key, value] : in.metadata()) graph.metadata.emplace(key, value);
  return graph;
}

}  // namespace lockstep
