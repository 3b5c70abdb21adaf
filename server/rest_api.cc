#include "server/rest_api.h"

#include <spdlog/spdlog.h>

#include <charconv>
#include <exception>
#include <new>
#include <nlohmann/json.hpp>

#include "server/inference.h"
#include "server/model_info.h"
#include "server/predict_body_reader.h"
#include "server/request_id.h"
#include "server/request_log/prediction_logs.h"
#include "server/rest_json.h"
#include "server/status_mapping.h"

namespace lockstep {

namespace tfs = tensorflow::serving;

namespace {

// ASCII only, and without std::tolower's locale lookup: paths are matched per request.
char AsciiLower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool ConsumePrefixIgnoringCase(std::string_view* s, std::string_view prefix) {
  if (s->size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (AsciiLower((*s)[i]) != prefix[i]) return false;
  }
  s->remove_prefix(prefix.size());
  return true;
}

bool EqualsIgnoringCase(std::string_view s, std::string_view lower) {
  return s.size() == lower.size() && ConsumePrefixIgnoringCase(&s, lower);
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::optional<std::string> UrlDecode(std::string_view s) {
  std::string out;
  if (!UrlDecodeInto(s, &out)) return std::nullopt;
  return out;
}

// The next path segment: up to '/' or ':' (exclusive).
std::string_view TakeSegment(std::string_view* s) {
  size_t end = s->find_first_of("/:");
  if (end == std::string_view::npos) end = s->size();
  std::string_view segment = s->substr(0, end);
  s->remove_prefix(end);
  return segment;
}

}  // namespace

bool UrlDecodeInto(std::string_view s, std::string* out) {
  out->clear();
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      *out += s[i];
      continue;
    }
    if (i + 2 >= s.size()) return false;
    const int hi = HexValue(s[i + 1]), lo = HexValue(s[i + 2]);
    if (hi < 0 || lo < 0) return false;
    *out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return true;
}

Status ParseRestPath(std::string_view method, std::string_view target, RestPath* out) {
  std::string_view path = target.substr(0, target.find('?'));
  // Made only when needed: a request's path is parsed without allocating.
  auto malformed = [&] { return InvalidArgument("Malformed request: " + std::string(method) + " " + std::string(target)); };
  std::string_view rest = path;
  if (!ConsumePrefixIgnoringCase(&rest, "/v1/")) return NotFound("Unknown path: " + std::string(path));
  const bool get = method == "GET";
  if (!get && method != "POST") return malformed();
  if (!ConsumePrefixIgnoringCase(&rest, "models")) return malformed();
  if (rest.empty() || rest == "/") return InvalidArgument("Missing model name in request.");
  if (!ConsumePrefixIgnoringCase(&rest, "/")) return malformed();

  // Into `out`'s strings, reusing their capacity: a connection parses into the same RestPath.
  RestPath& parsed = *out;
  parsed.version.reset();
  bool has_label = false;
  if (!UrlDecodeInto(TakeSegment(&rest), &parsed.model)) return malformed();
  if (parsed.model.empty()) return InvalidArgument("Missing model name in request.");

  while (!rest.empty() && rest.front() == '/') {
    std::string_view probe = rest;
    if (ConsumePrefixIgnoringCase(&probe, "/versions/")) {
      const std::string_view digits = TakeSegment(&probe);
      if (parsed.version || digits.empty()) return malformed();
      int64_t v = 0;
      const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
      if (ec != std::errc() || end != digits.data() + digits.size() || digits.front() == '-') return malformed();
      parsed.version = v;
    } else if (ConsumePrefixIgnoringCase(&probe, "/labels/")) {
      if (has_label) return malformed();
      if (!parsed.label) parsed.label.emplace();
      if (!UrlDecodeInto(TakeSegment(&probe), &*parsed.label) || parsed.label->empty()) return malformed();
      has_label = true;
    } else {
      break;
    }
    rest = probe;
  }
  if (!has_label) parsed.label.reset();
  if (parsed.version && parsed.label) {
    return InvalidArgument("Both model version (" + std::to_string(*parsed.version) + ") and model version label (" +
                           *parsed.label + ") cannot be supplied.");
  }

  if (get) {
    if (rest.empty()) {
      parsed.kind = RestPath::Kind::kStatus;
    } else if (EqualsIgnoringCase(rest, "/metadata")) {
      parsed.kind = RestPath::Kind::kMetadata;
    } else {
      return malformed();
    }
    return Status::Ok();
  }
  if (EqualsIgnoringCase(rest, ":predict")) {
    parsed.kind = RestPath::Kind::kPredict;
  } else if (EqualsIgnoringCase(rest, ":classify")) {
    parsed.kind = RestPath::Kind::kClassify;
  } else if (EqualsIgnoringCase(rest, ":regress")) {
    parsed.kind = RestPath::Kind::kRegress;
  } else {
    return malformed();
  }
  return Status::Ok();
}

StatusOr<RestPath> ParseRestPath(std::string_view method, std::string_view target) {
  RestPath parsed;
  LS_RETURN_IF_ERROR(ParseRestPath(method, target, &parsed));
  return parsed;
}

void RestApi::Start(const RestRequest& request, RestCall* call) const {
  const std::string_view method = request.method, target = request.target;
  call->api_ = this;
  call->method_ = method;
  call->target_ = target;
  call->deadline_ = request.deadline;
  RestResponse* response = &call->response;
  response->model_version = -1;
  response->inference_header_length = 0;
  response->content_type = "application/json";
  const std::string_view path = target.substr(0, target.find('?'));
  if (method == "GET" && (path == "/metrics" || (!monitoring_path_.empty() && path == monitoring_path_))) {
    response->http_status = 200;
    response->body = metrics_.Render();
    response->content_type = metrics::kExpositionContentType;
    call->OnAnswered();
    return;
  }
  call->start_ = std::chrono::steady_clock::now();
  call->record_ = RequestRecord{};
  call->record_.protocol = "rest";
  call->probe_ = false;
  bool pending = false;
  const Status status = Guarded([&] {
    return open_inference::IsV2Target(target) ? DispatchV2(request, call, &pending) : Dispatch(request, call, &pending);
  });
  // A pending call may be answered already, on a batch thread: it is not ours to touch.
  if (!pending) Answer(call, status);
}

void RestCall::OnBatchDone(Status status) {
  if (path_.kind == RestPath::Kind::kPredict) return api_->FinishPredict(this, std::move(status));
  RecordBatchTiming(*this, &record_);
  api_->ContinueExamples(this, Guarded([&] { return examples_run_.Finished(status); }));
}

void RestApi::ContinueExamples(RestCall* call, Status status) const {
  const GraphRunner runner{call->record_.servable, &call->record_, batching_, call->deadline_};
  if (call->examples_run_.Continue(runner, call, &status)) return;  // the call is its batch task's now
  if (status.ok()) {
    status = Guarded([&] {
      const bool classify = call->path_.kind == RestPath::Kind::kClassify;
      if (classify) {
        WriteClassifyResponse(call->classification_, &call->response.body);
      } else {
        WriteRegressResponse(call->regression_, &call->response.body);
      }
      const LoadedVersion& served = *call->record_.servable;
      call->response.model_version = served.version();
      if (logger_ != nullptr) {
        logger_->MaybeLog(served.model(), call->request_id, [&](tfs::PredictionLog* log) {
          if (classify) {
            ClassifyLogFromResult(served, call->record_.signature, call->examples_, call->classification_, log);
          } else {
            RegressLogFromResult(served, call->record_.signature, call->examples_, call->regression_, log);
          }
        });
      }
      return Status::Ok();
    });
  }
  Answer(call, status);
}

void RestApi::FinishPredict(RestCall* call, Status status) const {
  RecordBatchTiming(*call, &call->record_);
  if (status.ok()) {
    status = Guarded([&] {
      shadow_.MaybeShadow(manager_, *call->record_.servable, *call->signature_, call->inputs_, call->outputs_);
      LS_RETURN_IF_ERROR(WritePredictResponse(call->row_format_, call->outputs_, &call->response.body));
      const LoadedVersion& served = *call->record_.servable;
      call->response.model_version = served.version();
      if (logger_ != nullptr) {
        logger_->MaybeLog(served.model(), call->request_id, [&](tfs::PredictionLog* log) {
          return PredictLogFromTensors(served, call->signature_->name, call->inputs_, call->outputs_, log);
        });
      }
      return Status::Ok();
    });
  }
  Answer(call, status);
}

void RestApi::Answer(RestCall* call, const Status& status) const {
  if (!call->record_.api.empty()) {
    metrics_.Record(call->record_, status.code(),
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - call->start_).count());
  }
  // Let go of the version, and of large tensors: the call may wait long for its next request.
  // Small ones stay, so that the next request of the same shape decodes and runs into them.
  if (!KeepCallTensors(call->inputs_, call->outputs_)) {
    call->inputs_.clear();
    call->outputs_.clear();
  }
  call->body_reader_.ReleaseIfLarge();
  call->examples_.Clear();
  call->classification_.Clear();
  call->regression_.Clear();
  call->record_ = RequestRecord{};
  call->signature_ = nullptr;
  RestResponse* response = &call->response;
  if (status.ok()) {
    response->http_status = 200;
    return call->OnAnswered();
  }
  std::string* request_id = &call->request_id;
  if (request_id->empty()) *request_id = NewRequestId();
  response->http_status = HttpStatusFor(status.code());
  response->body = ErrorJson(status.message());
  response->content_type = "application/json";
  response->inference_header_length = 0;
  if (response->http_status >= 500 && !call->probe_) {
    spdlog::warn("event=rest_error request_id={} method={} target={} http_status={} error=\"{}\"", *request_id,
                 call->method_, call->target_, response->http_status, status.message());
  } else {
    spdlog::debug("event=rest_rejected request_id={} method={} target={} http_status={} error=\"{}\"", *request_id,
                  call->method_, call->target_, response->http_status, status.message());
  }
  call->OnAnswered();
}

Status RestApi::Health(std::string_view path, RestResponse* response) const {
  if (path == "/v2/health/live") {
    response->body = R"({"live": true})";
    return Status::Ok();
  }
  if (path == "/v2/health/ready") {
    LS_RETURN_IF_ERROR(health_.Ready());
    response->body = R"({"ready": true})";
    return Status::Ok();
  }
  // /v2/models/{m}[/versions/{v}]/ready
  std::string_view rest = path;
  const std::string_view ready_suffix = "/ready";
  if (!ConsumePrefixIgnoringCase(&rest, "/v2/models/") || rest.size() <= ready_suffix.size() ||
      rest.substr(rest.size() - ready_suffix.size()) != ready_suffix) {
    return NotFound("no such path: " + std::string(path));
  }
  rest.remove_suffix(ready_suffix.size());
  std::optional<int64_t> version;
  if (const size_t v = rest.find("/versions/"); v != std::string_view::npos) {
    const std::string_view digits = rest.substr(v + 10);
    int64_t parsed = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), parsed);
    if (ec != std::errc() || end != digits.data() + digits.size() || digits.empty()) {
      return InvalidArgument("Malformed request: version '" + std::string(digits) + "' is not a number");
    }
    version = parsed;
    rest = rest.substr(0, v);
  }
  const std::optional<std::string> model = UrlDecode(rest);
  if (!model || model->empty() || model->find('/') != std::string::npos) {
    return InvalidArgument("Malformed request: bad model name in " + std::string(path));
  }
  LS_RETURN_IF_ERROR(health_.ModelReady(*model, version));
  response->body = R"({"name": )" + nlohmann::json(*model).dump() + R"(, "ready": true})";
  return Status::Ok();
}

Status RestApi::DispatchV2(const RestRequest& rest, RestCall* call, bool* pending) const {
  namespace oi = open_inference;
  oi::RestPath& path = call->v2_path_;
  LS_RETURN_IF_ERROR(oi::ParseRestPath(rest.method, rest.target, &path));
  RestResponse* response = &call->response;
  switch (path.kind) {
    case oi::RestPath::Kind::kServer:
      response->body = oi::ServerMetadataJson(oi::ServerMetadata());
      return Status::Ok();
    case oi::RestPath::Kind::kHealth:
    case oi::RestPath::Kind::kModelReady:
      // A probe that finds the server not ready is routine, not a server error worth a warning.
      call->probe_ = true;
      return Health(rest.target.substr(0, rest.target.find('?')), response);
    case oi::RestPath::Kind::kMetadata: {
      inference::ModelMetadataResponse metadata;
      LS_RETURN_IF_ERROR(oi::ModelMetadata(manager_, path.model, path.version, path.signature_name, &metadata));
      response->body = oi::ModelMetadataJson(metadata);
      return Status::Ok();
    }
    case oi::RestPath::Kind::kStatistics: {
      inference::ModelStatisticsResponse statistics;
      LS_RETURN_IF_ERROR(oi::ModelStatistics(manager_, metrics_, path.model, path.version, &statistics));
      response->body = oi::ModelStatisticsJson(statistics);
      return Status::Ok();
    }
    case oi::RestPath::Kind::kIndex: {
      if (!repository_.models) return NotFound("Unknown path: /v2/repository/index");
      LS_ASSIGN_OR_RETURN(const bool ready_only, oi::ParseRepositoryIndexBody(rest.body));
      response->body = oi::RepositoryIndexJson(oi::RepositoryIndex(manager_, repository_, ready_only));
      return Status::Ok();
    }
    case oi::RestPath::Kind::kLoad:
    case oi::RestPath::Kind::kUnload: {
      if (!repository_.set_loaded) return NotFound("Unknown path: " + std::string(rest.target));
      const bool load = path.kind == oi::RestPath::Kind::kLoad;
      const std::string_view operation = load ? "RepositoryModelLoad" : "RepositoryModelUnload";
      if (Status allowed = admin_.Check(operation, rest.peer, rest.authorization, rest.origin); !allowed.ok()) {
        spdlog::warn("event=admin_refused method={} peer={} error=\"{}\"", operation, rest.peer, allowed.message());
        return allowed;
      }
      // Runs on this I/O thread for as long as the loads take: a rare operator's call.
      LS_RETURN_IF_ERROR(repository_.set_loaded(path.model, load));
      response->body = "{}";
      return Status::Ok();
    }
    case oi::RestPath::Kind::kInfer: {
      RestInferCall& infer = call->infer_;
      infer.body_ = rest.body;
      infer.header_length_ = rest.inference_header_length;
      // From here the answer comes through the infer call (RestInferCall::OnAnswered).
      *pending = true;
      infer_.Start({path.model, path.version, rest.routing_key, oi::kRestProtocol, rest.deadline}, &infer);
      return Status::Ok();
    }
  }
  return Internal("unhandled v2 path kind");
}

Status RestInferCall::ReadRequest(open_inference::InferRequest* request) {
  LS_RETURN_IF_ERROR(reader_.Start(body_, header_length_));
  return reader_.ReadRequest(request);
}

Status RestInferCall::WriteResponse(std::span<const open_inference::AnsweredOutput> outputs) {
  RestResponse& response = owner_.response;
  response.inference_header_length = open_inference::WriteInferResponse(
      servable().model(), servable().version(), request().id, outputs, &response.body);
  if (response.inference_header_length > 0) response.content_type = "application/octet-stream";
  response.model_version = servable().version();
  return Status::Ok();
}

void RestInferCall::OnAnswered(const Status& status) {
  reader_.ReleaseIfLarge();
  owner_.api_->Answer(&owner_, status);
}

StatusOr<const Signature*> RestApi::ReadPredictBody(std::string_view body, const ServableRequest& request,
                                                    RestCall* call) const {
  // The fast reader first (predict_body_reader.h); the DOM path for what it declines.
  PredictBodyReader& reader = call->body_reader_;
  std::optional<PredictBody> dom;
  const bool fast = reader.Start(body);
  if (!fast) {
    LS_ASSIGN_OR_RETURN(dom, ParsePredictBody(body));
  }
  // The fast reader skips the values it has not read yet, where the DOM path has parsed them:
  // an error found before the body's own is the body's if the DOM path finds one.
  auto body_error_first = [&](const Status& error) -> Status {
    if (dom) return error;
    StatusOr<PredictBody> parsed = ParsePredictBody(body);
    return parsed.ok() ? error : parsed.status();
  };
  StatusOr<ServableHandle> servable = ResolveServable(manager_, request);
  if (!servable.ok()) return body_error_first(servable.status());
  call->record_.servable = std::move(servable).value();
  StatusOr<const Signature*> signature = FindServingSignature(
      call->record_.servable->session(), dom ? std::string_view(dom->signature_name) : reader.signature_name());
  if (!signature.ok()) return body_error_first(signature.status());
  call->record_.signature = (*signature)->name;
  if (fast && reader.DecodeInputs(**signature, &call->inputs_)) {
    call->row_format_ = reader.row_format();
    return signature;
  }
  if (!dom) {
    LS_ASSIGN_OR_RETURN(dom, ParsePredictBody(body));
  }
  LS_ASSIGN_OR_RETURN(call->inputs_, DecodePredictInputs(*dom, **signature));
  call->row_format_ = dom->row_format;
  return signature;
}

Status RestApi::Dispatch(const RestRequest& rest, RestCall* call, bool* pending) const {
  const std::string_view body = rest.body;
  RequestRecord* record = &call->record_;
  RestResponse* response = &call->response;
  LS_RETURN_IF_ERROR(ParseRestPath(rest.method, rest.target, &call->path_));
  const RestPath& path = call->path_;
  // Status and metadata take a ModelSpec; inference goes straight to the servable.
  auto spec = [&path] {
    tfs::ModelSpec spec;
    spec.set_name(path.model);
    if (path.version) spec.mutable_version()->set_value(*path.version);
    if (path.label) spec.set_version_label(*path.label);
    return spec;
  };
  ServableRequest request;
  request.model = path.model;
  request.version = path.version;
  if (path.label) request.label = *path.label;
  request.routing_key = rest.routing_key;

  switch (path.kind) {
    case RestPath::Kind::kStatus: {
      tfs::GetModelStatusRequest status_request;
      *status_request.mutable_model_spec() = spec();
      LS_ASSIGN_OR_RETURN(const tfs::GetModelStatusResponse status, GetModelStatus(manager_, status_request));
      response->body = ModelStatusJson(status);
      return Status::Ok();
    }
    case RestPath::Kind::kMetadata: {
      tfs::GetModelMetadataRequest metadata_request;
      *metadata_request.mutable_model_spec() = spec();
      metadata_request.add_metadata_field("signature_def");
      LS_ASSIGN_OR_RETURN(const tfs::GetModelMetadataResponse metadata, GetModelMetadata(manager_, metadata_request));
      LS_ASSIGN_OR_RETURN(response->body, ModelMetadataJson(metadata));
      return Status::Ok();
    }
    case RestPath::Kind::kPredict: {
      record->api = "predict";
      LS_ASSIGN_OR_RETURN(const Signature* signature, ReadPredictBody(body, request, call));
      call->signature_ = signature;
      // From here the answer comes through the call's batch task (FinishPredict).
      *pending = true;
      const GraphRunner runner{record->servable, record, batching_, rest.deadline};
      runner.Start(*signature, call->inputs_, &call->outputs_, call);
      return Status::Ok();
    }
    case RestPath::Kind::kClassify:
    case RestPath::Kind::kRegress: {
      record->api = path.kind == RestPath::Kind::kClassify ? "classify" : "regress";
      std::string signature_name;
      LS_ASSIGN_OR_RETURN(call->examples_, InputFromJson(body, &signature_name));
      LS_ASSIGN_OR_RETURN(record->servable, ResolveServable(manager_, request));
      LS_ASSIGN_OR_RETURN(const Signature* signature,
                          FindServingSignature(record->servable->session(), signature_name));
      record->signature = signature->name;
      call->examples_run_.Begin(call->examples_);
      if (path.kind == RestPath::Kind::kClassify) {
        call->examples_run_.AddClassify(*signature, &call->classification_);
      } else {
        call->examples_run_.AddRegress(*signature, &call->regression_);
      }
      // From here the answer comes through ContinueExamples.
      *pending = true;
      ContinueExamples(call, Status::Ok());
      return Status::Ok();
    }
  }
  return Internal("unhandled REST path kind");
}

}  // namespace lockstep
