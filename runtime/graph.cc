#include "runtime/graph.h"

#include <charconv>

namespace lockstep {

const NodeDef* Graph::FindNode(std::string_view name) const {
  for (const NodeDef& n : nodes) {
    if (n.name == name) return &n;
  }
  return nullptr;
}

const Signature* Graph::FindSignature(std::string_view name) const {
  for (const Signature& s : signatures) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

StatusOr<TensorRef> ParseTensorRef(std::string_view ref) {
  TensorRef out;
  size_t colon = ref.rfind(':');
  if (colon == std::string_view::npos) {
    out.node = ref;
  } else {
    out.node = ref.substr(0, colon);
    std::string_view digits = ref.substr(colon + 1);
    auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), out.index);
    if (digits.empty() || ec != std::errc() || ptr != digits.data() + digits.size() || out.index < 0) {
      return InvalidArgument("malformed tensor reference '" + std::string(ref) + "'");
    }
  }
  if (out.node.empty()) return InvalidArgument("empty node name in tensor reference '" + std::string(ref) + "'");
  return out;
}

}  // namespace lockstep
