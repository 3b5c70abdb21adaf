// The Open Inference Protocol's infer, transport aside: what a v2 inference does between its
// request's arrival and its answer, for REST (JSON, and the binary tensor extension) and gRPC
// (ModelInfer, ModelStreamInfer) alike. A transport's call reads its own wire format through
// the hooks below; routing, the signature, the run (alone or batched, without a thread waiting),
// shadow traffic, metrics and the choice of outputs are the same for both, and the same as TF
// Serving's API's (server/inference.h).
//
// Versions travel as strings: digits name a version, and, beyond the protocol, any other
// string names a version label ("stable", "canary"); no version routes as TF Serving's API
// does (traffic split by routing key, else the highest available version). A request's
// "signature_name" parameter picks a signature other than serving_default.
#pragma once

#include <chrono>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model_store/manager.h"
#include "runtime/status.h"
#include "server/batching/batch_scheduler.h"
#include "runtime/saved_model/tensor_proto.h"
#include "server/health.h"
#include "server/inference.h"
#include "server/request_log/request_logger.h"
#include "server/serving_metrics.h"
#include "server/shadow.h"

namespace lockstep::open_inference {

// The value of RequestRecord::protocol for v2 requests: metrics tell the protocols apart.
inline constexpr std::string_view kRestProtocol = "rest_v2";
inline constexpr std::string_view kGrpcProtocol = "grpc_v2";

// An output the request asks for.
struct RequestedOutput {
  std::string name;
  bool binary = false;  // REST: sent after the JSON header (binary tensor extension)
  bool binary_given = false;  // REST: the request said which; else binary_data_output decides
};

// What a request asks, inputs included: the transport's ReadRequest decodes it whole, in one
// pass, before the signature is known (each input's datatype and shape come with it). Kept by
// the call from request to request, with its strings' and tensors' capacity.
struct InferRequest {
  std::string id;              // echoed in the answer
  std::string signature_name;  // empty: serving_default
  std::vector<NamedTensor> inputs;  // [0, num_inputs), as the request names them, in its order
  size_t num_inputs = 0;
  std::vector<RequestedOutput> outputs;  // [0, num_outputs); none: every output of the signature
  size_t num_outputs = 0;
  bool binary_data_output = false;  // REST: outputs not named in `outputs` go binary too
  // What the inputs still decoded may take (TakeTensorBytes).
  int64_t tensor_bytes_left = kMaxRequestTensorBytes;

  void Clear() {
    id.clear();
    signature_name.clear();
    num_inputs = 0;
    num_outputs = 0;
    binary_data_output = false;
    tensor_bytes_left = kMaxRequestTensorBytes;
  }
  // The next entry of `inputs`, named `name`; its tensor is the one this entry held last time,
  // for the decoder to reuse (Tensor::Writable) or replace.
  NamedTensor& AddInput(std::string_view name);
  // The next entry of `outputs`, cleared, reusing its string.
  RequestedOutput& AddOutput();
};

// A version string: digits are a version, anything else a label; empty, neither.
// InvalidArgument for a version past int64.
Status ParseVersion(std::string_view version, ServableRequest* request);

// The datatype of input `input`, named by the wire: InvalidArgument naming the input when the
// protocol has no such datatype or the runtime has no tensors of it (datatype.h).
StatusOr<DType> InputDType(std::string_view input, std::string_view datatype);

// Moves the request's inputs into `inputs` in `signature`'s order: each input given exactly
// once, with the input's dtype, else InvalidArgument naming it. Tensors are swapped, not copied,
// so that the buffers of a repeated shape go back and forth between the two for reuse.
// `bound` is scratch, kept by the caller.
Status BindInputs(const Signature& signature, InferRequest& request, std::vector<NamedTensor>* inputs,
                  std::vector<bool>* bound);

// Reads a shape from the wire's dimensions: each at least 0, and at most `max_elements`
// elements in all (what the request's bytes can hold: checked before any tensor is made for
// it, so that a hostile shape allocates nothing). InvalidArgument naming `input` otherwise.
template <typename Dims>
Status ShapeFromDims(std::string_view input, const Dims& dims, int64_t max_elements, Shape* shape);
Status AddShapeDim(std::string_view input, int64_t dim, Shape* shape);
Status CheckShapeElements(std::string_view input, const Shape& shape, int64_t max_elements);

// Takes the memory a tensor of `dtype` and `shape` needs from the request's budget, before the
// decoder makes it: one cap, kMaxRequestTensorBytes, for all of a request's inputs, as for TF
// Serving's predict. Each input's shape is bounded by the bytes that carry it, but a BYTES
// element takes a std::string however short it is on the wire, and several inputs add up.
// InvalidArgument naming `input` past the cap.
Status TakeTensorBytes(std::string_view input, DType dtype, const Shape& shape, InferRequest* request);

template <typename Dims>
Status ShapeFromDims(std::string_view input, const Dims& dims, int64_t max_elements, Shape* shape) {
  *shape = Shape();
  for (const int64_t dim : dims) LS_RETURN_IF_ERROR(AddShapeDim(input, dim, shape));
  return CheckShapeElements(input, *shape, max_elements);
}

class InferApi;

// An output of the answer: the tensor and how the request wants it.
struct AnsweredOutput {
  const NamedTensor* output;
  bool binary;
};

// What the transport hands over, valid until the call is answered.
struct InferArgs {
  std::string_view model;
  std::string_view version;      // as the client sent it; empty: routed
  std::string_view routing_key;  // keeps a client on one arm of a traffic split; empty: none
  std::string_view protocol;     // kRestProtocol or kGrpcProtocol
  // Past it the request is not run (it waited too long in a batch queue).
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
};

// One inference in flight, the transport's: it reuses its calls from request to request, and
// with them the capacity of their tensors and strings. While it waits for a batch the call is
// its batch task, and no thread waits with it.
class InferCall : public BatchTask {
 public:
  // What the request asked (after ReadRequest) and, in WriteResponse, what answers it.
  const InferRequest& request() const { return request_; }
  const LoadedVersion& servable() const { return *record_.servable; }
  // The bytes of tensors the call keeps for its next request: a transport that pools calls
  // lets go of one that a large request left large.
  size_t retained_tensor_bytes() const;

 protected:
  InferCall() = default;
  ~InferCall() = default;

 private:
  friend class InferApi;
  // The transport's wire format. ReadRequest decodes the whole request (after Clear());
  // WriteResponse writes the answer: `outputs` in the order to answer them.
  virtual Status ReadRequest(InferRequest* request) = 0;
  virtual Status WriteResponse(std::span<const AnsweredOutput> outputs) = 0;
  // The answer is there (`status`; on success, what WriteResponse wrote). Called once per
  // InferApi::Start, on the thread that called Start before Start returns, or later on a batch
  // thread; the call is free for its next request once it is called.
  virtual void OnAnswered(const Status& status) = 0;
  void OnBatchDone(Status status) final;

  Status StartRun();
  Status Answer();
  void Finish(const Status& status);

  const InferApi* api_ = nullptr;
  InferArgs args_;
  std::chrono::steady_clock::time_point start_;
  InferRequest request_;
  RequestRecord record_;
  const Signature* signature_ = nullptr;
  std::vector<bool> bound_;
  std::vector<NamedTensor> inputs_;
  std::vector<NamedTensor> outputs_;
  std::vector<AnsweredOutput> answered_;
};

class InferApi {
 public:
  // As PredictApi (server/predict_api.h): calls are recorded in `metrics`, refused while
  // `health` drains, shadowed by `shadow`, batched by `batching` (null: off).
  InferApi(const ModelManager& manager, ServingMetrics& metrics, const ServerHealth& health, ShadowRunner& shadow,
           BatchScheduler* batching)
      : manager_(manager), metrics_(metrics), health_(health), shadow_(shadow), batching_(batching) {}

  // Serves `args` into `call`, whose OnAnswered says when the answer is there. Thread-safe.
  void Start(const InferArgs& args, InferCall* call) const;
  // Answered infers are offered to `logger` (logging_config) as predict_log records. Before
  // the first Start.
  void set_request_logger(RequestLogger* logger) { logger_ = logger; }

 private:
  friend class InferCall;
  const ModelManager& manager_;
  ServingMetrics& metrics_;
  const ServerHealth& health_;
  ShadowRunner& shadow_;
  BatchScheduler* const batching_;
  RequestLogger* logger_ = nullptr;
};

}  // namespace lockstep::open_inference
