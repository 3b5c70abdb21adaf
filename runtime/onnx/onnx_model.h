// ONNX models, served unchanged: a version directory holding
//
//   model.onnx        onnx.ModelProto: the graph, its initializers, the opsets it imports
//   <other files>     external data the initializers name (optional), never outside the directory
//
// is translated at load time into a Lockstep Model, which the runtime then compiles like any
// bundle: nothing of ONNX runs at serving time. The model is parsed with ONNX's own protobuf
// classes, checked by onnx::checker, and given types and shapes by ONNX's shape inference
// (with data propagation) before each node is translated by the op table (onnx_ops.h). An op,
// attribute or element type outside the table is an error naming the node, the op and what is
// missing, never a wrong answer. Subgraphs (If's branches, Loop's and Scan's bodies) are
// translated the same way, into bodies that take what they read of the enclosing graphs as
// inputs (onnx_ops.h's OnnxBody); sequences become lists of values while loading.
//
// A model whose translation needs ranks or dimensions known only at run time (an If whose
// branches differ in rank, a Conv after one; onnx_per_input.h) is translated per input shape
// when its runs come, each graph cached: the load checks its ops and declares its signature.
//
// The one signature, serving_default, is the graph's inputs and outputs under their ONNX names,
// with their element types and shapes; a dimension with a dim_param (or none) is -1, chosen by
// the caller. Initializers are constants, also those listed as graph inputs (IR < 4 models).
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <string_view>

#include "onnx/onnx_pb.h"
#include "runtime/graph.h"
#include "runtime/status.h"
#include "runtime/tensor.h"

namespace lockstep {

inline constexpr std::string_view kOnnxModelFile = "model.onnx";
// The opsets of the default domain Lockstep reads: every one Debian's ONNX 1.12 defines (older
// opsets' attributes, such as the explicit broadcast of opsets 1 to 6, are translated too), and
// the later ones up to ONNX 1.18's, whose changed and new ops runtime/onnx/onnx_schemas.h
// describes to libonnx.
inline constexpr int kMinOnnxOpset = 1;
inline constexpr int kMaxOnnxOpset = 23;
// The newest IR version read (ONNX 1.18's); libonnx 1.12 checks models as of its own, 8.
inline constexpr int kMaxOnnxIrVersion = 11;

// Whether `dir` holds an ONNX model (has a model.onnx).
bool IsOnnxModelDir(const std::filesystem::path& dir);

// Reads `dir`/model.onnx and translates it. Errors name the file, and the node and op at fault.
StatusOr<Model> ReadOnnxModel(const std::filesystem::path& dir);
// The same for a model file of any name; its external data lies beside it.
StatusOr<Model> ReadOnnxModelFile(const std::filesystem::path& file);

// The translation alone. `model` is checked and shape-inferred in place; `dir` is where its
// external data lives (empty: the model may have none).
StatusOr<Model> ImportOnnxModel(onnx::ModelProto& model, const std::filesystem::path& dir);
// ImportOnnxModel with `pinned` inputs: the graph is made for those values (constants to the
// translators; the signature still takes them). `unknown_until_run_time`, where given, is set
// when the translation failed for want of a rank or dimension known only at run time.
StatusOr<Model> ImportOnnxModelFor(onnx::ModelProto& model, const std::filesystem::path& dir,
                                   const std::map<std::string, const Tensor*>& pinned, bool* unknown_until_run_time);

}  // namespace lockstep
