// Traffic splitting against the real binary: a config's traffic_split spreads requests that
// name no version and no label over the arms by weight; a routing key (REST header
// X-Routing-Key, gRPC metadata x-routing-key) keeps a client on its arm, the same one over
// both protocols; moving the weights by a config reload moves only the keys that must move,
// takes effect without a restart, and fails no request on the way.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <string>
#include <thread>

#include "tests/e2e/server_harness.h"

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
    tfs::PredictRequest request;
    request.mutable_model_spec()->set_name("m");
    tensorflow::TensorProto& x = (*request.mutable_inputs())["x"];
    x.set_dtype(tensorflow::DT_FLOAT);
    x.mutable_tensor_shape()->add_dim()->set_size(1);
    x.add_float_val(1.0f);
    grpc::ClientContext context;
    context.AddMetadata("x-routing-key", key);
    tfs::PredictResponse response;
    if (!stub.Predict(&context, request, &response).ok()) return -1;
    return response.model_spec().version().value();
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
  // The labels of a model new to the server wait for its loads; so does its split.
  ASSERT_TRUE(WaitFor([&] {
    for (int i = 0; i < 50; ++i) {
      if (RestVersion() == 2) return true;
    }
    return false;
  })) << server_->Log();

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

TEST_F(TrafficSplitTest, ABadSplitIsRefusedAndTheOldOneKeepsServing) {
  ASSERT_TRUE(WaitFor([&] {
    for (int i = 0; i < 50; ++i) {
      if (RestVersion() == 2) return true;
    }
    return false;
  })) << server_->Log();
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

}  // namespace
}  // namespace lockstep::e2e
