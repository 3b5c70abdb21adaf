#include "server/request_log/prediction_logs.h"

#include "runtime/saved_model/tensor_proto.h"
#include "server/inference.h"

namespace lockstep {

namespace tfs = tensorflow::serving;

namespace {

void FillMetadata(const LoadedVersion& served, std::string_view signature_name, tfs::PredictionLog* log) {
  FillServedSpec(served, signature_name, log->mutable_log_metadata()->mutable_model_spec());
}

void DropValues(tensorflow::TensorProto* tensor) {
  const tensorflow::DataType dtype = tensor->dtype();
  tensorflow::TensorShapeProto shape;
  shape.Swap(tensor->mutable_tensor_shape());
  tensor->Clear();
  tensor->set_dtype(dtype);
  tensor->mutable_tensor_shape()->Swap(&shape);
}

template <typename Map>
void DropMapValues(Map* tensors) {
  for (auto& [key, tensor] : *tensors) DropValues(&tensor);
}

void EmptyExamples(tfs::Input* input) {
  if (input->has_example_list()) {
    for (tensorflow::Example& e : *input->mutable_example_list()->mutable_examples()) e.Clear();
  }
  if (input->has_example_list_with_context()) {
    auto* list = input->mutable_example_list_with_context();
    for (tensorflow::Example& e : *list->mutable_examples()) e.Clear();
    list->mutable_context()->Clear();
  }
}

void EmptyResult(tfs::ClassificationResult* result) {
  for (tfs::Classifications& c : *result->mutable_classifications()) c.Clear();
}

void EmptyResult(tfs::RegressionResult* result) {
  for (tfs::Regression& r : *result->mutable_regressions()) r.Clear();
}

}  // namespace

Status PredictLogFromTensors(const LoadedVersion& served, std::string_view signature_name,
                             std::span<const NamedTensor> inputs, std::span<const NamedTensor> outputs,
                             tfs::PredictionLog* log) {
  FillMetadata(served, signature_name, log);
  tfs::PredictLog* predict = log->mutable_predict_log();
  tfs::PredictRequest* request = predict->mutable_request();
  FillServedSpec(served, signature_name, request->mutable_model_spec());
  for (const NamedTensor& input : inputs) {
    LS_RETURN_IF_ERROR(TensorToProto(input.tensor, &(*request->mutable_inputs())[input.name]));
  }
  tfs::PredictResponse* response = predict->mutable_response();
  FillServedSpec(served, signature_name, response->mutable_model_spec());
  for (const NamedTensor& output : outputs) {
    LS_RETURN_IF_ERROR(TensorToProto(output.tensor, &(*response->mutable_outputs())[output.name]));
  }
  return Status::Ok();
}

void PredictLogFromMessages(const LoadedVersion& served, const tfs::PredictRequest& request,
                            const tfs::PredictResponse& response, tfs::PredictionLog* log) {
  FillMetadata(served, request.model_spec().signature_name(), log);
  log->mutable_predict_log()->mutable_request()->CopyFrom(request);
  log->mutable_predict_log()->mutable_response()->CopyFrom(response);
}

void ClassifyLogFromMessages(const LoadedVersion& served, const tfs::ClassificationRequest& request,
                             const tfs::ClassificationResponse& response, tfs::PredictionLog* log) {
  FillMetadata(served, request.model_spec().signature_name(), log);
  log->mutable_classify_log()->mutable_request()->CopyFrom(request);
  log->mutable_classify_log()->mutable_response()->CopyFrom(response);
}

void RegressLogFromMessages(const LoadedVersion& served, const tfs::RegressionRequest& request,
                            const tfs::RegressionResponse& response, tfs::PredictionLog* log) {
  FillMetadata(served, request.model_spec().signature_name(), log);
  log->mutable_regress_log()->mutable_request()->CopyFrom(request);
  log->mutable_regress_log()->mutable_response()->CopyFrom(response);
}

void MultiInferenceLogFromMessages(const LoadedVersion& served, const tfs::MultiInferenceRequest& request,
                                   const tfs::MultiInferenceResponse& response, tfs::PredictionLog* log) {
  // Its tasks run on several signatures: the metadata names the model and version alone.
  FillServedSpec(served, "", log->mutable_log_metadata()->mutable_model_spec());
  log->mutable_log_metadata()->mutable_model_spec()->clear_signature_name();
  log->mutable_multi_inference_log()->mutable_request()->CopyFrom(request);
  log->mutable_multi_inference_log()->mutable_response()->CopyFrom(response);
}

void ClassifyLogFromResult(const LoadedVersion& served, std::string_view signature_name, const tfs::Input& input,
                           const tfs::ClassificationResult& result, tfs::PredictionLog* log) {
  FillMetadata(served, signature_name, log);
  tfs::ClassifyLog* classify = log->mutable_classify_log();
  FillServedSpec(served, signature_name, classify->mutable_request()->mutable_model_spec());
  classify->mutable_request()->mutable_input()->CopyFrom(input);
  FillServedSpec(served, signature_name, classify->mutable_response()->mutable_model_spec());
  classify->mutable_response()->mutable_result()->CopyFrom(result);
}

void RegressLogFromResult(const LoadedVersion& served, std::string_view signature_name, const tfs::Input& input,
                          const tfs::RegressionResult& result, tfs::PredictionLog* log) {
  FillMetadata(served, signature_name, log);
  tfs::RegressLog* regress = log->mutable_regress_log();
  FillServedSpec(served, signature_name, regress->mutable_request()->mutable_model_spec());
  regress->mutable_request()->mutable_input()->CopyFrom(input);
  FillServedSpec(served, signature_name, regress->mutable_response()->mutable_model_spec());
  regress->mutable_response()->mutable_result()->CopyFrom(result);
}

void TruncatePredictionLog(tfs::PredictionLog* log) {
  log->mutable_log_metadata()->set_truncated(true);
  switch (log->log_type_case()) {
    case tfs::PredictionLog::kPredictLog:
      DropMapValues(log->mutable_predict_log()->mutable_request()->mutable_inputs());
      DropMapValues(log->mutable_predict_log()->mutable_response()->mutable_outputs());
      break;
    case tfs::PredictionLog::kPredictStreamedLog:
      for (auto& r : *log->mutable_predict_streamed_log()->mutable_request()) DropMapValues(r.mutable_inputs());
      for (auto& r : *log->mutable_predict_streamed_log()->mutable_response()) DropMapValues(r.mutable_outputs());
      break;
    case tfs::PredictionLog::kClassifyLog:
      EmptyExamples(log->mutable_classify_log()->mutable_request()->mutable_input());
      EmptyResult(log->mutable_classify_log()->mutable_response()->mutable_result());
      break;
    case tfs::PredictionLog::kRegressLog:
      EmptyExamples(log->mutable_regress_log()->mutable_request()->mutable_input());
      EmptyResult(log->mutable_regress_log()->mutable_response()->mutable_result());
      break;
    case tfs::PredictionLog::kMultiInferenceLog:
      EmptyExamples(log->mutable_multi_inference_log()->mutable_request()->mutable_input());
      for (tfs::InferenceResult& r : *log->mutable_multi_inference_log()->mutable_response()->mutable_results()) {
        if (r.has_classification_result()) EmptyResult(r.mutable_classification_result());
        if (r.has_regression_result()) EmptyResult(r.mutable_regression_result());
      }
      break;
    case tfs::PredictionLog::LOG_TYPE_NOT_SET:
      break;
  }
}

}  // namespace lockstep
