// Traffic splitting against the real binary: a config's traffic_split spreads requests that
// name no version and no label over the arms by weight; a routing key (REST header
// X-Routing-Key, gRPC metadata x-routing-key) keeps a client on its arm, the same one over
// both protocols; moving the weights by a config reload moves only the keys that must move,
// takes effect without a restart, and fails no request on the way. The Open Inference
// Protocol's requests route by the same keys to the same arms.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <string>
#include <thread>

#include "inference/grpc_service.grpc.pb.h"
#include "tests/common/prometheus_text.h"
#include "tests/e2e/server_harness.h"
#include "tests/e2e/shadow_scenario.h"

namespace lockstep::e2e {
namespace {

namespace tfs = tensorflow::serving;

// Model "m" at `base`: versions 1 and 2, stable = 1 and canary = 2, split `stable`/`canary`.
std::string SplitConfig(const fs::path& base, int stable, int canary) {
  return "model_config_list {\n"
         "  config {\n"
         "    name: \"m\"\n"
         "    base_path: \"" +
         base.string() +
         "\"\n"
         "    model_platform: \"tensorflow\"\n"
         "    model_version_policy { specific { versions: 1 versions: 2 } }\n"
         "    version_labels { key: \"stable\" value: 1 }\n"
         "    version_labels { key: \"canary\" value: 2 }\n"
         "    traffic_split {\n"
         "      arms { label: \"stable\" weight: " +
         std::to_string(stable) +
         " }\n"
         "      arms { label: \"canary\" weight: " +
         std::to_string(canary) +
         " }\n"
         "    }\n"
         "  }\n"
         "}\n";
}

class TrafficSplitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteVersionModel(dir_.path() / "m", 1);
    WriteVersionModel(dir_.path() / "m", 2);
    WriteFile(config_path(), SplitConfig(dir_.path() / "m", 90, 10));
    server_ = std::make_unique<ServerProcess>(
        dir_.path(), std::vector<std::string>{"--model_config_file=" + config_path().string(),
                                              "--model_config_file_poll_wait_seconds=1"});
    http_ = std::make_unique<HttpClient>(server_->rest_port());
  }

  fs::path config_path() const { return dir_.path() / "models.config"; }

  // The version that answered a REST predict of x = 1 (its X-Model-Version, checked against
  // the answer, y = version), or -1 when the request failed.
  int64_t RestVersion(const std::string& key = "") {
    std::map<std::string, std::string> headers;
    if (!key.empty()) headers["X-Routing-Key"] = key;
    const HttpResult r = http_->Request("POST", "/v1/models/m:predict", R"({"instances": [1.0]})", headers);
    if (r.status != 200) {
      ADD_FAILURE() << "status " << r.status << " " << r.error << " " << r.body;
      return -1;
    }
    const auto it = r.headers.find("x-model-version");
    if (it == r.headers.end()) return -1;
    const int64_t version = std::stoll(it->second);
    return r.body == R"({"predictions": [)" + std::to_string(version) + ".0]}" ||
                   r.body == R"({"predictions": [)" + std::to_string(version) + "]}"
               ? version
               : -1;
  }

  // The same over gRPC, with the key in the x-routing-key metadata.
  int64_t GrpcVersion(tfs::PredictionService::Stub& stub, const std::string& key) {
    const tfs::PredictRequest request = PredictX("m");
    grpc::ClientContext context;
    context.AddMetadata("x-routing-key", key);
    tfs::PredictResponse response;
    if (!stub.Predict(&context, request, &response).ok()) return -1;
    return response.model_spec().version().value();
  }

  // The version that answered a v2 infer over REST (model_version, checked against y), or -1.
  int64_t V2RestVersion(const std::string& key) {
    const HttpResult r = http_->Request(
        "POST", "/v2/models/m/infer",
        R"({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1], "data": [1.0]}]})", {{"X-Routing-Key", key}});
    if (r.status != 200) {
      ADD_FAILURE() << "status " << r.status << " " << r.error << " " << r.body;
      return -1;
    }
    const int64_t version = std::stoll(HeaderOfResult(r, "x-model-version"));
    const bool consistent = r.body.find(R"("model_version":")" + std::to_string(version) + "\"") != std::string::npos &&
                            r.body.find(R"("data":[)" + std::to_string(version) + ".0]") != std::string::npos;
    return consistent ? version : -1;
  }

  // The same over gRPC's ModelInfer, with the key in the x-routing-key metadata.
  int64_t V2GrpcVersion(inference::GRPCInferenceService::Stub& stub, const std::string& key) {
    inference::ModelInferRequest request;
    request.set_model_name("m");
    auto* x = request.add_inputs();
    x->set_name("x");
    x->set_datatype("FP32");
    x->add_shape(1);
    x->mutable_contents()->add_fp32_contents(1.0f);
    grpc::ClientContext context;
    context.AddMetadata("x-routing-key", key);
    inference::ModelInferResponse response;
    if (!stub.ModelInfer(&context, request, &response).ok()) return -1;
    return std::stoll(response.model_version());
  }

  static std::string HeaderOfResult(const HttpResult& r, const std::string& name) {
    const auto it = r.headers.find(name);
    return it == r.headers.end() ? "-1" : it->second;
  }

  // Whether the canary answers some of the requests without a key: the split is in place.
  bool CanaryAnswers() {
    return WaitFor([&] {
      for (int i = 0; i < 50; ++i) {
        if (RestVersion() == 2) return true;
      }
      return false;
    });
  }

  std::map<std::string, int64_t> ArmsOfKeys(int keys) {
    std::map<std::string, int64_t> arms;
    for (int k = 0; k < keys; ++k)
      arms["user-" + std::to_string(k)] = RestVersion("user-" + std::to_string(k));
    return arms;
  }

  ScratchDir dir_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<HttpClient> http_;
};

TEST_F(TrafficSplitTest, WeightsStickyKeysAndAReloadThatMovesOnlyWhatMust) {
  ASSERT_TRUE(CanaryAnswers()) << server_->Log();

  // 10,000 requests without a key at 90/10: within 2 points of 10 % on the canary.
  int canary = 0, failed = 0;
  for (int i = 0; i < 10000; ++i) {
    const int64_t v = RestVersion();
    canary += v == 2;
    failed += v != 1 && v != 2;
  }
  EXPECT_EQ(failed, 0);
  EXPECT_GE(canary, 800);
  EXPECT_LE(canary, 1200);

  // Keys never flip while the weights are unchanged, and gRPC routes a key as REST does.
  const std::map<std::string, int64_t> before = ArmsOfKeys(1000);
  EXPECT_EQ(ArmsOfKeys(1000), before);
  auto stub = tfs::PredictionService::NewStub(MakeChannel(server_->grpc_target()));
  for (int k = 0; k < 200; ++k) {
    const std::string key = "user-" + std::to_string(k);
    ASSERT_EQ(GrpcVersion(*stub, key), before.at(key)) << key;
  }

  // 90/10 -> 50/50 by a config reload, under load: no request fails.
  std::atomic<bool> stop{false};
  std::atomic<int> load_failures{0}, load_requests{0};
  std::thread load([&] {
    HttpClient client(server_->rest_port());
    while (!stop.load()) {
      const HttpResult r = client.Post("/v1/models/m:predict", R"({"instances": [1.0]})");
      load_failures += r.status != 200;
      ++load_requests;
    }
  });
  const fs::path tmp = config_path().string() + ".tmp";
  WriteFile(tmp, SplitConfig(dir_.path() / "m", 50, 50));
  fs::rename(tmp, config_path());
  // Key user-k on stable at 90/10 moves with probability 4/9: wait until the moved share of
  // the stable keys shows the new weights.
  std::map<std::string, int64_t> after;
  const bool applied = WaitFor([&] {
    after = ArmsOfKeys(1000);
    int moved = 0;
    for (const auto& [key, version] : after) moved += version != before.at(key);
    return moved > 200;
  });
  stop = true;
  load.join();
  ASSERT_TRUE(applied) << server_->Log();
  EXPECT_EQ(load_failures.load(), 0) << "of " << load_requests.load();
  after = ArmsOfKeys(1000);  // the last look may have straddled the reload
  EXPECT_GT(load_requests.load(), 0);

  int moved = 0;
  for (const auto& [key, version] : after) {
    if (version == before.at(key)) continue;
    ++moved;
    EXPECT_EQ(before.at(key), 1) << key << " left the canary";
    EXPECT_EQ(version, 2) << key;
  }
  // 40 % of all keys must move (90 % -> 50 % on stable): 400 of 1000, +-6 points.
  EXPECT_NEAR(moved, 400, 60);
  EXPECT_EQ(ArmsOfKeys(1000), after);
}

TEST_F(TrafficSplitTest, OpenInferenceRequestsRouteByTheSameKeys) {
  ASSERT_TRUE(CanaryAnswers());
  auto stub = inference::GRPCInferenceService::NewStub(MakeChannel(server_->grpc_target()));
  int canary = 0;
  for (int k = 0; k < 40; ++k) {
    const std::string key = "user-" + std::to_string(k);
    const int64_t arm = RestVersion(key);
    ASSERT_NE(arm, -1) << key;
    EXPECT_EQ(V2RestVersion(key), arm) << key;
    EXPECT_EQ(V2GrpcVersion(*stub, key), arm) << key;
    canary += arm == 2;
  }
  EXPECT_GT(canary, 0) << "no key of 40 landed on the 10 % canary arm";
}

TEST_F(TrafficSplitTest, ABadSplitIsRefusedAndTheOldOneKeepsServing) {
  ASSERT_TRUE(CanaryAnswers()) << server_->Log();
  const std::map<std::string, int64_t> before = ArmsOfKeys(100);
  std::string bad = SplitConfig(dir_.path() / "m", 50, 50);
  const std::string canary_arm = "arms { label: \"canary\"";
  bad.replace(bad.find(canary_arm), canary_arm.size(), "arms { label: \"blue\"");
  const fs::path tmp = config_path().string() + ".tmp";
  WriteFile(tmp, bad);
  fs::rename(tmp, config_path());
  ASSERT_TRUE(WaitFor([&] { return server_->Log().find("event=config_file_rejected") != std::string::npos; }))
      << server_->Log();
  EXPECT_NE(
      server_->Log().find("traffic_split.arms[1]: label 'blue' is not one of the model's version_labels"),
      std::string::npos)
      << server_->Log();
  EXPECT_EQ(ArmsOfKeys(100), before);
}

// Shadow traffic: every request version 1 answers (predicts, and v2 infers) is copied to the shadow's target; the client
// always gets version 1's answer; the metrics say whether the candidate agreed. Version 3 is
// y = x, as version 1; version 2 is y = 2x.
TEST(ShadowTrafficTest, CopiesAreComparedAndNeverReturned) {
  ScratchDir dir;
  const fs::path base = dir.path() / "m";
  ASSERT_NO_FATAL_FAILURE(WriteShadowScenarioModels(base));
  const fs::path config_path = dir.path() / "models.config";
  WriteFile(config_path, ShadowConfig(base, "same"));
  ServerProcess server(dir.path(),
                       {"--model_config_file=" + config_path.string(), "--model_config_file_poll_wait_seconds=1"});
  HttpClient http(server.rest_port());
  auto shadow_count = [&](const std::string& version, const std::string& result) {
    return test::ParsePrometheusText(http.Get("/metrics").body)
        .Get("lockstep_shadow_requests_total{model=\"m\",version=\"" + version + "\",result=\"" + result + "\"}", 0);
  };
  int sent = 0;  // requests version 1 answered, each copied to the shadow
  auto predict_v1 = [&] {
    const HttpResult r = http.Post("/v1/models/m/labels/stable:predict", R"({"instances": [3.0]})");
    EXPECT_EQ(r.status, 200) << r.error;
    EXPECT_EQ(r.headers.count("x-model-version") ? r.headers.at("x-model-version") : "", "1");
    EXPECT_EQ(r.body, R"({"predictions": [3.0]})");
    sent += r.status == 200;
  };
  ASSERT_TRUE(WaitFor([&] { return http.Get("/v1/models/m/labels/same").status == 200; })) << server.Log();
  for (int i = 0; i < 20; ++i) predict_v1();
  // gRPC's predicts are copied too.
  auto stub = tfs::PredictionService::NewStub(MakeChannel(server.grpc_target()));
  for (int i = 0; i < 5; ++i, ++sent) {
    tfs::PredictRequest request = PredictX("m", 3.0f);
    request.mutable_model_spec()->set_version_label("stable");
    grpc::ClientContext context;
    tfs::PredictResponse response;
    ASSERT_TRUE(stub->Predict(&context, request, &response).ok());
    EXPECT_EQ(response.outputs().at("y").float_val(0), 3.0f);
  }
  // And the Open Inference Protocol's infers, version label given as the version string.
  for (int i = 0; i < 5; ++i, ++sent) {
    const HttpResult r = http.Post("/v2/models/m/versions/stable/infer",
                                   R"({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1], "data": [3.0]}]})");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_NE(r.body.find(R"("model_version":"1")"), std::string::npos) << r.body;
  }
  EXPECT_TRUE(WaitFor([&] { return shadow_count("3", "agree") == 30; })) << http.Get("/metrics").body;
  EXPECT_EQ(shadow_count("3", "disagree"), 0);

  // The shadow moves to version 2 (y = 2x): it disagrees, and the client still gets version 1.
  const fs::path tmp = config_path.string() + ".tmp";
  WriteFile(tmp, ShadowConfig(base, "double"));
  fs::rename(tmp, config_path);
  ASSERT_TRUE(WaitFor([&] {
    predict_v1();
    return shadow_count("2", "disagree") > 0;
  })) << server.Log();
  for (int i = 0; i < 10; ++i) predict_v1();
  // Every copy was run once, on the shadow of its moment.
  EXPECT_TRUE(WaitFor([&] { return shadow_count("3", "agree") + shadow_count("2", "disagree") == sent; }))
      << sent << " sent; " << http.Get("/metrics").body;
  EXPECT_GE(shadow_count("2", "disagree"), 10);
  EXPECT_EQ(shadow_count("3", "disagree") + shadow_count("2", "agree"), 0);
  // Requests version 2 answers itself are not copied to it.
  const double copies = shadow_count("2", "disagree");
  EXPECT_EQ(http.Post("/v1/models/m/versions/2:predict", R"({"instances": [3.0]})").body, R"({"predictions": [6.0]})");
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(shadow_count("2", "disagree"), copies);
  const test::PrometheusText m = test::ParsePrometheusText(http.Get("/metrics").body);
  EXPECT_EQ(m.Get(R"(lockstep_shadow_seconds_count{model="m",version="2"})"), copies);
}

}  // namespace
}  // namespace lockstep::e2e
