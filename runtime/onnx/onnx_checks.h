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

}  // namespace lockstep
