// bench_plain_grpc_server: the gRPC peer that model-server is measured against. A synchronous
// gRPC server implementing tensorflow.serving.PredictionService/Predict as half_plus_two
// (outputs["y"] = 0.5 * inputs["x"] + 2, float_val in and out) and nothing else: no model
// store, no graph, no tensor conversion. Its throughput is the ceiling model-server's is
// compared to.
//
//   bench_plain_grpc_server --port=0 --threads=2      # prints "listening on PORT"
#include <grpcpp/grpcpp.h>

#include <climits>
#include <csignal>
#include <cstdio>

#include "bench/serving/flags.h"
#include "tensorflow_serving/apis/prediction_service.grpc.pb.h"

namespace lockstep::bench {
namespace {

using tensorflow::serving::PredictRequest;
using tensorflow::serving::PredictResponse;

class HalfPlusTwo final : public tensorflow::serving::PredictionService::Service {
  grpc::Status Predict(grpc::ServerContext*, const PredictRequest* request,
                       PredictResponse* response) override {
    auto input = request->inputs().find("x");
    if (input == request->inputs().end()) {
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
    spec->set_name(request->model_spec().name());
    spec->mutable_version()->set_value(1);
    const std::string& signature = request->model_spec().signature_name();
    spec->set_signature_name(signature.empty() ? "serving_default" : signature);
    return grpc::Status::OK;
  }
};

int Main(int argc, char** argv) {
  std::optional<Flags> flags = Flags::Parse(argc, argv, {"port", "threads"});
  std::optional<int> port = flags ? flags->Number<int>("port", 0) : std::nullopt;
  std::optional<int> threads = flags ? flags->Number<int>("threads", 1) : std::nullopt;
  if (!port || !threads || *port < 0 || *port > 65535 || *threads < 1) {
    std::fputs("usage: bench_plain_grpc_server --port=N (0: any free port) --threads=T\n", stderr);
    return 2;
  }
  // Blocked before gRPC starts its threads, which inherit the mask, so that SIGINT and SIGTERM
  // reach only the sigwait below and shut the server down cleanly.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  HalfPlusTwo service;
  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddListeningPort("127.0.0.1:" + std::to_string(*port), grpc::InsecureServerCredentials(),
                           &bound_port);
  builder.SetMaxMessageSize(INT_MAX);  // as TensorFlow Serving does
  grpc::ResourceQuota quota("bench_plain_grpc_server");
  quota.SetMaxThreads(*threads);
  builder.SetResourceQuota(quota);
  builder.RegisterService(&service);
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
