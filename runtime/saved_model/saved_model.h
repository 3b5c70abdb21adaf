// TensorFlow SavedModels, served unchanged: a version directory holding
//
//   saved_model.pb                     SavedModel: MetaGraphDefs, one tagged "serve"
//   variables/variables.index          the checkpoint's table (checkpoint.h)
//   variables/variables.data-*-of-*    the variables' bytes
//   assets/                            files the graph refers to (kept, not read)
//
// is translated at load time into a Lockstep Model, which the runtime then compiles like any
// bundle: nothing of TensorFlow runs. The serving graph's function calls are inlined
// (flat_graph.h), each signature's outputs are traced back to its inputs, and each TensorFlow
// node on the way is translated by the op table (tf_ops.h); variables become constants read
// from the checkpoint, found through the graph's own restore ops (so TF1 names and TF2 object
// paths both work). An op outside the table is an error naming the op and the node, never a
// wrong answer.
//
// Signatures keep the SavedModel's names, keys and dtypes. Their shapes are the declared ones
// with the first dimension left to the caller, as TensorFlow, which does not check a feed
// against its declared shape, lets TF Serving clients batch along it. Where two signatures
// feed the graph at different places (a predict signature feeding "x:0", a classify signature
// feeding serialized examples that are parsed into x), a node whose value differs between
// them is translated once per feeding, named "<signature>/<node>" after the first.
#pragma once

#include <filesystem>
#include <string_view>

#include "runtime/graph.h"
#include "runtime/status.h"
#include "tensorflow/core/protobuf/meta_graph.pb.h"

namespace lockstep {

class Checkpoint;

inline constexpr std::string_view kSavedModelFile = "saved_model.pb";
inline constexpr std::string_view kSavedModelServeTag = "serve";
// Where an imported model's graph metadata keeps the SavedModel's own SignatureDefs (every
// one, "__saved_model_init_op" included, with TensorFlow's tensor names and declared shapes):
// a MetaGraphDef holding only its signature_def map, serialized, in base64. Metadata requests
// answer with them, as TF Serving does.
inline constexpr std::string_view kSignatureDefsMetadataKey = "tensorflow_signature_defs";

// Whether `dir` holds a SavedModel (has a saved_model.pb) rather than a Lockstep bundle.
bool IsSavedModelDir(const std::filesystem::path& dir);

// Reads the SavedModel at `dir` and translates its "serve" graph. Errors name the file, or the
// signature, node and op at fault.
StatusOr<Model> ReadSavedModel(const std::filesystem::path& dir);

// The SavedModel SignatureDefs kept in an imported model's metadata; NotFound when `graph` was
// not imported from a SavedModel.
StatusOr<tensorflow::MetaGraphDef> ImportedSignatureDefs(const Graph& graph);

// The translation alone: `checkpoint` supplies the variables (null: a graph without any).
StatusOr<Model> ImportMetaGraph(const tensorflow::MetaGraphDef& meta_graph, const Checkpoint* checkpoint);

}  // namespace lockstep
