// What a request does once its protocol is decoded, shared by REST and gRPC so that both
// answer the same way with the same messages: find the servable (model, version or label),
// find the signature, check the method, run it, and shape the answer.
//
// Predict runs any signature on named tensors. Classify and Regress run signatures whose
// method_name says so, on tf.Example inputs: each signature input key names an Example
// feature, and the feature's values across the examples (after merging the context's
// features in, example values winning) become a tensor [num_examples, <input shape[1:]>].
// A SavedModel's signature whose one input is a vector of strings takes the examples serialized
// instead, as TensorFlow's classification and regression signatures do (the graph parses
// them): with a context, each example is fed as the context's serialization followed by its
// own, which parsing merges with the example's features winning, as TF Serving feeds them.
// (The context is copied into each: past 1 GiB in all, the request is ResourceExhausted.)
// Their outputs follow TensorFlow's names:
//   classify: "scores" float [N] or [N, C] (required here), "classes" string [N, C] (labels;
//             optional: without it every Class carries an empty label, as TensorFlow's does)
//   regress:  "outputs" float [N] or [N, 1]
#pragma once

#include <chrono>
#include <exception>
#include <new>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model_store/manager.h"
#include "runtime/session.h"
#include "runtime/status.h"
#include "server/batching/batch_scheduler.h"
#include "server/serving_metrics.h"
#include "tensorflow_serving/apis/classification.pb.h"
#include "tensorflow_serving/apis/inference.pb.h"
#include "tensorflow_serving/apis/input.pb.h"
#include "tensorflow_serving/apis/model.pb.h"
#include "tensorflow_serving/apis/regression.pb.h"

namespace lockstep {

inline constexpr std::string_view kPredictMethod = "tensorflow/serving/predict";
inline constexpr std::string_view kClassifyMethod = "tensorflow/serving/classify";
inline constexpr std::string_view kRegressMethod = "tensorflow/serving/regress";

// A request's model spec in protocol-neutral form. An empty signature name means
// serving_default. The routing key (HTTP header X-Routing-Key, gRPC metadata x-routing-key)
// keeps a client on one arm of a traffic split; empty: none.
struct ServableRequest {
  std::string_view model;
  std::optional<int64_t> version;
  std::optional<std::string_view> label;
  std::string_view signature_name;
  std::string_view routing_key;
};

// ModelSpec -> ServableRequest (views into `spec`). An empty model name is InvalidArgument.
StatusOr<ServableRequest> ServableRequestFromSpec(const tensorflow::serving::ModelSpec& spec);

// The servable that answers `request`; the manager's TF Serving messages on failure.
StatusOr<ServableHandle> ResolveServable(const ModelManager& manager, const ServableRequest& request);

// The signature called `name` (serving_default when empty). InvalidArgument, as TF Serving
// words it: "Serving signature name: \"x\" not found in signature def".
StatusOr<const Signature*> FindServingSignature(const Session& session, std::string_view name);

// Runs `fn` (returning Status), turning an exception out of a library (an allocation, a
// parser) into this request's error: no request may end the server.
template <typename Fn>
Status Guarded(Fn&& fn) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("out of memory while handling the request");
  } catch (const std::exception& e) {
    return Internal(std::string("unexpected error while handling the request: ") + e.what());
  }
}

// MultiInference's tasks as TF Serving checks them before any runs: at least one, all on one
// model name, no signature twice, each a classify or regress (else Unimplemented).
Status CheckMultiInferenceTasks(const tensorflow::serving::MultiInferenceRequest& request);

// Fills a ModelSpec naming what served a request: model, version, signature name.
void FillServedSpec(const LoadedVersion& servable, std::string_view signature_name,
                    tensorflow::serving::ModelSpec* spec);

// How a request runs its signature's graph: on the servable's session at once, or, with
// `batching`, merged with other requests into a batch (batch_scheduler.h), which a request
// whose `deadline` passes while it queues never joins.
struct GraphRunner {
  const ServableHandle& servable;
  RequestRecord* record;
  BatchScheduler* batching = nullptr;
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();

  // Runs and waits; the run's queue and compute times go into `record`.
  Status Run(const Signature& signature, std::span<const NamedTensor> inputs,
             std::vector<NamedTensor>* outputs) const;
  // Runs without waiting: `task` gets the result (and the times, which its owner records) on
  // the calling thread before Start returns when nothing batches, else on the batch thread.
  // `inputs`, `outputs` and `task` must live until then.
  void Start(const Signature& signature, std::span<const NamedTensor> inputs, std::vector<NamedTensor>* outputs,
             BatchTask* task) const;
};

// Whether a pooled call keeps its tensors for its next request (so that a repeated shape
// decodes and runs into them) or lets go of them: above 1 MiB in all it lets go, as it may wait
// long for its next request.
bool KeepCallTensors(std::span<const NamedTensor> inputs, std::span<const NamedTensor> outputs);

// A batch task's run ended: its queue and compute times go into `record`.
void RecordBatchTiming(const BatchTask& task, RequestRecord* record);

// gRPC's output_filter, checked before anything runs: an unknown or repeated key is
// InvalidArgument, as TF Serving words it.
Status CheckOutputFilter(const Signature& signature, std::span<const std::string> output_filter);
// Keeps only the outputs `output_filter` names (checked), in its order; all when it is empty.
void ApplyOutputFilter(std::span<const std::string> output_filter, std::vector<NamedTensor>* outputs);

// Runs `signature` on `inputs` and waits. With a non-empty `output_filter` (gRPC's), only those
// output keys are returned, in the filter's order.
Status RunPredict(const GraphRunner& runner, const Signature& signature, std::span<const NamedTensor> inputs,
                  std::span<const std::string> output_filter, std::vector<NamedTensor>* outputs);

// Classify / Regress on `input`'s examples with `signature`, which must carry the matching
// method_name (else InvalidArgument "Expected classification signature method_name to be
// tensorflow/serving/classify. Was: ...").
Status RunClassify(const GraphRunner& runner, const Signature& signature, const tensorflow::serving::Input& input,
                   tensorflow::serving::ClassificationResult* result);
Status RunRegress(const GraphRunner& runner, const Signature& signature, const tensorflow::serving::Input& input,
                  tensorflow::serving::RegressionResult* result);

// Classify, Regress and MultiInference as a chain of graph runs that waits without a thread:
// the tasks run one after another, each through GraphRunner::Start with its owner's batch task,
// and each task's outputs are read into its result on the thread that ran it. The owner drives:
//
//   start:        run.Begin(input); run.AddClassify(signature, &result); ...;
//                 status = OK; if (!run.Continue(runner, this, &status)) answer with status
//   OnBatchDone:  RecordBatchTiming(*this, &record); status = run.Finished(status);
//                 if (!run.Continue(runner, this, &status)) answer with status
//
// The input and the results must outlive the run.
class ExamplesRun {
 public:
  void Begin(const tensorflow::serving::Input& input);
  void AddClassify(const Signature& signature, tensorflow::serving::ClassificationResult* result);
  void AddRegress(const Signature& signature, tensorflow::serving::RegressionResult* result);
  // With `*status` OK, starts the next task's graph with `task` as its batch task. True once
  // started: the owner is its batch task's now, and may even be answered already. False when
  // the run is over, with its end in `*status`: an error (the one passed in, or why the next
  // task could not start, its method or its examples), or OK once every task is done.
  bool Continue(const GraphRunner& runner, BatchTask* task, Status* status);
  // The started task's graph ended with `status`: its outputs become its result.
  Status Finished(const Status& status);

 private:
  struct Task {
    const Signature* signature;
    tensorflow::serving::ClassificationResult* classification;  // exactly one of the two
    tensorflow::serving::RegressionResult* regression;
  };
  const tensorflow::serving::Input* input_ = nullptr;
  std::vector<Task> tasks_;
  size_t next_ = 0;
  int64_t num_examples_ = 0;
  std::vector<NamedTensor> inputs_;
  std::vector<NamedTensor> outputs_;
};

// Whether `signature` takes serialized tf.Examples: one input, a vector of strings, fed as
// TensorFlow feeds (TensorBinding::any_shape, a SavedModel's).
bool TakesSerializedExamples(const Signature& signature);

// Exposed for tests: the tensors `signature`'s inputs get from `input`'s examples.
StatusOr<std::vector<NamedTensor>> TensorsFromExamples(const Signature& signature,
                                                       const tensorflow::serving::Input& input);

}  // namespace lockstep
