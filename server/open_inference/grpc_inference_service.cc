#include "server/open_inference/grpc_inference_service.h"

#include <spdlog/spdlog.h>

#include <deque>

#include "server/open_inference/proto_infer.h"

namespace lockstep::open_inference {

// A v2 infer on protobuf messages: proto_infer.h's codec on InferApi's path. The transport's
// subclass says where the answer goes.
class InferenceServiceImpl::ProtoInferCall : public InferCall {
 protected:
  void Serve(const InferApi& api, grpc::CallbackServerContext* context, const inference::ModelInferRequest* request,
             inference::ModelInferResponse* response) {
    request_ = request;
    response_ = response;
    api.Start({request->model_name(), request->model_version(), RoutingKey(*context), kGrpcProtocol,
               SteadyDeadline(*context)},
              this);
  }
  const inference::ModelInferRequest* request_ = nullptr;
  inference::ModelInferResponse* response_ = nullptr;

 private:
  Status ReadRequest(InferRequest* request) override { return ReadInferRequest(*request_, request); }
  Status WriteResponse(std::span<const AnsweredOutput> outputs) override {
    WriteInferResponse(servable().model(), servable().version(), request().id, outputs, response_);
    return Status::Ok();
  }
};

// One ModelInfer call, pooled: a steady load reuses the calls and, with them, their tensors.
class InferenceServiceImpl::UnaryCall final : public ProtoInferCall {
 public:
  explicit UnaryCall(InferenceServiceImpl& service) : service_(service) {}

  void Start(std::unique_ptr<UnaryCall> self, grpc::CallbackServerContext* context, grpc::ServerUnaryReactor* reactor,
             const inference::ModelInferRequest* request, inference::ModelInferResponse* response) {
    self_ = std::move(self);
    context_ = context;
    reactor_ = reactor;
    Serve(service_.infer_, context, request, response);
  }

 private:
  // The last thing the call does: back into the pool, then the answer.
  void OnAnswered(const Status& status) override {
    grpc::ServerUnaryReactor* reactor = reactor_;
    const grpc::Status finished = FinishCall(context_, "ModelInfer", status);
    InferenceServiceImpl& service = service_;
    service.pool_.Release(std::move(self_));
    reactor->Finish(finished);
    service.in_flight_.fetch_sub(1);
  }

  InferenceServiceImpl& service_;
  std::unique_ptr<UnaryCall> self_;  // owns this call while it is in flight
  grpc::CallbackServerContext* context_ = nullptr;
  grpc::ServerUnaryReactor* reactor_ = nullptr;  // the context's default reactor (made once)
};

// One request of a ModelStreamInfer stream, with its own messages.
class InferenceServiceImpl::StreamCall final : public ProtoInferCall {
 public:
  explicit StreamCall(Stream& stream) : stream_(stream) {}
  inference::ModelInferRequest request;
  inference::ModelStreamInferResponse answer;

  void Start(const InferApi& api, grpc::CallbackServerContext* context) {
    // Not answer.Clear(), which would free the response that the answer reuses.
    answer.clear_error_message();
    Serve(api, context, &request, answer.mutable_infer_response());
  }

 private:
  void OnAnswered(const Status& status) override;
  Stream& stream_;
};

// A ModelStreamInfer stream: reads requests while fewer than kMaxStreamInFlight run, writes each
// answer as its request completes (one write at a time, the others queued), and finishes once
// the client is done sending, or the server is draining, and every answer is written.
class InferenceServiceImpl::Stream final
    : public grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse> {
 public:
  Stream(InferenceServiceImpl& service, grpc::CallbackServerContext* context) : service_(service), context_(context) {
    // Both locks, in their order, so that a drain either sees this stream or this stream sees
    // the drain: never a read started after the drain finished it.
    std::lock_guard<std::mutex> streams(service_.streams_mu_);
    service_.streams_.insert(this);
    std::lock_guard<std::mutex> lock(mu_);
    if (service_.finishing_streams_) {
      draining_ = true;
      MaybeFinishLocked();
    } else {
      ReadNext();
    }
  }

  // The drain's end of the stream: no more reads; finished once every read request is answered.
  // Called with the service's streams_mu_ held.
  void Drain() {
    std::lock_guard<std::mutex> lock(mu_);
    draining_ = true;
    MaybeFinishLocked();
  }

  // A request's answer: queued, and written when the stream's writes reach it.
  void Answered(StreamCall* call, const Status& status) {
    if (!status.ok()) {
      const std::string& id = call->request.id();
      call->answer.set_error_message(status.message());
      inference::ModelInferResponse* response = call->answer.mutable_infer_response();
      response->Clear();
      // The failed request's id, so that a client matching answers by id finds it.
      response->set_id(id);
      spdlog::debug("event=grpc_stream_error method=ModelStreamInfer id={} code={} error=\"{}\"", id,
                    StatusCodeName(status.code()), status.message());
    }
    // Still in flight until written (OnWriteDone): a drain waits for the answer to leave.
    std::lock_guard<std::mutex> lock(mu_);
    written_.push_back(call);
    if (written_.size() == 1) StartWrite(&call->answer);
  }

 private:
  void ReadNext() {
    // Called with mu_ held.
    if (free_.empty()) free_.push_back(std::make_unique<StreamCall>(*this));
    reading_ = std::move(free_.back());
    free_.pop_back();
    StartRead(&reading_->request);
  }

  void OnReadDone(bool ok) override {
    std::unique_lock<std::mutex> lock(mu_);
    // After Finish nothing more may be written: a request that arrived as the drain finished the
    // stream is dropped, and the stream's UNAVAILABLE status tells the client to send it again.
    if (!ok || finished_) {
      read_done_ = true;
      free_.push_back(std::move(reading_));
      MaybeFinishLocked();
      return;
    }
    StreamCall* call = reading_.get();
    running_.push_back(std::move(reading_));
    // Back-pressure: the next read waits for a request to complete past the cap. A draining
    // stream reads no more.
    if (!draining_) {
      if (running_.size() < static_cast<size_t>(kMaxStreamInFlight)) {
        ReadNext();
      } else {
        read_blocked_ = true;
      }
    }
    lock.unlock();
    service_.in_flight_.fetch_add(1);
    call->Start(service_.infer_, context_);
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mu_);
    StreamCall* done = written_.front();
    written_.pop_front();
    for (auto it = running_.begin(); it != running_.end(); ++it) {
      if (it->get() != done) continue;
      // A call that carried a large request keeps its capacity only until the next: a stream
      // holds up to kMaxStreamInFlight of them.
      if (done->retained_tensor_bytes() + done->request.SpaceUsedLong() + done->answer.SpaceUsedLong() <=
          kMaxPooledStreamCallBytes) {
        free_.push_back(std::move(*it));
      }
      running_.erase(it);
      break;
    }
    service_.in_flight_.fetch_sub(1);
    if (!ok) write_failed_ = true;  // the client went away; the rest is answered into nothing
    if (!written_.empty()) {
      StartWrite(&written_.front()->answer);
    }
    if (read_blocked_ && !read_done_ && !draining_) {
      read_blocked_ = false;
      ReadNext();
    }
    MaybeFinishLocked();
  }

  void MaybeFinishLocked() {
    if (!(read_done_ || draining_) || !running_.empty() || finished_) return;
    finished_ = true;
    if (write_failed_) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the client cancelled the stream"));
    } else if (draining_ && !read_done_) {
      Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is shutting down"));
    } else {
      Finish(grpc::Status::OK);
    }
  }

  void OnDone() override {
    {
      std::lock_guard<std::mutex> lock(service_.streams_mu_);
      service_.streams_.erase(this);
    }
    delete this;  // gRPC's reactor contract: the stream ends here
  }

  InferenceServiceImpl& service_;
  grpc::CallbackServerContext* const context_;
  std::mutex mu_;
  std::unique_ptr<StreamCall> reading_;
  std::vector<std::unique_ptr<StreamCall>> running_;  // read and not yet written
  std::vector<std::unique_ptr<StreamCall>> free_;
  std::deque<StreamCall*> written_;  // answered, waiting for their write; the front is being written
  bool read_done_ = false;  // the client is done sending
  bool draining_ = false;
  bool read_blocked_ = false;
  bool write_failed_ = false;
  bool finished_ = false;
};

void InferenceServiceImpl::StreamCall::OnAnswered(const Status& status) { stream_.Answered(this, status); }

InferenceServiceImpl::InferenceServiceImpl(const ModelManager& manager, ServingMetrics& metrics,
                                           const ServerHealth& health, ShadowRunner& shadow, BatchScheduler* batching)
    : manager_(manager), metrics_(metrics), health_(health), infer_(manager, metrics, health, shadow, batching) {
  SetMessageAllocatorFor_ModelInfer(&infer_messages_);
}

InferenceServiceImpl::~InferenceServiceImpl() = default;

grpc::ServerUnaryReactor* InferenceServiceImpl::ServerLive(grpc::CallbackServerContext* context,
                                                           const inference::ServerLiveRequest*,
                                                           inference::ServerLiveResponse* response) {
  response->set_live(true);
  return FinishNow(context, "ServerLive", Status::Ok());
}

grpc::ServerUnaryReactor* InferenceServiceImpl::ServerReady(grpc::CallbackServerContext* context,
                                                            const inference::ServerReadyRequest*,
                                                            inference::ServerReadyResponse* response) {
  response->set_ready(health_.Ready().ok());
  return FinishNow(context, "ServerReady", Status::Ok());
}

grpc::ServerUnaryReactor* InferenceServiceImpl::ModelReady(grpc::CallbackServerContext* context,
                                                           const inference::ModelReadyRequest* request,
                                                           inference::ModelReadyResponse* response) {
  ServableRequest spec;
  Status status = ParseVersion(request->version(), &spec);
  if (status.ok() && spec.label) {
    status = InvalidArgument("model version '" + request->version() + "' is not a number");
  }
  if (status.ok()) {
    status = health_.ModelReady(request->name(), spec.version);
    response->set_ready(status.ok());
    // Not ready is an answer; a model the server does not have is NOT_FOUND.
    if (status.code() == StatusCode::kUnavailable) status = Status::Ok();
  }
  return FinishNow(context, "ModelReady", status);
}

grpc::ServerUnaryReactor* InferenceServiceImpl::ServerMetadata(grpc::CallbackServerContext* context,
                                                               const inference::ServerMetadataRequest*,
                                                               inference::ServerMetadataResponse* response) {
  *response = open_inference::ServerMetadata();
  return FinishNow(context, "ServerMetadata", Status::Ok());
}

grpc::ServerUnaryReactor* InferenceServiceImpl::ModelMetadata(grpc::CallbackServerContext* context,
                                                              const inference::ModelMetadataRequest* request,
                                                              inference::ModelMetadataResponse* response) {
  // TF Serving's signature choice travels as metadata here: ModelMetadataRequest has no parameters.
  const Status status = Guarded([&] {
    return open_inference::ModelMetadata(manager_, request->name(), request->version(),
                                         ClientMetadata(*context, "signature-name"), response);
  });
  return FinishNow(context, "ModelMetadata", status);
}

grpc::ServerUnaryReactor* InferenceServiceImpl::ModelInfer(grpc::CallbackServerContext* context,
                                                           const inference::ModelInferRequest* request,
                                                           inference::ModelInferResponse* response) {
  // Counted before the drain check, so that a drain that sees none in flight knows every later
  // call will see it draining.
  in_flight_.fetch_add(1);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  std::unique_ptr<UnaryCall> call = pool_.Acquire(*this);
  UnaryCall& started = *call;
  started.Start(std::move(call), context, reactor, request, response);
  return reactor;
}

int InferenceServiceImpl::in_flight() const {
  std::lock_guard<std::mutex> lock(streams_mu_);
  return in_flight_.load() + static_cast<int>(streams_.size());
}

void InferenceServiceImpl::FinishStreams() {
  std::lock_guard<std::mutex> lock(streams_mu_);
  finishing_streams_ = true;
  for (Stream* stream : streams_) stream->Drain();
}

grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse>*
InferenceServiceImpl::ModelStreamInfer(grpc::CallbackServerContext* context) {
  return new Stream(*this, context);  // gRPC's reactor contract: deleted in OnDone
}

grpc::ServerUnaryReactor* InferenceServiceImpl::ModelStatistics(grpc::CallbackServerContext* context,
                                                                const inference::ModelStatisticsRequest* request,
                                                                inference::ModelStatisticsResponse* response) {
  const Status status = Guarded([&] {
    return open_inference::ModelStatistics(manager_, metrics_, request->name(), request->version(), response);
  });
  return FinishNow(context, "ModelStatistics", status);
}

grpc::ServerUnaryReactor* InferenceServiceImpl::RepositoryIndex(grpc::CallbackServerContext* context,
                                                                const inference::RepositoryIndexRequest* request,
                                                                inference::RepositoryIndexResponse* response) {
  if (!repository_.models) return FinishNow(context, "RepositoryIndex", Unimplemented("no model repository"));
  const Status status = Guarded([&] {
    *response = open_inference::RepositoryIndex(manager_, repository_, request->ready());
    return Status::Ok();
  });
  return FinishNow(context, "RepositoryIndex", status);
}

grpc::ServerUnaryReactor* InferenceServiceImpl::SetLoaded(grpc::CallbackServerContext* context,
                                                          std::string_view method, const std::string& model,
                                                          bool load) {
  if (!repository_.set_loaded) return FinishNow(context, method, Unimplemented("no model repository"));
  const std::string_view authorization = ClientMetadata(*context, "authorization");
  if (Status allowed = admin_.Check(method, context->peer(), authorization); !allowed.ok()) {
    spdlog::warn("event=admin_refused method={} peer={} error=\"{}\"", method, context->peer(), allowed.message());
    return FinishNow(context, method, allowed);
  }
  // Runs on the gRPC thread that received it, for as long as the loads take (as
  // HandleReloadConfigRequest does).
  return FinishNow(context, method, Guarded([&] { return repository_.set_loaded(model, load); }));
}

grpc::ServerUnaryReactor* InferenceServiceImpl::RepositoryModelLoad(grpc::CallbackServerContext* context,
                                                                    const inference::RepositoryModelLoadRequest* request,
                                                                    inference::RepositoryModelLoadResponse*) {
  return SetLoaded(context, "RepositoryModelLoad", request->model_name(), true);
}

grpc::ServerUnaryReactor* InferenceServiceImpl::RepositoryModelUnload(
    grpc::CallbackServerContext* context, const inference::RepositoryModelUnloadRequest* request,
    inference::RepositoryModelUnloadResponse*) {
  return SetLoaded(context, "RepositoryModelUnload", request->model_name(), false);
}

}  // namespace lockstep::open_inference
