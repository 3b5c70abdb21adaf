// The load generator's gRPC driver: `concurrency` calls kept in flight on one CompletionQueue
// drained by the calling thread (closed loop). The request message is built once and shared by
// every call, and each call slot reuses its response message; what remains per call (the
// ClientContext and the call's arena) is gRPC's own. The loop is one template over the API:
// TF Serving's Predict or the Open Inference Protocol's ModelInfer differ only in the stub,
// the messages, and how a request is built and an answer checked.
#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <optional>

#include "bench/serving/load_gen.h"
#include "inference/grpc_service.grpc.pb.h"
#include "tensorflow_serving/apis/prediction_service.grpc.pb.h"

namespace lockstep::bench {
namespace {

std::shared_ptr<grpc::Channel> MakeChannel(const LevelSpec& spec) {
  grpc::ChannelArguments args;
  // Each channel gets its own connection instead of sharing one subchannel with the others,
  // which is the point of asking for several.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(spec.host + ":" + spec.port,
                                   grpc::InsecureChannelCredentials(), args);
}

// TF Serving's Predict: the input in float_val, the answer in outputs[spec.output].
struct TfsPredict {
  using Service = tensorflow::serving::PredictionService;
  using Request = tensorflow::serving::PredictRequest;
  using Response = tensorflow::serving::PredictResponse;
  static Request MakeRequest(const LevelSpec& spec);
  static bool Matches(const Response& response, const std::string& output, std::span<const float> expect);
  static auto Prepare(Service::Stub* stub, grpc::ClientContext* context, const Request& request,
                      grpc::CompletionQueue* queue) {
    return stub->PrepareAsyncPredict(context, request, queue);
  }
};

// The Open Inference Protocol's ModelInfer: the input in raw_input_contents, as Triton's clients
// send it; the answer in the raw_output_contents entry of the output of that name.
struct V2Infer {
  using Service = inference::GRPCInferenceService;
  using Request = inference::ModelInferRequest;
  using Response = inference::ModelInferResponse;
  static Request MakeRequest(const LevelSpec& spec);
  static bool Matches(const Response& response, const std::string& output, std::span<const float> expect);
  static auto Prepare(Service::Stub* stub, grpc::ClientContext* context, const Request& request,
                      grpc::CompletionQueue* queue) {
    return stub->PrepareAsyncModelInfer(context, request, queue);
  }
};

TfsPredict::Request TfsPredict::MakeRequest(const LevelSpec& spec) {
  Request request;
  request.mutable_model_spec()->set_name(spec.model);
  tensorflow::TensorProto& x = (*request.mutable_inputs())[spec.input];
  x.set_dtype(tensorflow::DT_FLOAT);
  if (spec.grpc_shape.empty()) {
    x.mutable_tensor_shape()->add_dim()->set_size(static_cast<int64_t>(spec.grpc_x.size()));
  } else {
    for (int64_t dim : spec.grpc_shape) x.mutable_tensor_shape()->add_dim()->set_size(dim);
  }
  for (float value : spec.grpc_x) x.add_float_val(value);
  return request;
}

// Whether outputs[key] holds `expect`, whichever field (float_val, int64_val or
// tensor_content) carries it.
bool TfsPredict::Matches(const Response& response, const std::string& key, std::span<const float> expect) {
  auto it = response.outputs().find(key);
  if (it == response.outputs().end()) return false;
  const tensorflow::TensorProto& t = it->second;
  auto value = [&](size_t i) -> float {
    if (!t.tensor_content().empty()) {
      if (t.dtype() == tensorflow::DT_INT64) {
        int64_t v;
        std::memcpy(&v, t.tensor_content().data() + i * sizeof v, sizeof v);
        return static_cast<float>(v);
      }
      float v;
      std::memcpy(&v, t.tensor_content().data() + i * sizeof v, sizeof v);
      return v;
    }
    return t.dtype() == tensorflow::DT_INT64 ? static_cast<float>(t.int64_val(static_cast<int>(i)))
                                             : t.float_val(static_cast<int>(i));
  };
  const size_t element = t.dtype() == tensorflow::DT_INT64 ? sizeof(int64_t) : sizeof(float);
  const size_t count = !t.tensor_content().empty() ? t.tensor_content().size() / element
                       : t.dtype() == tensorflow::DT_INT64 ? static_cast<size_t>(t.int64_val_size())
                                                           : static_cast<size_t>(t.float_val_size());
  if (count != expect.size()) return false;
  for (size_t i = 0; i < expect.size(); ++i) {
    if (value(i) != expect[i]) return false;
  }
  return true;
}

V2Infer::Request V2Infer::MakeRequest(const LevelSpec& spec) {
  Request request;
  request.set_model_name(spec.model);
  auto* x = request.add_inputs();
  x->set_name(spec.input);
  x->set_datatype("FP32");
  if (spec.grpc_shape.empty()) {
    x->add_shape(static_cast<int64_t>(spec.grpc_x.size()));
  } else {
    for (int64_t dim : spec.grpc_shape) x->add_shape(dim);
  }
  static_assert(std::endian::native == std::endian::little, "the protocol's raw tensors are little-endian");
  request.add_raw_input_contents()->assign(reinterpret_cast<const char*>(spec.grpc_x.data()),
                                           spec.grpc_x.size() * sizeof(float));
  return request;
}

// Whether the output named `name` holds `expect`: in raw_output_contents, as model-server and
// Triton answer, or else in its typed contents.
bool V2Infer::Matches(const Response& response, const std::string& name, std::span<const float> expect) {
  for (int i = 0; i < response.outputs_size(); ++i) {
    const auto& output = response.outputs(i);
    if (output.name() != name) continue;
    if (i < response.raw_output_contents_size()) {
      return RawTensorMatches(response.raw_output_contents(i), output.datatype(), expect);
    }
    auto same = [&](const auto& values) {
      return std::ranges::equal(values, expect, [](auto a, float b) { return static_cast<float>(a) == b; });
    };
    return output.datatype() == "INT64" ? same(output.contents().int64_contents())
                                        : same(output.contents().fp32_contents());
  }
  return false;
}

template <typename Rpc>
struct Call {
  typename Rpc::Service::Stub* stub = nullptr;
  Clock::time_point sent;
  typename Rpc::Response response;
  grpc::Status status;
  // The reader lives in the call's arena, which the context owns: declared after the context
  // so that it is destroyed first.
  std::optional<grpc::ClientContext> context;
  std::unique_ptr<grpc::ClientAsyncResponseReader<typename Rpc::Response>> reader;
  // Paced: the call waits for its slot on an alarm, whose completion comes back with this
  // call's tag while `waiting` is set.
  grpc::Alarm alarm;
  bool waiting = false;
};

template <typename Rpc>
void RunLevel(const LevelSpec& spec, Tally* tally) {
  std::vector<std::unique_ptr<typename Rpc::Service::Stub>> stubs;
  for (int i = 0; i < std::max(1, spec.grpc_channels); ++i) {
    stubs.push_back(Rpc::Service::NewStub(MakeChannel(spec)));
  }
  const typename Rpc::Request request = Rpc::MakeRequest(spec);
  // One deadline for every call: anything still outstanding a grace period after the level's
  // end fails with DEADLINE_EXCEEDED, so a hung server cannot stall the loop below.
  const auto deadline = std::chrono::system_clock::now() +
                        std::chrono::duration_cast<std::chrono::system_clock::duration>(
                            tally->end() - Clock::now() + kGrace);
  grpc::CompletionQueue queue;

  auto start = [&](Call<Rpc>& call) {
    call.reader.reset();
    call.context.emplace();
    call.context->set_deadline(deadline);
    call.sent = Clock::now();
    call.reader = Rpc::Prepare(call.stub, &*call.context, request, &queue);
    call.reader->StartCall();
    call.reader->Finish(&call.response, &call.status, &call);
  };

  Pacer pacer(spec.rate, Clock::now());
  auto start_paced = [&](Call<Rpc>& call) {
    const Clock::time_point slot = pacer.Next(Clock::now());
    if (slot <= Clock::now()) return start(call);
    call.waiting = true;
    call.alarm.Set(&queue, std::chrono::system_clock::now() + (slot - Clock::now()), &call);
  };

  std::vector<Call<Rpc>> calls(static_cast<size_t>(spec.concurrency));
  for (size_t i = 0; i < calls.size(); ++i) {
    calls[i].stub = stubs[i % stubs.size()].get();
    start_paced(calls[i]);
  }
  size_t running = calls.size();
  void* tag = nullptr;
  bool ok = false;
  while (running > 0 && queue.Next(&tag, &ok)) {
    Call<Rpc>& call = *static_cast<Call<Rpc>*>(tag);
    if (call.waiting) {  // its slot has come
      call.waiting = false;
      if (tally->Over(Clock::now())) {
        --running;
      } else {
        start(call);
      }
      continue;
    }
    bool good = ok && call.status.ok() && Rpc::Matches(call.response, spec.output, spec.expect);
    if (!good) {
      tally->NoteError([&]() -> std::string {
        if (!call.status.ok()) {
          return "gRPC status " + std::to_string(call.status.error_code()) + ": " +
                 call.status.error_message();
        }
        return "unexpected answer: " + call.response.ShortDebugString();
      });
    }
    if (tally->Record(call.sent, Clock::now(), good)) {
      start_paced(call);
    } else {
      --running;
    }
  }
  queue.Shutdown();
  while (queue.Next(&tag, &ok)) {
  }
}

}  // namespace

bool ProbeGrpc(const LevelSpec& spec, std::string* error) {
  std::shared_ptr<grpc::Channel> channel = MakeChannel(spec);
  if (channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(5))) {
    return true;
  }
  *error = "cannot connect to " + spec.host + ":" + spec.port + " (gRPC channel not ready in 5 s)";
  return false;
}

bool RunGrpcLevel(const LevelSpec& spec, Tally* tally, std::string* /*error*/) {
  if (spec.api == Api::kTfs) {
    RunLevel<TfsPredict>(spec, tally);
  } else {
    RunLevel<V2Infer>(spec, tally);
  }
  return true;
}

}  // namespace lockstep::bench
