// Health and lifecycle of the real binary: the v2 health paths and gRPC's standard health
// service; SIGTERM under REST and gRPC load drains (every request the server accepted is
// answered, the process exits 0), an open ModelStreamInfer stream included; SIGHUP reloads the
// config file.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "grpc/health/v1/health.grpc.pb.h"
#include "inference/grpc_service.grpc.pb.h"
#include "tests/common/prometheus_text.h"
#include "tests/e2e/http_client.h"
#include "tests/e2e/server_harness.h"

namespace lockstep::e2e {
namespace {

namespace tfs = tensorflow::serving;
namespace health = grpc::health::v1;

health::HealthCheckResponse::ServingStatus GrpcHealth(const std::string& target) {
  auto stub = health::Health::NewStub(MakeChannel(target));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  health::HealthCheckRequest request;
  health::HealthCheckResponse response;
  const grpc::Status status = stub->Check(&context, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response.status();
}

TEST(LifecycleTest, HealthPathsAndGrpcHealth) {
  ScratchDir dir;
  WriteVersionModel(dir.path() / "m", 1);
  fs::create_directories(dir.path() / "empty");
  WriteFile(dir.path() / "models.config",
            "model_config_list { config { name: \"m\" base_path: \"" + (dir.path() / "m").string() +
                "\" } config { name: \"empty\" base_path: \"" + (dir.path() / "empty").string() + "\" } }");
  ServerProcess server(dir.path(), {"--model_config_file=" + (dir.path() / "models.config").string()});
  HttpClient http(server.rest_port());
  EXPECT_EQ(http.Get("/v2/health/live").status, 200);
  // "empty" has no version yet: the server is not ready, though "m" is.
  HttpResult ready = http.Get("/v2/health/ready");
  EXPECT_EQ(ready.status, 503);
  EXPECT_EQ(ready.body, R"({"error": "model 'empty' has no version available"})");
  EXPECT_EQ(http.Get("/v2/models/m/ready").status, 200);
  EXPECT_EQ(http.Get("/v2/models/m/ready").body, R"({"name": "m", "ready": true})");
  EXPECT_EQ(http.Get("/v2/models/m/versions/1/ready").status, 200);
  EXPECT_EQ(http.Get("/v2/models/m/versions/2/ready").status, 503);
  EXPECT_EQ(http.Get("/v2/models/empty/ready").status, 503);
  EXPECT_EQ(http.Get("/v2/models/nope/ready").status, 404);
  EXPECT_EQ(http.Get("/v2/models/m/versions/x/ready").status, 400);
  EXPECT_EQ(http.Get("/v2/nothing").status, 404);

  // Once "empty" gets a version, the server is ready.
  WriteVersionModel(dir.path() / "empty", 3);
  EXPECT_TRUE(WaitFor([&] { return http.Get("/v2/health/ready").status == 200; }, std::chrono::seconds(10)));
  EXPECT_EQ(http.Get("/v2/health/ready").body, R"({"ready": true})");
  EXPECT_EQ(GrpcHealth(server.grpc_target()), health::HealthCheckResponse::SERVING);
  // The probes leave no warnings in the log.
  EXPECT_EQ(server.Log().find("event=rest_error"), std::string::npos) << server.Log();
}

// SIGTERM while REST and gRPC clients send requests as fast as they can: every request that
// got an answer got a good one; the only failures are requests the server never accepted
// (refused connections; gRPC calls refused UNAVAILABLE while draining, or cancelled by gRPC
// before a handler took them), and only after the signal; no request that ran was cut; the
// process exits 0.
TEST(LifecycleTest, SigtermUnderLoadDrainsWithoutFailingAcceptedRequests) {
  ScratchDir dir;
  WriteVersionModel(dir.path() / "m", 1);
  ServerProcess server(dir.path(), {"--model_name=m", "--model_base_path=" + (dir.path() / "m").string(),
                                    "--drain_timeout_seconds=10"});
  std::atomic<bool> signalled{false}, stop{false};
  std::atomic<int> ok{0}, bad_answers{0}, refused_before_signal{0};
  std::mutex mu;
  std::vector<std::string> problems;
  auto note = [&](const std::string& what) {
    std::lock_guard<std::mutex> lock(mu);
    if (problems.size() < 10) problems.push_back(what);
  };
  std::vector<std::thread> clients;
  for (int c = 0; c < 3; ++c) {
    clients.emplace_back([&] {
      HttpClient http(server.rest_port());
      while (!stop.load()) {
        const HttpResult r = http.Post("/v1/models/m:predict", R"({"instances": [1.0]})");
        const bool after = signalled.load();  // the signal came before this request ended
        if (r.status == 200) {
          ++ok;
        } else if (r.status != 0) {
          ++bad_answers;
          note("REST " + std::to_string(r.status) + " " + r.body);
        } else if (!after) {
          ++refused_before_signal;
          note("REST transport failure before the signal: " + r.error);
        } else {
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
      }
    });
    clients.emplace_back([&] {
      auto stub = tfs::PredictionService::NewStub(MakeChannel(server.grpc_target()));
      while (!stop.load()) {
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
        tfs::PredictResponse response;
        const grpc::Status s = stub->Predict(&context, PredictX("m"), &response);
        const bool after = signalled.load();  // the signal came before this call ended
        if (s.ok()) {
          ++ok;
        } else if (after && (s.error_code() == grpc::StatusCode::UNAVAILABLE ||
                             s.error_code() == grpc::StatusCode::CANCELLED)) {
          // Not accepted: refused while draining, or cancelled by gRPC before any handler ran
          // (the log's grpc_calls_cut=0 below says none that ran was cut).
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        } else {
          ++bad_answers;
          note("gRPC " + std::to_string(s.error_code()) + " " + s.error_message());
        }
      }
    });
  }
  ASSERT_TRUE(WaitFor([&] { return ok.load() > 300; })) << server.Log();
  signalled = true;
  ASSERT_EQ(kill(server.pid(), SIGTERM), 0);
  const int code = server.WaitExit(std::chrono::seconds(30));
  stop = true;
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(code, 0) << server.Log();
  EXPECT_EQ(bad_answers.load(), 0) << ::testing::PrintToString(problems);
  EXPECT_EQ(refused_before_signal.load(), 0) << ::testing::PrintToString(problems);
  EXPECT_NE(server.Log().find("event=drained grpc_calls_cut=0 http_connections_cut=0"), std::string::npos)
      << server.Log();
}

// A server draining with a ModelStreamInfer stream open.
class StreamDrainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteVersionModel(dir_.path() / "m", 1);
    server_.emplace(dir_.path(), std::vector<std::string>{"--model_name=m",
                                                          "--model_base_path=" + (dir_.path() / "m").string(),
                                                          "--drain_timeout_seconds=20"});
    stub_ = inference::GRPCInferenceService::NewStub(MakeChannel(server_->grpc_target()));
    stream_ = stub_->ModelStreamInfer(&context_);
  }

  // x = zeros of `elements` (raw contents) for the model y = x.
  static inference::ModelInferRequest XRequest(const std::string& id, int elements) {
    inference::ModelInferRequest request;
    request.set_model_name("m");
    request.set_id(id);
    auto* x = request.add_inputs();
    x->set_name("x");
    x->set_datatype("FP32");
    x->add_shape(elements);
    request.add_raw_input_contents()->assign(elements * sizeof(float), '\0');
    return request;
  }

  ScratchDir dir_;
  std::optional<ServerProcess> server_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<inference::ModelInferRequest, inference::ModelStreamInferResponse>> stream_;
};

// An open stream does not hold up the drain: its answered request stays answered, the stream
// ends with the server's UNAVAILABLE (a client's cue to reconnect elsewhere), and the process
// exits 0 well within the timeout.
TEST_F(StreamDrainTest, AnOpenStreamDoesNotHoldUpTheDrain) {
  ASSERT_TRUE(stream_->Write(XRequest("before", 1)));
  inference::ModelStreamInferResponse answer;
  ASSERT_TRUE(stream_->Read(&answer));
  EXPECT_EQ(answer.error_message(), "");
  EXPECT_EQ(answer.infer_response().id(), "before");

  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(server_->pid(), SIGTERM), 0);
  EXPECT_EQ(server_->WaitExit(std::chrono::seconds(30)), 0) << server_->Log();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10)) << server_->Log();
  while (stream_->Read(&answer)) {
  }
  const grpc::Status ended = stream_->Finish();
  EXPECT_EQ(ended.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(ended.error_message(), "the server is shutting down");
  EXPECT_NE(server_->Log().find("event=drained grpc_calls_cut=0"), std::string::npos) << server_->Log();
}

// Answers computed before SIGTERM but still queued behind a slow reader reach it before the
// server stops: the drain waits for the stream's status, which HTTP/2 sends after the last
// answer's bytes (an answer handed to gRPC's transport may still wait there for the reader's
// flow-control window, so the write's completion alone is not enough).
TEST_F(StreamDrainTest, UnwrittenAnswersLeaveBeforeTheServerStops) {
  // 1 MiB answers, more of them than HTTP/2's windows hold while the client reads none.
  constexpr int kRequests = 48;
  constexpr int kElements = 1 << 18;
  for (int i = 0; i < kRequests; ++i) ASSERT_TRUE(stream_->Write(XRequest(std::to_string(i), kElements)));
  // Every request computed: the answers wait in the server's write queue.
  const auto computed = [&] {
    HttpClient http(server_->rest_port());
    return test::ParsePrometheusText(http.Get("/metrics").body).Sum("lockstep_requests_total", "protocol=\"grpc_v2\"");
  };
  ASSERT_TRUE(WaitFor([&] { return computed() == kRequests; }, std::chrono::seconds(30))) << server_->Log();
  ASSERT_EQ(kill(server_->pid(), SIGTERM), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the drain is under way
  // A stream opened during the drain (which this one's unread answers hold open) ends at once,
  // the same way, before it reads anything.
  grpc::ClientContext late_context;
  const auto late = stub_->ModelStreamInfer(&late_context);
  inference::ModelStreamInferResponse nothing;
  EXPECT_FALSE(late->Read(&nothing));
  const grpc::Status late_end = late->Finish();
  EXPECT_EQ(late_end.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(late_end.error_message(), "the server is shutting down");
  int answered = 0;
  inference::ModelStreamInferResponse answer;
  while (stream_->Read(&answer)) {
    // A slow reader: the last answers' bytes still wait for its window when gRPC has taken them.
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(answer.error_message(), "");
    EXPECT_EQ(answer.infer_response().raw_output_contents(0).size(), kElements * sizeof(float));
    ++answered;
  }
  EXPECT_EQ(answered, kRequests) << server_->Log();
  const grpc::Status ended = stream_->Finish();
  // The server's own end after the last answer, not gRPC's "Cancelling all calls" at shutdown,
  // whose RST_STREAM may overtake answers the client has yet to read.
  EXPECT_EQ(ended.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(ended.error_message(), "the server is shutting down");
  EXPECT_EQ(server_->WaitExit(std::chrono::seconds(30)), 0) << server_->Log();
  EXPECT_NE(server_->Log().find("event=drained grpc_calls_cut=0"), std::string::npos) << server_->Log();
}

TEST(LifecycleTest, SighupReloadsTheConfigFile) {
  ScratchDir dir;
  WriteVersionModel(dir.path() / "m", 1);
  WriteVersionModel(dir.path() / "m", 2);
  const fs::path config = dir.path() / "models.config";
  auto text = [&](int version) {
    return "model_config_list { config { name: \"m\" base_path: \"" + (dir.path() / "m").string() +
           "\" model_version_policy { specific { versions: " + std::to_string(version) + " } } } }";
  };
  WriteFile(config, text(1));
  // Read once at start: no polling, so only SIGHUP can bring the change in.
  ServerProcess server(dir.path(), {"--model_config_file=" + config.string()});
  auto served = [&] {
    auto stub = tfs::PredictionService::NewStub(MakeChannel(server.grpc_target()));
    grpc::ClientContext context;
    tfs::PredictResponse response;
    return stub->Predict(&context, PredictX("m"), &response).ok() ? response.model_spec().version().value()
                                                                  : -1;
  };
  EXPECT_EQ(served(), 1);
  WriteFile(config, text(2));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(served(), 1);
  ASSERT_EQ(kill(server.pid(), SIGHUP), 0);
  EXPECT_TRUE(WaitFor([&] { return served() == 2; }, std::chrono::seconds(10))) << server.Log();
  // A broken file on SIGHUP is refused and logged; the running config stays.
  WriteFile(config, "model_config_list { config { name: ");
  ASSERT_EQ(kill(server.pid(), SIGHUP), 0);
  EXPECT_TRUE(WaitFor([&] { return server.Log().find("event=config_file_rejected") != std::string::npos; }))
      << server.Log();
  EXPECT_EQ(served(), 2);
  EXPECT_FALSE(server.Exited());
}

}  // namespace
}  // namespace lockstep::e2e
