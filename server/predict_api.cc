#include "server/predict_api.h"

#include <algorithm>

#include "runtime/saved_model/tensor_proto.h"
#include "server/inference.h"
#include "server/request_log/prediction_logs.h"

namespace lockstep {

namespace tfs = tensorflow::serving;

Status DecodePredictInputs(const tfs::PredictRequest& request, const Signature& signature,
                           std::vector<NamedTensor>* inputs) {
  // One byte budget for all of a request's tensors, so that several inputs (or splats, whose
  // few wire bytes can stand for many elements) cannot add up past the cap.
  int64_t budget = kMaxRequestTensorBytes;
  inputs->resize(signature.inputs.size());
  for (size_t k = 0; k < signature.inputs.size(); ++k) {
    const TensorBinding& binding = signature.inputs[k];
    const auto it = request.inputs().find(binding.key);
    if (it == request.inputs().end()) {
      return InvalidArgument("input '" + binding.key + "' of signature '" + signature.name + "' is missing");
    }
    NamedTensor& input = (*inputs)[k];
    input.name = binding.key;
    if (Status decoded = TensorFromProto(it->second, budget, &input.tensor); !decoded.ok()) {
      return decoded.WithPrefix("input '" + binding.key + "'");
    }
    budget -= static_cast<int64_t>(input.tensor.byte_size());
  }
  if (inputs->size() != static_cast<size_t>(request.inputs_size())) {
    for (const auto& [key, value] : request.inputs()) {
      bool known = false;
      for (const TensorBinding& b : signature.inputs) known = known || b.key == key;
      if (!known) return InvalidArgument("input '" + key + "' is not an input of signature '" + signature.name + "'");
    }
  }
  return Status::Ok();
}

void PredictApi::Start(const PredictArgs& args, PredictCall* call) const {
  call->api_ = this;
  call->args_ = args;
  call->start_ = std::chrono::steady_clock::now();
  call->record_.protocol = "grpc";
  call->record_.api = "predict";
  const Status started = health_.draining()
                             ? Status(StatusCode::kUnavailable, "the server is draining; retry elsewhere")
                             : Guarded([&] { return call->StartRun(); });
  if (!started.ok()) call->Answer(started);
}

Status PredictCall::StartRun() {
  const tfs::PredictRequest& request = *args_.request;
  LS_ASSIGN_OR_RETURN(ServableRequest spec, ServableRequestFromSpec(request.model_spec()));
  spec.routing_key = args_.routing_key;
  LS_ASSIGN_OR_RETURN(record_.servable, ResolveServable(api_->manager_, spec));
  LS_ASSIGN_OR_RETURN(signature_, FindServingSignature(record_.servable->session(), spec.signature_name));
  record_.signature = signature_->name;
  LS_RETURN_IF_ERROR(DecodePredictInputs(request, *signature_, &inputs_));
  if (std::chrono::steady_clock::now() > args_.deadline) {
    return Status(StatusCode::kDeadlineExceeded, "the request's deadline passed before it could run");
  }
  filter_.assign(request.output_filter().begin(), request.output_filter().end());
  LS_RETURN_IF_ERROR(CheckOutputFilter(*signature_, filter_));
  const GraphRunner runner{record_.servable, &record_, api_->batching_, args_.deadline};
  runner.Start(*signature_, inputs_, &outputs_, this);
  return Status::Ok();
}

void PredictCall::OnBatchDone(Status status) {
  RecordBatchTiming(*this, &record_);
  if (status.ok()) status = Guarded([&] { return WriteResponse(); });
  Answer(status);
}

Status PredictCall::WriteResponse() {
  ApplyOutputFilter(filter_, &outputs_);
  api_->shadow_.MaybeShadow(api_->manager_, *record_.servable, *signature_, inputs_, outputs_);
  // The response may hold the last answer of this call's messages: entries it has no output
  // for go, the others are overwritten in place.
  auto& out = *args_.response->mutable_outputs();
  for (auto it = out.begin(); it != out.end();) {
    const bool answered = std::any_of(outputs_.begin(), outputs_.end(),
                                      [&](const NamedTensor& t) { return t.name == it->first; });
    it = answered ? std::next(it) : out.erase(it);
  }
  for (const NamedTensor& output : outputs_) LS_RETURN_IF_ERROR(TensorToProto(output.tensor, &out[output.name]));
  FillServedSpec(*record_.servable, args_.request->model_spec().signature_name(),
                 args_.response->mutable_model_spec());
  if (api_->logger_ != nullptr) {
    api_->logger_->MaybeLog(record_.servable->model(), args_.request_id, [&](tfs::PredictionLog* log) {
      PredictLogFromMessages(*record_.servable, *args_.request, *args_.response, log);
    });
  }
  return Status::Ok();
}

void PredictCall::Answer(const Status& status) {
  api_->metrics_.Record(record_, status.code(),
                        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
  // Let go of the version, and of large tensors: the call may wait long for its next request.
  if (!KeepCallTensors(inputs_, outputs_)) {
    inputs_.clear();
    outputs_.clear();
  }
  record_ = RequestRecord{};
  signature_ = nullptr;
  OnAnswered(status);
}

}  // namespace lockstep
