#include "server/open_inference/infer_api.h"

#include <charconv>

#include "server/open_inference/datatype.h"
#include "server/request_log/prediction_logs.h"

namespace lockstep::open_inference {

RequestedOutput& InferRequest::AddOutput() {
  if (num_outputs == outputs.size()) outputs.emplace_back();
  RequestedOutput& output = outputs[num_outputs++];
  output.name.clear();
  output.binary = false;
  output.binary_given = false;
  return output;
}

Status ParseVersion(std::string_view version, ServableRequest* request) {
  request->version.reset();
  request->label.reset();
  if (version.empty()) return Status::Ok();
  if (version.find_first_not_of("0123456789") != std::string_view::npos) {
    request->label = version;
    return Status::Ok();
  }
  int64_t number = 0;
  const auto [end, ec] = std::from_chars(version.data(), version.data() + version.size(), number);
  if (ec != std::errc() || end != version.data() + version.size()) {
    return InvalidArgument("model version '" + std::string(version) + "' is out of range");
  }
  request->version = number;
  return Status::Ok();
}

NamedTensor& InferRequest::AddInput(std::string_view name) {
  if (num_inputs == inputs.size()) inputs.emplace_back();
  NamedTensor& input = inputs[num_inputs++];
  input.name.assign(name);
  return input;
}

StatusOr<DType> InputDType(std::string_view input, std::string_view datatype) {
  StatusOr<DType> dtype = DTypeFromDatatype(datatype);
  if (!dtype.ok()) return dtype.status().WithPrefix("input '" + std::string(input) + "'");
  return dtype;
}

Status BindInputs(const Signature& signature, InferRequest& request, std::vector<NamedTensor>* inputs,
                  std::vector<bool>* bound) {
  const std::vector<TensorBinding>& bindings = signature.inputs;
  inputs->resize(bindings.size());
  bound->assign(bindings.size(), false);
  for (size_t i = 0; i < request.num_inputs; ++i) {
    NamedTensor& given = request.inputs[i];
    size_t k = 0;
    while (k < bindings.size() && bindings[k].key != given.name) ++k;
    if (k == bindings.size()) {
      std::string known;
      for (const TensorBinding& b : bindings) known += (known.empty() ? "" : ", ") + b.key;
      return InvalidArgument("unknown input '" + given.name + "': signature '" + signature.name + "' takes " +
                             known);
    }
    if ((*bound)[k]) return InvalidArgument("input '" + given.name + "' is given twice");
    if (given.tensor.dtype() != bindings[k].dtype) {
      return InvalidArgument("input '" + given.name + "' has datatype " +
                             std::string(DatatypeName(given.tensor.dtype())) + ", but the model takes " +
                             std::string(DatatypeName(bindings[k].dtype)));
    }
    (*bound)[k] = true;
    NamedTensor& input = (*inputs)[k];
    if (input.name != bindings[k].key) input.name = bindings[k].key;
    std::swap(input.tensor, given.tensor);
  }
  for (size_t k = 0; k < bindings.size(); ++k) {
    if (!(*bound)[k]) {
      return InvalidArgument("input '" + bindings[k].key + "' of signature '" + signature.name + "' is missing");
    }
  }
  return Status::Ok();
}

Status AddShapeDim(std::string_view input, int64_t dim, Shape* shape) {
  if (dim < 0) {
    return InvalidArgument("input '" + std::string(input) + "': shape dimension " + std::to_string(dim) +
                           " is negative");
  }
  if (!shape->AddDim(dim)) {
    return InvalidArgument("input '" + std::string(input) + "': shape has more than " +
                           std::to_string(Shape::kMaxRank) + " dimensions");
  }
  return Status::Ok();
}

Status CheckShapeElements(std::string_view input, const Shape& shape, int64_t max_elements) {
  // Any shape's dimensions must multiply within Shape::kMaxElements, zeros aside (so that
  // [0, 2^36] is a shape of no elements whatever carries it); then its elements must fit.
  if (!shape.CheckedNumElements(Shape::kMaxElements).ok() || shape.num_elements() > max_elements) {
    return InvalidArgument("input '" + std::string(input) + "': shape " + shape.ToString() +
                           " has more elements than the request carries");
  }
  return Status::Ok();
}

size_t InferCall::retained_tensor_bytes() const {
  size_t bytes = 0;
  for (const auto* tensors : {&request_.inputs, &inputs_, &outputs_}) {
    for (const NamedTensor& t : *tensors) bytes += t.tensor.byte_size();
  }
  return bytes;
}

Status TakeTensorBytes(std::string_view input, DType dtype, const Shape& shape, InferRequest* request) {
  // The shape was checked against the request's bytes (at most 2^40 elements), and an element
  // takes at most 32 bytes, so the product fits.
  const int64_t bytes = shape.num_elements() * static_cast<int64_t>(DTypeSize(dtype));
  if (bytes > request->tensor_bytes_left) {
    return InvalidArgument("input '" + std::string(input) + "': " + std::string(DatatypeName(dtype)) +
                           shape.ToString() + " would take the request's inputs past the limit of " +
                           std::to_string(kMaxRequestTensorBytes) + " bytes");
  }
  request->tensor_bytes_left -= bytes;
  return Status::Ok();
}

void InferApi::Start(const InferArgs& args, InferCall* call) const {
  call->api_ = this;
  call->args_ = args;
  call->start_ = std::chrono::steady_clock::now();
  call->record_.protocol = args.protocol;
  call->record_.api = "infer";
  const Status started = health_.draining()
                             ? Status(StatusCode::kUnavailable, "the server is draining; retry elsewhere")
                             : Guarded([&] { return call->StartRun(); });
  if (!started.ok()) call->Finish(started);
}

Status InferCall::StartRun() {
  request_.Clear();
  LS_RETURN_IF_ERROR(ReadRequest(&request_));
  ServableRequest spec;
  spec.model = args_.model;
  if (spec.model.empty()) return InvalidArgument("missing model name");
  LS_RETURN_IF_ERROR(ParseVersion(args_.version, &spec));
  spec.routing_key = args_.routing_key;
  LS_ASSIGN_OR_RETURN(record_.servable, ResolveServable(api_->manager_, spec));
  LS_ASSIGN_OR_RETURN(signature_, FindServingSignature(record_.servable->session(), request_.signature_name));
  record_.signature = signature_->name;
  // The outputs asked for, checked before anything runs.
  answered_.clear();
  const std::vector<TensorBinding>& outputs = signature_->outputs;
  for (size_t i = 0; i < request_.num_outputs; ++i) {
    const RequestedOutput& wanted = request_.outputs[i];
    size_t k = 0;
    while (k < outputs.size() && outputs[k].key != wanted.name) ++k;
    if (k == outputs.size()) {
      std::string known;
      for (const TensorBinding& b : outputs) known += (known.empty() ? "" : ", ") + b.key;
      return InvalidArgument("unknown output '" + wanted.name + "': signature '" + signature_->name +
                             "' has outputs " + known);
    }
    for (size_t j = 0; j < i; ++j) {
      if (request_.outputs[j].name == wanted.name) {
        return InvalidArgument("output '" + wanted.name + "' is requested twice");
      }
    }
  }
  LS_RETURN_IF_ERROR(BindInputs(*signature_, request_, &inputs_, &bound_));
  if (std::chrono::steady_clock::now() > args_.deadline) {
    return Status(StatusCode::kDeadlineExceeded, "the request's deadline passed before it could run");
  }
  const GraphRunner runner{record_.servable, &record_, api_->batching_, args_.deadline};
  runner.Start(*signature_, inputs_, &outputs_, this);
  return Status::Ok();
}

void InferCall::OnBatchDone(Status status) {
  RecordBatchTiming(*this, &record_);
  if (status.ok()) status = Guarded([&] { return Answer(); });
  Finish(status);
}

Status InferCall::Answer() {
  api_->shadow_.MaybeShadow(api_->manager_, *record_.servable, *signature_, inputs_, outputs_);
  // The graph's outputs come in the signature's order, named by their keys.
  auto find = [&](std::string_view name) -> const NamedTensor* {
    for (const NamedTensor& output : outputs_) {
      if (output.name == name) return &output;
    }
    return nullptr;
  };
  answered_.clear();
  if (request_.num_outputs == 0) {
    for (const NamedTensor& output : outputs_) answered_.push_back({&output, request_.binary_data_output});
  } else {
    for (size_t i = 0; i < request_.num_outputs; ++i) {
      const NamedTensor* output = find(request_.outputs[i].name);
      if (output == nullptr) return Internal("the graph did not produce output '" + request_.outputs[i].name + "'");
      answered_.push_back({output, request_.outputs[i].binary});
    }
  }
  LS_RETURN_IF_ERROR(WriteResponse(answered_));
  if (api_->logger_ != nullptr) {
    const LoadedVersion& served = *record_.servable;
    api_->logger_->MaybeLog(served.model(), request_.id, [&](tensorflow::serving::PredictionLog* log) {
      if (request_.num_outputs == 0) return PredictLogFromTensors(served, signature_->name, inputs_, outputs_, log);
      std::vector<NamedTensor> asked;
      for (const AnsweredOutput& a : answered_) asked.push_back(*a.output);
      return PredictLogFromTensors(served, signature_->name, inputs_, asked, log);
    });
  }
  return Status::Ok();
}

void InferCall::Finish(const Status& status) {
  api_->metrics_.Record(record_, status.code(),
                        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
  // Let go of large tensors: the call may wait long for its next request.
  if (!KeepCallTensors(inputs_, outputs_) ||
      !KeepCallTensors(std::span(request_.inputs).first(request_.num_inputs), {})) {
    inputs_.clear();
    outputs_.clear();
    request_.inputs.clear();
    request_.num_inputs = 0;
  }
  answered_.clear();
  record_ = RequestRecord{};  // lets go of the version: a pooled call must not keep it loaded
  signature_ = nullptr;
  OnAnswered(status);
}

}  // namespace lockstep::open_inference
