// bench_plain_grpc_server: the gRPC peer that model-server is measured against. A gRPC server
// implementing tensorflow.serving.PredictionService/Predict as half_plus_two
// (outputs["y"] = 0.5 * inputs["x"] + 2, float_val in and out) and nothing else: no model
// store, no graph, no tensor conversion. Its throughput is the ceiling model-server's is
// compared to.
//
// --api picks gRPC's server API; both answer with the one HalfPlusTwo function below:
//   sync      (default) the synchronous API, as model-server uses: a thread per call in flight,
//             at most --threads of them (gRPC's resource quota)
//   callback  the callback (reactor) API: Predict runs on gRPC's own polling threads and
//             finishes its reactor inline; --threads still sets the quota, which the callback
//             API does not use for its calls
//
//   bench_plain_grpc_server --port=0 --threads=2 [--api=callback]   # prints "listening on PORT"
#include <grpcpp/grpcpp.h>

#include <climits>
#include <csignal>
#include <cstdio>

#include "bench/serving/flags.h"
#include "server/process_settings.h"
#include "tensorflow_serving/apis/prediction_service.grpc.pb.h"

namespace lockstep::bench {
namespace {

using tensorflow::serving::PredictRequest;
using tensorflow::serving::PredictResponse;

// The half_plus_two answer to `request`, shared by both APIs.
grpc::Status HalfPlusTwo(const PredictRequest& request, PredictResponse* response) {
  auto input = request.inputs().find("x");
  if (input == request.inputs().end()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "input 'x' is missing");
  }
  const tensorflow::TensorProto& x = input->second;
  if (x.dtype() != tensorflow::DT_FLOAT) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "input 'x' must be DT_FLOAT");
  }
  tensorflow::TensorProto& y = (*response->mutable_outputs())["y"];
  y.set_dtype(tensorflow::DT_FLOAT);
  *y.mutable_tensor_shape() = x.tensor_shape();
  y.mutable_float_val()->Reserve(x.float_val_size());
  for (float value : x.float_val()) y.add_float_val(0.5f * value + 2.0f);

  tensorflow::serving::ModelSpec* spec = response->mutable_model_spec();
  spec->set_name(request.model_spec().name());
  spec->mutable_version()->set_value(1);
  const std::string& signature = request.model_spec().signature_name();
  spec->set_signature_name(signature.empty() ? "serving_default" : signature);
  return grpc::Status::OK;
}

class SyncService final : public tensorflow::serving::PredictionService::Service {
  grpc::Status Predict(grpc::ServerContext*, const PredictRequest* request,
                       PredictResponse* response) override {
    return HalfPlusTwo(*request, response);
  }
};

class CallbackService final : public tensorflow::serving::PredictionService::CallbackService {
  grpc::ServerUnaryReactor* Predict(grpc::CallbackServerContext* context, const PredictRequest* request,
                                    PredictResponse* response) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(HalfPlusTwo(*request, response));
    return reactor;
  }
};

int Main(int argc, char** argv) {
  ApplyServerProcessSettings();  // as model-server does, so the comparison is of the serving code
  std::optional<Flags> flags = Flags::Parse(argc, argv, {"port", "threads", "api"});
  auto usage = [] {
    std::fputs("usage: bench_plain_grpc_server --port=N (0: any free port) --threads=T [--api=sync|callback]\n",
               stderr);
    return 2;
  };
  if (!flags) return usage();
  const std::optional<int> port = flags->Number<int>("port", 0);
  const std::optional<int> threads = flags->Number<int>("threads", 1);
  const std::string api = flags->Get("api", "sync");
  const bool callback = api == "callback";
  if (!port.has_value() || !threads.has_value()) return usage();
  if (port.value() < 0 || port.value() > 65535 || threads.value() < 1 || !(callback || api == "sync")) return usage();
  // Blocked before gRPC starts its threads, which inherit the mask, so that SIGINT and SIGTERM
  // reach only the sigwait below and shut the server down cleanly.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  SyncService sync_service;
  CallbackService callback_service;
  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddListeningPort("127.0.0.1:" + std::to_string(*port), grpc::InsecureServerCredentials(),
                           &bound_port);
  builder.SetMaxMessageSize(INT_MAX);  // as TensorFlow Serving does
  grpc::ResourceQuota quota("bench_plain_grpc_server");
  quota.SetMaxThreads(*threads);
  builder.SetResourceQuota(quota);
  if (callback) {
    builder.RegisterService(&callback_service);
  } else {
    builder.RegisterService(&sync_service);
  }
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || bound_port == 0) {
    std::fprintf(stderr, "bench_plain_grpc_server: cannot listen on port %d\n", *port);
    return 1;
  }
  std::printf("listening on %d\n", bound_port);
  std::fflush(stdout);

  int signal = 0;
  sigwait(&stop_signals, &signal);
  server->Shutdown();
  return 0;
}

}  // namespace
}  // namespace lockstep::bench

int main(int argc, char** argv) { return lockstep::bench::Main(argc, argv); }
