// Dynamic batching in the real binary (--enable_batching, --batching_parameters_file): many
// REST and gRPC clients at once each get their own answers while the metrics show batches of
// several requests; a full queue answers HTTP 429 and RESOURCE_EXHAUSTED at once while the
// queued requests still run; requests waiting for a batch hold no REST or gRPC thread (one REST
// thread serves while seven predicts wait, or classifies, regresses and a MultiInference); a request whose gRPC deadline passes in the queue is not run; a
// model's own batching_parameters apply to it; and bad batching settings stop the server at
// start, or a reload, with the file and field named. The Open Inference Protocol's infers join
// the same batches as predicts, and wait without a thread too.
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "inference/grpc_service.grpc.pb.h"
#include "tests/common/prometheus_text.h"
#include "tests/e2e/grpc_test_util.h"
#include "tests/e2e/http_client.h"

namespace lockstep::e2e {
namespace {

using test::ParsePrometheusText;
using test::PrometheusText;

class BatchingTest : public ::testing::Test {
 protected:
  // Serves half_plus_two (y = 0.5 x + 2, x of shape [-1]) as model "m" with batching.
  void Start(const std::string& batching, const std::string& model_extra = "",
             std::vector<std::string> flags = {"--enable_batching"}, bool expect_ready = true) {
    WriteHalfPlusTwo(dir_.path() / "m", 1);
    WriteFile(dir_.path() / "batching.config", batching);
    WriteFile(dir_.path() / "models.config", "model_config_list { config { name: \"m\" base_path: \"" +
                                                 (dir_.path() / "m").string() + "\" " + model_extra +
                                                 " } }\n");
    flags.push_back("--batching_parameters_file=" + (dir_.path() / "batching.config").string());
    flags.push_back("--model_config_file=" + (dir_.path() / "models.config").string());
    server_ = std::make_unique<ServerProcess>(dir_.path(), flags, expect_ready);
  }

  PrometheusText Scrape() {
    HttpClient http(server_->rest_port());
    const HttpResult r = http.Get("/metrics");
    EXPECT_EQ(r.status, 200);
    PrometheusText parsed = ParsePrometheusText(r.body);
    EXPECT_EQ(parsed.error, "");
    return parsed;
  }

  // Waits until `n` requests wait in m's batch queue.
  bool WaitForQueued(double n) {
    return WaitFor([&] { return Scrape().Sum("lockstep_batch_queue_requests", "model=\"m\"") == n; });
  }

  ScratchDir dir_;
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(BatchingTest, ConcurrentClientsGetTheirOwnAnswersFromSharedBatches) {
  Start(
      "max_batch_size { value: 16 } batch_timeout_micros { value: 5000 } max_enqueued_batches { value: 100 "
      "}\n"
      "num_batch_threads { value: 2 } allowed_batch_sizes: [4, 8, 16]\n");
  constexpr int kClients = 6;
  constexpr int kRequests = 30;
  std::atomic<int> wrong{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      HttpClient http(server_->rest_port());
      auto stub = tfs::PredictionService::NewStub(MakeChannel(server_->grpc_target()));
      for (int i = 0; i < kRequests; ++i) {
        const float x = static_cast<float>(c * 100 + i);
        if (c % 2 == 0) {
          const HttpResult r =
              http.Post("/v1/models/m:predict", "{\"instances\": [" + std::to_string(x) + "]}");
          const nlohmann::json body = nlohmann::json::parse(r.body, nullptr, /*allow_exceptions=*/false);
          if (r.status != 200 || !body.contains("predictions") ||
              body["predictions"] != nlohmann::json::array({0.5f * x + 2.0f})) {
            ++wrong;
          }
        } else {
          grpc::ClientContext context;
          tfs::PredictResponse response;
          const grpc::Status s = stub->Predict(&context, PredictX("m", {x, x + 1}), &response);
          if (!s.ok() ||
              FloatsOf(response.outputs().at("y")) != std::vector<float>{0.5f * x + 2, 0.5f * (x + 1) + 2}) {
            ++wrong;
          }
        }
      }
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(wrong.load(), 0);

  const PrometheusText metrics = Scrape();
  const double batches = metrics.Sum("lockstep_batch_size_count", "model=\"m\"");
  const double rows = metrics.Sum("lockstep_batch_size_sum", "model=\"m\"");
  const double padding = metrics.Sum("lockstep_batch_padding_rows_total", "model=\"m\"");
  const double requested_rows = kClients / 2 * kRequests * 1 + kClients / 2 * kRequests * 2;
  EXPECT_GT(batches, 0);
  EXPECT_EQ(rows - padding, requested_rows);
  // Requests shared batches: fewer batches than requests.
  EXPECT_LT(batches, kClients * kRequests);
  EXPECT_EQ(metrics.Sum("lockstep_batch_queue_requests", "model=\"m\""), 0);
  EXPECT_EQ(metrics.types.at("lockstep_batch_size"), "histogram");
  // Requests waited in the queue, and the time is in the queue histogram.
  EXPECT_GT(metrics.Sum("lockstep_request_queue_seconds_sum", "model=\"m\""), 0);
}

TEST_F(BatchingTest, AFullQueueAnswersAtOnceAndTheQueuedRequestStillRuns) {
  // 4 rows may wait; a batch runs when 4 rows are there (or after 5 s).
  Start(
      "max_batch_size { value: 4 } batch_timeout_micros { value: 5000000 } max_enqueued_batches { value: 1 "
      "}\n");
  std::future<HttpResult> waiting = std::async(std::launch::async, [&] {
    HttpClient http(server_->rest_port());
    return http.Post("/v1/models/m:predict", R"({"instances": [1.0, 2.0, 3.0]})");
  });
  ASSERT_TRUE(WaitForQueued(1));

  HttpClient http(server_->rest_port());
  const auto start = std::chrono::steady_clock::now();
  const HttpResult refused = http.Post("/v1/models/m:predict", R"({"instances": [4.0, 5.0]})");
  EXPECT_EQ(refused.status, 429) << refused.body;
  EXPECT_NE(refused.body.find("\"error\""), std::string::npos) << refused.body;
  EXPECT_NE(refused.body.find("is full"), std::string::npos) << refused.body;
  auto stub = tfs::PredictionService::NewStub(MakeChannel(server_->grpc_target()));
  grpc::ClientContext context;
  tfs::PredictResponse response;
  const grpc::Status grpc_refused = stub->Predict(&context, PredictX("m", {4.0f, 5.0f}), &response);
  EXPECT_EQ(grpc_refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << grpc_refused.error_message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3)) << "refusals must not wait";

  // The fourth row fills the batch: both run now, long before the timeout.
  const HttpResult filler = http.Post("/v1/models/m:predict", R"({"instances": [6.0]})");
  EXPECT_EQ(filler.status, 200) << filler.body;
  EXPECT_EQ(filler.body, R"({"predictions": [5.0]})");
  const HttpResult first = waiting.get();
  EXPECT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(first.body, R"({"predictions": [2.5, 3.0, 3.5]})");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4));

  const PrometheusText metrics = Scrape();
  EXPECT_EQ(metrics.Sum("lockstep_requests_total", "model=\"m\",status=\"RESOURCE_EXHAUSTED\""), 2);
  EXPECT_EQ(metrics.Sum("lockstep_batch_size_count", "model=\"m\""), 1);
}

TEST_F(BatchingTest, WaitingRequestsHoldNoThread) {
  // One REST thread, and a batch that runs only when 8 rows are there. Requests that waited
  // on their thread would leave none to read the next request or serve /metrics.
  Start("max_batch_size { value: 8 } batch_timeout_micros { value: 30000000 } max_enqueued_batches { value: 4 }\n",
        "", {"--enable_batching", "--rest_api_num_threads=1"});
  constexpr int kRest = 4;
  constexpr int kGrpc = 3;
  std::vector<std::future<HttpResult>> rest;
  for (int i = 0; i < kRest; ++i) {
    rest.push_back(std::async(std::launch::async, [&, i] {
      HttpClient http(server_->rest_port());
      return http.Post("/v1/models/m:predict", "{\"instances\": [" + std::to_string(2 * i) + "]}");
    }));
  }
  auto stub = tfs::PredictionService::NewStub(MakeChannel(server_->grpc_target()));
  struct GrpcCall {
    grpc::ClientContext context;
    tfs::PredictResponse response;
    grpc::Status status;
  };
  std::vector<std::unique_ptr<GrpcCall>> calls;
  std::vector<std::thread> grpc_clients;
  for (int i = 0; i < kGrpc; ++i) {
    calls.push_back(std::make_unique<GrpcCall>());
    grpc_clients.emplace_back([&, call = calls.back().get(), i] {
      call->status = stub->Predict(&call->context, PredictX("m", {10.0f + i}), &call->response);
    });
  }
  // All seven wait in the queue, and the one REST thread still serves the scrapes that see it.
  ASSERT_TRUE(WaitForQueued(kRest + kGrpc));
  HttpClient http(server_->rest_port());
  const HttpResult filler = http.Post("/v1/models/m:predict", R"({"instances": [100.0]})");
  EXPECT_EQ(filler.status, 200) << filler.body;
  EXPECT_EQ(filler.body, R"({"predictions": [52.0]})");
  for (int i = 0; i < kRest; ++i) {
    const HttpResult r = rest[i].get();
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.body, "{\"predictions\": [" + std::to_string(i + 2) + ".0]}");
  }
  for (std::thread& t : grpc_clients) t.join();
  for (int i = 0; i < kGrpc; ++i) {
    ASSERT_TRUE(calls[i]->status.ok()) << calls[i]->status.error_message();
    EXPECT_EQ(FloatsOf(calls[i]->response.outputs().at("y")), std::vector<float>{0.5f * (10.0f + i) + 2.0f});
  }
  const PrometheusText metrics = Scrape();
  EXPECT_EQ(metrics.Sum("lockstep_batch_size_count", "model=\"m\""), 1);
  EXPECT_EQ(metrics.Sum("lockstep_batch_size_sum", "model=\"m\""), kRest + kGrpc + 1);
}

TEST_F(BatchingTest, OpenInferenceRequestsJoinThePredictsBatchesWithoutAThread) {
  // One REST thread and a batch of 6 rows: v2 REST and gRPC infers wait beside a predict, and
  // the one REST thread still serves the request that fills the batch.
  Start("max_batch_size { value: 6 } batch_timeout_micros { value: 30000000 } max_enqueued_batches { value: 4 }\n",
        "", {"--enable_batching", "--rest_api_num_threads=1"});
  auto infer_body = [](float x) {
    return R"({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1], "data": [)" + std::to_string(x) + "]}]}";
  };
  std::vector<std::future<HttpResult>> rest;
  for (int i = 0; i < 2; ++i) {
    rest.push_back(std::async(std::launch::async, [&, i] {
      return HttpClient(server_->rest_port()).Post("/v2/models/m/infer", infer_body(2.0f * i));
    }));
  }
  std::future<HttpResult> predict = std::async(std::launch::async, [&] {
    return HttpClient(server_->rest_port()).Post("/v1/models/m:predict", R"({"instances": [8.0]})");
  });
  auto stub = inference::GRPCInferenceService::NewStub(MakeChannel(server_->grpc_target()));
  struct GrpcCall {
    grpc::ClientContext context;
    inference::ModelInferRequest request;
    inference::ModelInferResponse response;
    grpc::Status status;
  };
  std::vector<std::unique_ptr<GrpcCall>> calls;
  std::vector<std::thread> clients;
  for (int i = 0; i < 2; ++i) {
    calls.push_back(std::make_unique<GrpcCall>());
    GrpcCall* call = calls.back().get();
    call->request.set_model_name("m");
    auto* x = call->request.add_inputs();
    x->set_name("x");
    x->set_datatype("FP32");
    x->add_shape(1);
    x->mutable_contents()->add_fp32_contents(10.0f + i);
    clients.emplace_back([&, call] { call->status = stub->ModelInfer(&call->context, call->request, &call->response); });
  }
  ASSERT_TRUE(WaitForQueued(5));
  const HttpResult filler = HttpClient(server_->rest_port()).Post("/v2/models/m/infer", infer_body(100.0f));
  EXPECT_EQ(filler.status, 200) << filler.body;
  EXPECT_EQ(nlohmann::json::parse(filler.body)["outputs"][0]["data"], nlohmann::json({52.0}));
  for (int i = 0; i < 2; ++i) {
    const HttpResult r = rest[i].get();
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(nlohmann::json::parse(r.body)["outputs"][0]["data"], nlohmann::json({i + 2.0}));
  }
  EXPECT_EQ(predict.get().body, R"({"predictions": [6.0]})");
  for (std::thread& t : clients) t.join();
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(calls[i]->status.ok()) << calls[i]->status.error_message();
    float y;
    ASSERT_EQ(calls[i]->response.raw_output_contents(0).size(), sizeof(y));
    std::memcpy(&y, calls[i]->response.raw_output_contents(0).data(), sizeof(y));
    EXPECT_EQ(y, 0.5f * (10.0f + i) + 2.0f);
  }
  const PrometheusText metrics = Scrape();
  EXPECT_EQ(metrics.Sum("lockstep_batch_size_count", "model=\"m\""), 1);
  EXPECT_EQ(metrics.Sum("lockstep_batch_size_sum", "model=\"m\""), 6);
  EXPECT_EQ(metrics.Sum("lockstep_requests_total", "protocol=\"grpc_v2\""), 2);
  EXPECT_EQ(metrics.Sum("lockstep_requests_total", "protocol=\"rest_v2\""), 3);
}

tfs::Input ExamplesOfX(const std::vector<float>& xs) {
  tfs::Input input;
  for (float x : xs) {
    auto& feature = (*input.mutable_example_list()->add_examples()->mutable_features()->mutable_feature())["x"];
    feature.mutable_float_list()->add_value(x);
  }
  return input;
}

TEST_F(BatchingTest, ClassifyRegressAndMultiInferenceWaitWithoutAThread) {
  // As above, for the tf.Example APIs: each signature batches on its own, and a MultiInference
  // waits in the classify batch, then in the regress batch, holding no thread either time.
  Start("max_batch_size { value: 8 } batch_timeout_micros { value: 30000000 } max_enqueued_batches { value: 4 }\n",
        "", {"--enable_batching", "--rest_api_num_threads=1"});
  auto post = [&](std::string path, std::string body) {
    return std::async(std::launch::async, [this, path, body] {
      HttpClient http(server_->rest_port());
      return http.Post(path, body);
    });
  };
  // Rows waiting: classify 2 (REST) + 2 (gRPC) + 1 (MultiInference); regress 2 (REST).
  std::future<HttpResult> rest_classify = post(
      "/v1/models/m:classify", R"({"signature_name": "classify_x_to_y", "examples": [{"x": 0.0}, {"x": 2.0}]})");
  std::future<HttpResult> rest_regress =
      post("/v1/models/m:regress", R"({"signature_name": "regress_x_to_y", "examples": [{"x": 4.0}, {"x": 6.0}]})");
  auto stub = tfs::PredictionService::NewStub(MakeChannel(server_->grpc_target()));
  tfs::ClassificationRequest classify;
  classify.mutable_model_spec()->set_name("m");
  classify.mutable_model_spec()->set_signature_name("classify_x_to_y");
  *classify.mutable_input() = ExamplesOfX({8.0f, 10.0f});
  tfs::ClassificationResponse classified;
  grpc::Status classify_status;
  std::thread classify_client([&] {
    grpc::ClientContext context;
    classify_status = stub->Classify(&context, classify, &classified);
  });
  tfs::MultiInferenceRequest multi;
  for (const char* signature : {"classify_x_to_y", "regress_x_to_y"}) {
    tfs::InferenceTask* task = multi.add_tasks();
    task->mutable_model_spec()->set_name("m");
    task->mutable_model_spec()->set_signature_name(signature);
    task->set_method_name(signature[0] == 'c' ? "tensorflow/serving/classify" : "tensorflow/serving/regress");
  }
  *multi.mutable_input() = ExamplesOfX({12.0f});
  tfs::MultiInferenceResponse multi_response;
  grpc::Status multi_status;
  std::thread multi_client([&] {
    grpc::ClientContext context;
    multi_status = stub->MultiInference(&context, multi, &multi_response);
  });
  ASSERT_TRUE(WaitForQueued(4));
  // The one REST thread is free: a classify of 3 rows fills the classify batch...
  HttpClient http(server_->rest_port());
  const HttpResult fill_classify =
      http.Post("/v1/models/m:classify",
                R"({"signature_name": "classify_x_to_y", "examples": [{"x": 20.0}, {"x": 22.0}, {"x": 24.0}]})");
  EXPECT_EQ(fill_classify.status, 200) << fill_classify.body;
  EXPECT_EQ(fill_classify.body, R"({"results": [[["", 12.0]], [["", 13.0]], [["", 14.0]]]})");
  // ...which lets the MultiInference on to the regress queue, where 5 rows fill the batch.
  ASSERT_TRUE(WaitForQueued(2));
  const HttpResult fill_regress = http.Post(
      "/v1/models/m:regress",
      R"({"signature_name": "regress_x_to_y", "examples": [{"x": 0.0}, {"x": 0.0}, {"x": 0.0}, {"x": 0.0}, {"x": 2.0}]})");
  EXPECT_EQ(fill_regress.status, 200) << fill_regress.body;
  EXPECT_EQ(fill_regress.body, R"({"results": [2.0, 2.0, 2.0, 2.0, 3.0]})");

  const HttpResult classified_rest = rest_classify.get();
  EXPECT_EQ(classified_rest.body, R"({"results": [[["", 2.0]], [["", 3.0]]]})");
  const HttpResult regressed_rest = rest_regress.get();
  EXPECT_EQ(regressed_rest.body, R"({"results": [4.0, 5.0]})");
  classify_client.join();
  multi_client.join();
  ASSERT_TRUE(classify_status.ok()) << classify_status.error_message();
  ASSERT_EQ(classified.result().classifications_size(), 2);
  EXPECT_EQ(classified.result().classifications(1).classes(0).score(), 7.0f);
  ASSERT_TRUE(multi_status.ok()) << multi_status.error_message();
  ASSERT_EQ(multi_response.results_size(), 2);
  EXPECT_EQ(multi_response.results(0).classification_result().classifications(0).classes(0).score(), 8.0f);
  EXPECT_EQ(multi_response.results(1).regression_result().regressions(0).value(), 8.0f);
  const PrometheusText metrics = Scrape();
  EXPECT_EQ(metrics.Sum("lockstep_batch_size_count", "model=\"m\""), 2);
  EXPECT_EQ(metrics.Sum("lockstep_batch_size_sum", "model=\"m\""), 16);
}

TEST_F(BatchingTest, ARequestWhoseDeadlinePassesInTheQueueIsNotRun) {
  Start("max_batch_size { value: 4 } batch_timeout_micros { value: 1000000 }\n");
  auto stub = tfs::PredictionService::NewStub(MakeChannel(server_->grpc_target()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  tfs::PredictResponse response;
  const grpc::Status s = stub->Predict(&context, PredictX("m", {1.0f}), &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  // The server drops it when its batch would form (after the 1 s timeout), without running it.
  ASSERT_TRUE(WaitFor([&] {
    return Scrape().Sum("lockstep_requests_total", "model=\"m\",status=\"DEADLINE_EXCEEDED\"") == 1;
  }));
  EXPECT_EQ(Scrape().Sum("lockstep_batch_size_count", "model=\"m\""), 0);
  // The server goes on batching.
  HttpClient http(server_->rest_port());
  EXPECT_EQ(http.Post("/v1/models/m:predict", R"({"instances": [1.0, 2.0, 3.0, 4.0]})").status, 200);
}

TEST_F(BatchingTest, AModelsOwnParametersApplyToIt) {
  Start("max_batch_size { value: 64 }\n", "batching_parameters { max_batch_size { value: 2 } }");
  HttpClient http(server_->rest_port());
  const HttpResult big = http.Post("/v1/models/m:predict", R"({"instances": [1.0, 2.0, 3.0]})");
  EXPECT_EQ(big.status, 400) << big.body;
  EXPECT_NE(big.body.find("max_batch_size 2"), std::string::npos) << big.body;
  EXPECT_EQ(http.Post("/v1/models/m:predict", R"({"instances": [1.0, 2.0]})").status, 200);

  // A reload with a bad model batching setting is refused whole; the running one stays.
  WriteFile(dir_.path() / "bad.config",
            "model_config_list { config { name: \"m\" base_path: \"" + (dir_.path() / "m").string() +
                "\" batching_parameters { num_batch_threads { value: 3 } } } }\n");
  auto stub = tfs::ModelService::NewStub(MakeChannel(server_->grpc_target()));
  tfs::ReloadConfigRequest reload;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(ReadFile(dir_.path() / "bad.config"),
                                                            reload.mutable_config()));
  grpc::ClientContext context;
  tfs::ReloadConfigResponse response;
  const grpc::Status s = stub->HandleReloadConfigRequest(&context, reload, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("num_batch_threads"), std::string::npos) << s.error_message();
  EXPECT_EQ(http.Post("/v1/models/m:predict", R"({"instances": [1.0, 2.0, 3.0]})").status, 400);
}

TEST_F(BatchingTest, BadBatchingSettingsStopTheServerNamingTheFileAndField) {
  Start("max_batch_size { value: 8 } allowed_batch_sizes: [2, 4]\n", "", {"--enable_batching"}, false);
  EXPECT_NE(server_->WaitExit(), 0);
  EXPECT_NE(server_->Log().find(
                "batching.config: the last of allowed_batch_sizes (4) must equal max_batch_size (8)"),
            std::string::npos)
      << server_->Log();

  // A model's batching_parameters without --enable_batching: refused, not silently ignored.
  ScratchDir other;
  WriteHalfPlusTwo(other.path() / "m", 1);
  WriteFile(other.path() / "models.config",
            "model_config_list { config { name: \"m\" base_path: \"" + (other.path() / "m").string() +
                "\" batching_parameters { max_batch_size { value: 2 } } } }\n");
  ServerProcess plain(other.path(), {"--model_config_file=" + (other.path() / "models.config").string()},
                      false);
  EXPECT_NE(plain.WaitExit(), 0);
  EXPECT_NE(plain.Log().find("the server runs without --enable_batching"), std::string::npos) << plain.Log();
}

}  // namespace
}  // namespace lockstep::e2e
