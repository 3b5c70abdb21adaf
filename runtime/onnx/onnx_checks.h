// Internal to runtime/onnx/: what the importer asks of Debian's libonnx before it translates a
// model. ONNX's checker (with the model's own directory for external data), then ONNX's shape
// inference into every subgraph, strict first and lenient for exporters' old-opset slips; and
// the guards that keep a hostile model from crashing ONNX 1.12's inference, which trusts some
// attributes it should check.
#pragma once

#include <filesystem>

#include "onnx/onnx_pb.h"
#include "runtime/status.h"

namespace lockstep {

// Checks `proto` and writes what inference finds into its graphs' value_info (after clearing
// what the exporter wrote there: sizes traced for one batch). Neither ONNX's exceptions nor
// its crashes on the attributes it trusts get through: each is an InvalidArgument.
Status CheckAndInferOnnxShapes(onnx::ModelProto& proto, const std::filesystem::path& dir);

// 4-bit weights are read as 8-bit ones (onnx_tensor.h); a 4-bit value computed in the graph (a
// QuantizeLinear or Cast to INT4) would be saturated to 8 bits, so it is refused: an
// Unimplemented naming the first value of `graph` or its bodies that is 4-bit and no weight (an
// initializer or a Constant node's output).
Status RefuseComputedFourBitValues(const onnx::GraphProto& graph);

}  // namespace lockstep
