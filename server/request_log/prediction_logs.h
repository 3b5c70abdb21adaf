// The PredictionLog record of each kind of answered request (request_logger.h says which kind
// becomes which record), and the one rule that truncates a record too large to keep whole.
#pragma once

#include <span>
#include <string_view>

#include "model_store/loader.h"
#include "runtime/session.h"
#include "runtime/status.h"
#include "tensorflow_serving/apis/prediction_log.pb.h"

namespace lockstep {

// A predict_log from the call's own tensors (REST predict, the Open Inference Protocol's infer):
// the request's inputs and the outputs answered, each by its signature key. An error when a
// tensor has no TensorProto form.
Status PredictLogFromTensors(const LoadedVersion& served, std::string_view signature_name,
                             std::span<const NamedTensor> inputs, std::span<const NamedTensor> outputs,
                             tensorflow::serving::PredictionLog* log);

// Records holding copies of the messages as the client sent them and as the server answered.
void PredictLogFromMessages(const LoadedVersion& served, const tensorflow::serving::PredictRequest& request,
                            const tensorflow::serving::PredictResponse& response,
                            tensorflow::serving::PredictionLog* log);
void ClassifyLogFromMessages(const LoadedVersion& served, const tensorflow::serving::ClassificationRequest& request,
                             const tensorflow::serving::ClassificationResponse& response,
                             tensorflow::serving::PredictionLog* log);
void RegressLogFromMessages(const LoadedVersion& served, const tensorflow::serving::RegressionRequest& request,
                            const tensorflow::serving::RegressionResponse& response,
                            tensorflow::serving::PredictionLog* log);
void MultiInferenceLogFromMessages(const LoadedVersion& served,
                                   const tensorflow::serving::MultiInferenceRequest& request,
                                   const tensorflow::serving::MultiInferenceResponse& response,
                                   tensorflow::serving::PredictionLog* log);

// REST classify and regress: the request their JSON stood for (the model spec as served, the
// examples) and its answer.
void ClassifyLogFromResult(const LoadedVersion& served, std::string_view signature_name,
                           const tensorflow::serving::Input& input,
                           const tensorflow::serving::ClassificationResult& result,
                           tensorflow::serving::PredictionLog* log);
void RegressLogFromResult(const LoadedVersion& served, std::string_view signature_name,
                          const tensorflow::serving::Input& input, const tensorflow::serving::RegressionResult& result,
                          tensorflow::serving::PredictionLog* log);

// The truncation rule: every TensorProto keeps its dtype and shape and loses its values; every
// example (and a list's context) is emptied, so their count stays; classification and
// regression results keep one entry per example, emptied. log_metadata.truncated is set.
void TruncatePredictionLog(tensorflow::serving::PredictionLog* log);

}  // namespace lockstep
