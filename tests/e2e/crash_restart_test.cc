// kill -9 of model-server under REST and gRPC load, then a restart with the same flags: no
// client ever gets a partial or a wrong answer, only connection errors while the server is
// down; the ports open once the configured version is loaded, readiness says ready from then
// on (after a moment of "starting") and never goes back; and the restart's time to ready for
// the 128 MiB model is reported.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <chrono>
#include <mutex>
#include <thread>

#include "tests/e2e/grpc_test_util.h"
#include "tests/e2e/http_client.h"
#include "tests/e2e/large_model.h"

namespace lockstep::e2e {
namespace {

namespace tfs = tensorflow::serving;

struct Tally {
  std::atomic<int> same{0};       // whole answers equal to the reference
  std::atomic<int> wrong{0};      // answers that differ from it, or errors other than the transport's
  std::atomic<int> refused{0};    // the transport failed: the server is down
  std::mutex mu;
  std::string first_wrong;
  void Wrong(const std::string& what) {
    if (wrong.fetch_add(1) == 0) {
      std::lock_guard<std::mutex> lock(mu);
      first_wrong = what;
    }
  }
};

tfs::PredictRequest LargeRequest() {
  tfs::PredictRequest request;
  request.mutable_model_spec()->set_name("big");
  tensorflow::TensorProto& x = (*request.mutable_inputs())["x"];
  x.set_dtype(tensorflow::DT_FLOAT);
  x.mutable_tensor_shape()->add_dim()->set_size(1);
  x.mutable_tensor_shape()->add_dim()->set_size(kLargeWidth);
  for (int64_t i = 0; i < kLargeWidth; ++i) x.add_float_val(0.001f);
  return request;
}

TEST(CrashRestartTest, AKilledServerRestartsWithoutAWrongAnswer) {
  ScratchDir dir;
  WriteLargeVersion(dir.path() / "big", 1);
  ServerProcess server(dir.path(), {"--model_name=big", "--model_base_path=" + (dir.path() / "big").string()});
  const std::string body = LargePredictBody();
  std::string rest_reference;
  {
    HttpClient http(server.rest_port());
    const HttpResult r = http.Post("/v1/models/big:predict", body);
    ASSERT_EQ(r.status, 200) << r.body.substr(0, 300);
    rest_reference = r.body;
  }
  const tfs::PredictRequest request = LargeRequest();
  std::string grpc_reference;
  {
    auto stub = tfs::PredictionService::NewStub(MakeChannel(server.grpc_target()));
    grpc::ClientContext context;
    tfs::PredictResponse response;
    ASSERT_TRUE(stub->Predict(&context, request, &response).ok());
    response.outputs().at("y").SerializeToString(&grpc_reference);
  }

  std::atomic<bool> stop{false};
  Tally rest, grpc_tally, ready;
  std::thread rest_client([&] {
    HttpClient http(server.rest_port());
    while (!stop) {
      const HttpResult r = http.Post("/v1/models/big:predict", body);
      if (r.status == 0) {
        ++rest.refused;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      } else if (r.status == 200 && r.body == rest_reference) {
        ++rest.same;
      } else {
        rest.Wrong(std::to_string(r.status) + " " + r.body.substr(0, 200));
      }
    }
  });
  std::thread grpc_client([&] {
    auto stub = tfs::PredictionService::NewStub(MakeChannel(server.grpc_target()));
    while (!stop) {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
      tfs::PredictResponse response;
      const grpc::Status s = stub->Predict(&context, request, &response);
      std::string y;
      if (s.ok()) response.outputs().at("y").SerializeToString(&y);
      if (s.error_code() == grpc::StatusCode::UNAVAILABLE) {
        ++grpc_tally.refused;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      } else if (s.ok() && y == grpc_reference) {
        ++grpc_tally.same;
      } else {
        grpc_tally.Wrong(Describe(s));
      }
    }
  });
  // Readiness: refused while the server is down; once the ports open (after the loads) it may
  // say "starting" for a moment, then ready; never not ready again once it said ready.
  std::thread ready_client([&] {
    HttpClient http(server.rest_port());
    bool said_ready = false;
    while (!stop) {
      const HttpResult r = http.Get("/v2/health/ready");
      if (r.status == 0) {
        ++ready.refused;
        said_ready = false;
      } else if (r.status == 200) {
        ++ready.same;
        said_ready = true;
      } else if (r.status == 503 && r.body.find("the server is starting") != std::string::npos && !said_ready) {
        // the moment between the ports opening and the start finishing
      } else {
        ready.Wrong(std::to_string(r.status) + " " + r.body);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  // Until both clients have `more` whole answers beyond what they had.
  auto served = [&](int more) {
    const int rest_target = rest.same + more, grpc_target = grpc_tally.same + more;
    return WaitFor([&] { return rest.same >= rest_target && grpc_tally.same >= grpc_target; },
                   std::chrono::seconds(60));
  };
  EXPECT_TRUE(served(5));
  const int before = rest.same + grpc_tally.same;
  const auto killed = std::chrono::steady_clock::now();
  server.KillAndRestart();
  const double to_ready = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  EXPECT_TRUE(served(5)) << "the clients did not get answers again after the restart";
  stop = true;
  rest_client.join();
  grpc_client.join();
  ready_client.join();

  EXPECT_EQ(rest.wrong, 0) << rest.first_wrong;
  EXPECT_EQ(grpc_tally.wrong, 0) << grpc_tally.first_wrong;
  EXPECT_EQ(ready.wrong, 0) << "readiness went back on itself: " << ready.first_wrong;
  EXPECT_GT(rest.same + grpc_tally.same, before + 10);
  RecordProperty("restart_to_ready_s", std::to_string(to_ready));
  const std::string log = server.Log();
  const size_t load = log.find("load_s=");
  RecordProperty("load_s", load == std::string::npos ? "?" : log.substr(load + 7, 5));
  std::printf("restart to ready: %.3f s (%s); answers %d REST, %d gRPC; refused while down %d REST, %d gRPC\n",
              to_ready, load == std::string::npos ? "?" : log.substr(load, 12).c_str(), rest.same.load(),
              grpc_tally.same.load(), rest.refused.load(), grpc_tally.refused.load());
}

}  // namespace
}  // namespace lockstep::e2e
