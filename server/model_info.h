// Model status and model metadata, shared by REST and gRPC: the protos TensorFlow Serving
// answers with, and their JSON as its REST API prints them.
#pragma once

#include <string>

#include "model_store/manager.h"
#include "runtime/status.h"
#include "tensorflow_serving/apis/get_model_metadata.pb.h"
#include "tensorflow_serving/apis/get_model_status.pb.h"
#include "tensorflow_serving/util/status.pb.h"

namespace lockstep {

// Status <-> TensorFlow's StatusProto (error_code numbered as gRPC's codes, like ours).
void StatusToProto(const Status& status, tensorflow::serving::StatusProto* proto);

// GetModelStatus: every version the manager knows of the model, or the one the spec names
// by version or label.
StatusOr<tensorflow::serving::GetModelStatusResponse> GetModelStatus(
    const ModelManager& manager, const tensorflow::serving::GetModelStatusRequest& request);

// GetModelMetadata: "signature_def" is the only metadata field (as in TF Serving); the
// request must ask for it.
StatusOr<tensorflow::serving::GetModelMetadataResponse> GetModelMetadata(
    const ModelManager& manager, const tensorflow::serving::GetModelMetadataRequest& request);

// The JSON TF Serving's REST API prints: proto3 JSON with field names as in the proto, every
// primitive field printed (int64 as strings), and metadata's Any unpacked:
//   {"model_spec": {...}, "metadata": {"signature_def": {"signature_def": {...}}}}
// Every signature of `graph`, keyed by its name: what GetModelMetadata's "signature_def" holds.
// For a model imported from a TensorFlow SavedModel, the SavedModel's own SignatureDefs.
tensorflow::serving::SignatureDefMap SignatureDefMapFromGraph(const Graph& graph);

std::string ModelStatusJson(const tensorflow::serving::GetModelStatusResponse& response);
StatusOr<std::string> ModelMetadataJson(const tensorflow::serving::GetModelMetadataResponse& response);

}  // namespace lockstep
