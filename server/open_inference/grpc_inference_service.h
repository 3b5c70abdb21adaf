// The Open Inference Protocol's gRPC service (inference.GRPCInferenceService) over the model
// store, beside TF Serving's services on the same port: health, metadata, ModelInfer and
// ModelStreamInfer (infer_api.h's path, with proto_infer.h's codec), Triton's model_repository
// and statistics extensions (model_repository.h). Errors are gRPC status codes with the same
// messages as the REST protocol's.
//
// On gRPC's callback API, as TF Serving's services here: a call holds no thread while it waits
// for a batch. ModelInfer's calls and messages are pooled. A ModelStreamInfer stream runs up to
// kMaxStreamInFlight of its requests at once and answers each as it completes, with the
// request's id in the answer; a failed request is answered on the stream with error_message,
// and the stream goes on. A drain ends every stream (UNAVAILABLE) once the answers to the
// requests it read have been sent.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <unordered_set>
#include <vector>

#include "inference/grpc_service.grpc.pb.h"
#include "model_store/manager.h"
#include "server/admin_access.h"
#include "server/batching/batch_scheduler.h"
#include "server/grpc_services.h"
#include "server/health.h"
#include "server/open_inference/infer_api.h"
#include "server/open_inference/model_repository.h"
#include "server/pooled_message_allocator.h"
#include "server/serving_metrics.h"
#include "server/shadow.h"

namespace lockstep::open_inference {

class InferenceServiceImpl final : public inference::GRPCInferenceService::CallbackService {
 public:
  static constexpr int kMaxStreamInFlight = 64;
  // A stream keeps a finished request's call for the next only below this size.
  static constexpr size_t kMaxPooledStreamCallBytes = size_t{1} << 20;

  // As PredictionServiceImpl (server/grpc_services.h).
  InferenceServiceImpl(const ModelManager& manager, ServingMetrics& metrics, const ServerHealth& health,
                       ShadowRunner& shadow, BatchScheduler* batching);
  ~InferenceServiceImpl() override;
  // Answered infers are offered to `logger` (logging_config). Before the server starts.
  void set_request_logger(RequestLogger* logger) { infer_.set_request_logger(logger); }

  // The model_repository extension: loads and unloads are admin calls, allowed as `admin` says.
  // Without it those methods are UNIMPLEMENTED. Before the server starts.
  void set_repository(RepositoryControl repository, AdminAccess admin) {
    repository_ = std::move(repository);
    admin_ = std::move(admin);
  }
  // Inference calls running now, stream requests included, plus open streams: the drain waits
  // for none.
  int in_flight() const;
  // The drain's first step: every open stream, and every stream opened from now on, stops
  // reading and finishes UNAVAILABLE once its read requests are answered. A stream counts in
  // in_flight() until gRPC has sent its status, which leaves after its last answer (HTTP/2's
  // trailers follow the data), so the drain waits for a slow reader's answers to reach it
  // rather than cutting them in the transport.
  void FinishStreams();

  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* context, const inference::ServerLiveRequest* request,
                                       inference::ServerLiveResponse* response) override;
  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* context,
                                        const inference::ServerReadyRequest* request,
                                        inference::ServerReadyResponse* response) override;
  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* context, const inference::ModelReadyRequest* request,
                                       inference::ModelReadyResponse* response) override;
  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* context,
                                           const inference::ServerMetadataRequest* request,
                                           inference::ServerMetadataResponse* response) override;
  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* context,
                                          const inference::ModelMetadataRequest* request,
                                          inference::ModelMetadataResponse* response) override;
  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* context, const inference::ModelInferRequest* request,
                                       inference::ModelInferResponse* response) override;
  grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse>* ModelStreamInfer(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* ModelStatistics(grpc::CallbackServerContext* context,
                                            const inference::ModelStatisticsRequest* request,
                                            inference::ModelStatisticsResponse* response) override;
  grpc::ServerUnaryReactor* RepositoryIndex(grpc::CallbackServerContext* context,
                                            const inference::RepositoryIndexRequest* request,
                                            inference::RepositoryIndexResponse* response) override;
  grpc::ServerUnaryReactor* RepositoryModelLoad(grpc::CallbackServerContext* context,
                                                const inference::RepositoryModelLoadRequest* request,
                                                inference::RepositoryModelLoadResponse* response) override;
  grpc::ServerUnaryReactor* RepositoryModelUnload(grpc::CallbackServerContext* context,
                                                  const inference::RepositoryModelUnloadRequest* request,
                                                  inference::RepositoryModelUnloadResponse* response) override;

 private:
  class ProtoInferCall;
  class UnaryCall;
  class StreamCall;
  class Stream;

  // Loads or unloads, as an admin call.
  grpc::ServerUnaryReactor* SetLoaded(grpc::CallbackServerContext* context, std::string_view method,
                                      const std::string& model, bool load);

  const ModelManager& manager_;
  ServingMetrics& metrics_;
  const ServerHealth& health_;
  InferApi infer_;
  RepositoryControl repository_;
  AdminAccess admin_;
  PooledMessageAllocator<inference::ModelInferRequest, inference::ModelInferResponse> infer_messages_;
  std::atomic<int> in_flight_{0};
  mutable std::mutex streams_mu_;  // before any Stream's own mutex
  std::unordered_set<Stream*> streams_;  // open: from the reactor's making to its OnDone
  bool finishing_streams_ = false;
  CallPool<UnaryCall> pool_;  // ModelInfer's calls, back once answered
};

}  // namespace lockstep::open_inference
