// Internal to runtime/onnx/: what ONNX's checker and shape inference need to know of the opsets
// after Debian's libonnx (1.12, opset 17). Its registry answers an op at a later opset with the
// op's last schema it knows, which refuses what changed since (ReduceMean's axes as an input,
// Split's num_outputs, Pad's axes, Resize's antialias, Cast's saturate, AveragePool's dilations)
// and knows nothing of the ops added since (Gelu, GroupNormalization, Mish, the bitwise ops, and
// opset 23's RMSNormalization, RotaryEmbedding and Attention). This registry
// carries those ops' later schemas, with their shape inference, and asks libonnx for the rest.
// It also mends libonnx's inference where it sizes outputs otherwise than onnxruntime runs them:
// the pools' ceil_mode, at every opset.
#pragma once

#include <string>

#include "onnx/defs/schema.h"

namespace lockstep {

class LaterOnnxSchemas final : public onnx::ISchemaRegistry {
 public:
  // The one registry, built on first use.
  static const LaterOnnxSchemas& Instance();

  // The schema of `op` as opset `version` of `domain` defines it: one of the later schemas where
  // one applies (since_version <= version, and the latest such), else libonnx's.
  const onnx::OpSchema* GetSchema(const std::string& op, int version, const std::string& domain) const override;

 private:
  LaterOnnxSchemas();
  std::vector<onnx::OpSchema> schemas_;
};

}  // namespace lockstep
