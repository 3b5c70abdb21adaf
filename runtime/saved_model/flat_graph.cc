#include "runtime/saved_model/flat_graph.h"

#include <charconv>

#include "tensorflow/core/framework/function.pb.h"

namespace lockstep {
namespace {

constexpr int kMaxCallDepth = 64;
constexpr size_t kMaxNodes = 1'000'000;

bool ParseIndex(std::string_view text, int* index) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *index);
  return ec == std::errc() && end == text.data() + text.size() && *index >= 0;
}

bool IsCallOp(std::string_view op) {
  return op == "StatefulPartitionedCall" || op == "PartitionedCall";
}

}  // namespace

class Flattener {
 public:
  Flattener(const tensorflow::GraphDef& graph, FlatGraph* out) : out_(out) {
    for (const tensorflow::FunctionDef& f : graph.library().function()) functions_[f.signature().name()] = &f;
  }

  // Adds `def` under `prefix`. `args` maps a function body's argument names to the caller's
  // values (empty at the top level).
  Status Add(const tensorflow::NodeDef& def, const std::string& prefix,
             const std::map<std::string, FlatRef, std::less<>>& args, int depth) {
    const std::string name = prefix + def.name();
    if (out_->nodes_.count(name) != 0 || out_->aliases_.count(name) != 0) {
      return InvalidArgument("node '" + name + "' is defined twice");
    }
    if (out_->nodes_.size() + out_->aliases_.size() >= kMaxNodes) {
      return InvalidArgument("graph has more than " + std::to_string(kMaxNodes) +
                             " nodes with its functions inlined");
    }
    std::vector<FlatRef> inputs;
    for (const std::string& input : def.input()) {
      if (!input.empty() && input[0] == '^') continue;
      LS_ASSIGN_OR_RETURN(FlatRef ref, ParseRef(input, prefix, args, /*in_function=*/depth > 0));
      inputs.push_back(std::move(ref));
    }

    const tensorflow::FunctionDef* function = nullptr;
    if (IsCallOp(def.op())) {
      auto f = def.attr().find("f");
      if (f == def.attr().end() || !f->second.has_func()) {
        return InvalidArgument("node '" + name + "' (" + def.op() + ") names no function in attr 'f'");
      }
      function = FindFunction(f->second.func().name(), name);
      if (function == nullptr) return FunctionNotFound(f->second.func().name(), name);
    } else {
      function = FindFunction(def.op(), name);  // a node whose op is a library function
    }
    if (function == nullptr) {
      out_->nodes_.emplace(name, FlatNode{name, &def, std::move(inputs)});
      return Status::Ok();
    }
    return Inline(*function, name, std::move(inputs), depth);
  }

 private:
  const tensorflow::FunctionDef* FindFunction(const std::string& fname, const std::string&) const {
    auto it = functions_.find(fname);
    return it == functions_.end() ? nullptr : it->second;
  }
  static Status FunctionNotFound(const std::string& fname, const std::string& node) {
    return InvalidArgument("node '" + node + "' calls function '" + fname +
                           "', which the library does not define");
  }

  Status Inline(const tensorflow::FunctionDef& function, const std::string& name, std::vector<FlatRef> inputs,
                int depth) {
    if (depth >= kMaxCallDepth) {
      return InvalidArgument("node '" + name + "': function calls nest deeper than " +
                             std::to_string(kMaxCallDepth));
    }
    const tensorflow::OpDef& sig = function.signature();
    if (static_cast<size_t>(sig.input_arg_size()) != inputs.size()) {
      return InvalidArgument("node '" + name + "' passes " + std::to_string(inputs.size()) +
                             " inputs to function '" + sig.name() + "', which takes " +
                             std::to_string(sig.input_arg_size()));
    }
    std::map<std::string, FlatRef, std::less<>> args;
    for (int i = 0; i < sig.input_arg_size(); ++i) args[sig.input_arg(i).name()] = std::move(inputs[i]);
    const std::string prefix = name + "/";
    for (const tensorflow::NodeDef& body : function.node_def())
      LS_RETURN_IF_ERROR(Add(body, prefix, args, depth + 1));
    std::vector<FlatRef> outputs;
    for (const tensorflow::OpDef::ArgDef& out : sig.output_arg()) {
      auto ret = function.ret().find(out.name());
      if (ret == function.ret().end()) {
        return InvalidArgument("function '" + sig.name() + "' does not return its output '" + out.name() +
                               "'");
      }
      LS_ASSIGN_OR_RETURN(FlatRef ref, ParseRef(ret->second, prefix, args, /*in_function=*/true));
      outputs.push_back(std::move(ref));
    }
    out_->aliases_.emplace(name, std::move(outputs));
    return Status::Ok();
  }

  // Graph level: "node" or "node:k". Function bodies: "arg", "node:output_arg:k" (k indexes
  // the output list; the ops this importer translates have one output list each).
  static StatusOr<FlatRef> ParseRef(std::string_view text, const std::string& prefix,
                                    const std::map<std::string, FlatRef, std::less<>>& args,
                                    bool in_function) {
    auto bad = [&] { return InvalidArgument("malformed input reference '" + std::string(text) + "'"); };
    if (in_function) {
      if (auto arg = args.find(text); arg != args.end()) return arg->second;
    }
    const size_t colon = text.find(':');
    if (colon == std::string_view::npos) {
      if (text.empty()) return bad();
      return FlatRef{prefix + std::string(text), 0};
    }
    const size_t last = text.rfind(':');
    int index = 0;
    if (!ParseIndex(text.substr(last + 1), &index) || colon == 0) return bad();
    std::string_view node = text.substr(0, colon);
    if (in_function && last == colon) {
      // "arg:0" in a body is an argument too.
      if (auto arg = args.find(node); arg != args.end() && index == 0) return arg->second;
    }
    if (!in_function && last != colon) return bad();
    return FlatRef{prefix + std::string(node), index};
  }

  FlatGraph* out_;
  std::map<std::string, const tensorflow::FunctionDef*, std::less<>> functions_;
};

StatusOr<FlatGraph> FlatGraph::Flatten(const tensorflow::GraphDef& graph) {
  FlatGraph flat;
  Flattener flattener(graph, &flat);
  for (const tensorflow::NodeDef& node : graph.node()) LS_RETURN_IF_ERROR(flattener.Add(node, "", {}, 0));
  return flat;
}

StatusOr<FlatRef> FlatGraph::Resolve(const FlatRef& ref) const {
  FlatRef at = ref;
  // Each hop leaves one call level, so a chain longer than the node count is a cycle.
  for (size_t hops = 0; hops <= aliases_.size(); ++hops) {
    auto alias = aliases_.find(at.node);
    if (alias == aliases_.end()) {
      if (nodes_.count(at.node) == 0) return NotFound("no node for tensor '" + ref.ToString() + "'");
      return at;
    }
    if (at.index >= static_cast<int>(alias->second.size())) {
      return NotFound("tensor '" + ref.ToString() + "': function call '" + at.node + "' has " +
                      std::to_string(alias->second.size()) + " outputs");
    }
    at = alias->second[at.index];
  }
  return InvalidArgument("tensor '" + ref.ToString() + "' refers to itself through function calls");
}

StatusOr<FlatRef> FlatGraph::ResolveName(std::string_view tensor_name) const {
  FlatRef ref{std::string(tensor_name), 0};
  if (size_t colon = tensor_name.find(':'); colon != std::string_view::npos) {
    if (!ParseIndex(tensor_name.substr(colon + 1), &ref.index) || colon == 0) {
      return InvalidArgument("malformed tensor name '" + std::string(tensor_name) + "'");
    }
    ref.node = std::string(tensor_name.substr(0, colon));
  }
  return Resolve(ref);
}

const FlatNode* FlatGraph::Find(std::string_view name) const {
  auto it = nodes_.find(name);
  return it == nodes_.end() ? nullptr : &it->second;
}

}  // namespace lockstep
