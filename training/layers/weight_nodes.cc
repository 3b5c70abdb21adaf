#include "training/layers/weight_nodes.h"

#include "training/model_graph.h"

namespace lockstep::training {

std::string WeightNodes::ForProduct(const std::string& name) {
  if (bf16_ == Bf16::kNone) return Get(name);
  if (bf16_ == Bf16::kInputs) return Bf16CopyName(name);
  auto it = cast_.find(name);
  if (it != cast_.end()) return it->second;
  AttrMap to_bf16;
  to_bf16.Set("dtype", DType::kBFloat16);
  return cast_[name] = g_.Op("Cast", {Get(name)}, to_bf16, Bf16CopyName(name));
}

AttrMap WeightNodes::ProductAttrs(AttrMap attrs) const {
  if (bf16_ != Bf16::kNone) attrs.Set("precision", std::string("bfloat16"));
  return attrs;
}

}  // namespace lockstep::training
