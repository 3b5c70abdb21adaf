// The loop docs/operations.md walks, with the real binaries: model-server serves version 1 of
// digits with request logging on; traffic comes in with request ids; some of it is labelled;
// model-train retrains from the logs plus the original data into a staging directory;
// model-cli cuts the warm-up file from the same logs into it and publishes it as version 2;
// version 2 warms up, shadows version 1, answers bit for bit what its trainer evaluated, takes
// its 10 % as a sticky canary, is rolled back, and then promoted.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <bit>
#include <fstream>
#include <sstream>
#include <map>
#include <string>
#include <vector>

#include "runtime/tfrecord.h"
#include "tests/common/prometheus_text.h"
#include "tests/common/run_command.h"
#include "tests/e2e/grpc_test_util.h"
#include "tests/e2e/http_client.h"

namespace lockstep::e2e {
namespace {

struct DigitsRow {
  std::vector<float> features;
  int label = 0;
};

// examples/data/digits.csv: 64 pixel columns, then the label.
std::vector<DigitsRow> DigitsRows(size_t count) {
  std::ifstream in(std::string(LOCKSTEP_SOURCE_DIR) + "/examples/data/digits.csv");
  std::string line;
  std::getline(in, line);  // the header
  std::vector<DigitsRow> rows;
  while (rows.size() < count && std::getline(in, line)) {
    DigitsRow row;
    std::stringstream fields(line);
    for (std::string field; std::getline(fields, field, ',');) row.features.push_back(std::stof(field));
    row.label = static_cast<int>(row.features.back());
    row.features.pop_back();
    rows.push_back(std::move(row));
  }
  return rows;
}

int64_t LoggedRecords(const fs::path& dir) {
  int64_t records = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() != ".tfrecord") continue;
    StatusOr<TfRecordReader> reader = TfRecordReader::Open(e.path().string());
    if (!reader.ok()) continue;
    std::string record;
    for (StatusOr<bool> more = reader->Next(&record); more.ok() && *more; more = reader->Next(&record)) ++records;
  }
  return records;
}

// digits.json, its data path absolute, `data` merged over its data section.
fs::path TrainConfig(const fs::path& dir, const std::string& name, const nlohmann::json& data) {
  nlohmann::json config =
      nlohmann::json::parse(std::ifstream(std::string(LOCKSTEP_SOURCE_DIR) + "/config/train/digits.json"));
  config["data"]["train"] = std::string(LOCKSTEP_SOURCE_DIR) + "/examples/data/digits.csv";
  if (data.is_object()) config["data"].update(data);
  config["model"]["layers"][0]["units"] = 64;  // the loop, not the accuracy, is under test
  const fs::path path = dir / name;
  std::ofstream(path) << config.dump(2);
  return path;
}

class FeedbackLoopTest : public ::testing::Test {
 protected:
  fs::path ConfigPath() const { return dir_ / "models.config"; }

  // Writes the model config (digits at `models`, logged) and waits until the server read it.
  void Configure(const std::string& versions_and_routing) {
    const std::string logging = "logging_config {\n log_collector_config { type: \"file\" filename_prefix: \"" +
                                (dir_ / "logs" / "digits").string() +
                                "\" }\n sampling_config { sampling_rate: 1.0 }\n }\n";
    WriteFile(ConfigPath(), ConfigText({{"digits", dir_ / "models", logging + versions_and_routing}}));
    if (server_ == nullptr) return;
    const size_t before = Count(server_->Log(), "event=config_applied");
    ASSERT_TRUE(WaitFor([&] { return Count(server_->Log(), "event=config_applied") > before; })) << server_->Log();
  }
  static size_t Count(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  }

  // The version that answered `row` for a client with routing key `key` (and request id `id`).
  int64_t Predict(const std::vector<float>& row, const std::string& key, const std::string& id = "") {
    std::map<std::string, std::string> headers;
    if (!key.empty()) headers["X-Routing-Key"] = key;
    if (!id.empty()) headers["X-Request-Id"] = id;
    const HttpResult r = http_->Request("POST", "/v1/models/digits:predict",
                                        nlohmann::json{{"instances", {row}}}.dump(), headers);
    EXPECT_EQ(r.status, 200) << r.body;
    const auto version = r.headers.find("x-model-version");
    return version == r.headers.end() ? -1 : std::stoll(version->second);
  }

  ScratchDir dir_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<HttpClient> http_;
};

TEST_F(FeedbackLoopTest, ServeLogLabelRetrainWarmShadowCanaryRollBackPromote) {
  const std::string train = MODEL_TRAIN_PATH, cli = MODEL_CLI_PATH;
  // 1. Version 1, trained on the original data, served with every request logged.
  test::CommandResult run = test::RunCommand(train + " --config " + TrainConfig(dir_.path(), "v1.json", {}).string() +
                                             " --epochs 2 --export_dir " + (dir_ / "models").string() + " 2>&1");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  Configure("model_version_policy { specific { versions: 1 } }\n version_labels { key: \"stable\" value: 1 }");
  server_ = std::make_unique<ServerProcess>(
      dir_.path(), std::vector<std::string>{"--model_config_file=" + ConfigPath().string(),
                                            "--model_config_file_poll_wait_seconds=1",
                                            "--request_log_max_file_age_seconds=1"});
  http_ = std::make_unique<HttpClient>(server_->rest_port());

  // 2. Traffic: 300 requests, each with its id; the log files close within a second.
  const std::vector<DigitsRow> rows = DigitsRows(300);
  for (size_t i = 0; i < rows.size(); ++i) ASSERT_EQ(Predict(rows[i].features, "", "req-" + std::to_string(i)), 1);
  ASSERT_TRUE(WaitFor([&] { return LoggedRecords(dir_ / "logs") == 300; })) << LoggedRecords(dir_ / "logs");

  // 3. Labels for the first 200 (the rest are never labelled).
  {
    std::ofstream labels(dir_ / "labels.csv");
    labels << "request_id,label\n";
    for (size_t i = 0; i < 200; ++i) labels << "req-" << i << "," << rows[i].label << "\n";
  }

  // 4. Retrain from the logs plus the original data, into a staging directory.
  const fs::path v2_config =
      TrainConfig(dir_.path(), "v2.json",
                  {{"format", "prediction_log"},
                   {"train", (dir_ / "logs" / "digits.*.tfrecord").string()},
                   {"labels", (dir_ / "labels.csv").string()},
                   {"original", {{"files", std::string(LOCKSTEP_SOURCE_DIR) + "/examples/data/digits.csv"}}}});
  const fs::path predictions = dir_ / "v2_predictions.json";
  run = test::RunCommand(train + " --config " + v2_config.string() + " --epochs 2 --export_dir " +
                         (dir_ / "staging").string() + " --predictions_out " + predictions.string() + " 2>&1");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("records=300 passed_over=0 instances=300 labelled=200 unlabeled=100 unmatched_labels=0 "
                            "original_rows=1797 duplicates=0"),
            std::string::npos)
      << run.output;

  // 5. Its warm-up file, cut from the same traffic, then publish it as version 2.
  run = test::RunCommand(cli + " warmup --from-log '" + (dir_ / "logs" / "*.tfrecord").string() + "' --out " +
                         (dir_ / "staging" / "1" / "assets.extra" / "tf_serving_warmup_requests").string() +
                         " --max 20 2>&1");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("listed it in"), std::string::npos) << run.output;
  run = test::RunCommand(cli + " publish --dir " + (dir_ / "staging" / "1").string() + " --to " +
                         (dir_ / "models").string() + " 2>&1");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("as " + (dir_ / "models").string() + "/2"), std::string::npos) << run.output;

  // 6. Load it beside version 1 (it warms up on the logged requests first), then shadow: it
  // sees a copy of every request while version 1 answers. A label names only a version that
  // is available, so the label comes once it is.
  Configure("model_version_policy { specific { versions: 1 versions: 2 } }\n version_labels { key: \"stable\" value: 1 }");
  ASSERT_TRUE(WaitFor([&] { return http_->Get("/v2/models/digits/versions/2/ready").status == 200; })) << server_->Log();
  Configure(
      "model_version_policy { specific { versions: 1 versions: 2 } }\n version_labels { key: \"stable\" value: 1 }\n"
      " version_labels { key: \"canary\" value: 2 }\n traffic_split { arms { label: \"stable\" weight: 100 }\n"
      " shadow { label: \"canary\" percent: 100 } }");
  EXPECT_TRUE(WaitFor([&] {
    return server_->Log().find("event=warmup_replayed model=digits version=2 records=20") != std::string::npos;
  })) << server_->Log();
  for (size_t i = 0; i < 20; ++i) EXPECT_EQ(Predict(rows[i].features, "user-" + std::to_string(i)), 1);
  ASSERT_TRUE(WaitFor([&] {
    const test::PrometheusText m = test::ParsePrometheusText(http_->Get("/metrics").body);
    return m.Get(R"(lockstep_shadow_requests_total{model="digits",version="2",result="agree"})", 0) +
               m.Get(R"(lockstep_shadow_requests_total{model="digits",version="2",result="disagree"})", 0) >=
           20;
  }));

  // 7. Version 2 answers bit for bit what model-train evaluated for its test rows.
  const nlohmann::json expected = nlohmann::json::parse(ReadFile(predictions));
  nlohmann::json instances = nlohmann::json::array();
  for (const auto& row : expected["features"]) {
    nlohmann::json r = nlohmann::json::array();
    for (const auto& bits : row) r.push_back(std::bit_cast<float>(bits.get<uint32_t>()));
    instances.push_back(r);
  }
  const HttpResult answered =
      http_->Post("/v1/models/digits/versions/2:predict", nlohmann::json{{"instances", instances}}.dump());
  ASSERT_EQ(answered.status, 200) << answered.body.substr(0, 300);
  const nlohmann::json served = nlohmann::json::parse(answered.body)["predictions"];
  ASSERT_EQ(served.size(), expected["probabilities"].size());
  for (size_t i = 0; i < served.size(); ++i) {
    for (size_t j = 0; j < 10; ++j) {
      ASSERT_EQ(std::bit_cast<uint32_t>(served[i]["probabilities"][j].get<float>()),
                expected["probabilities"][i][j].get<uint32_t>())
          << "row " << i << " class " << j;
    }
  }

  // 8. The canary at 10 %, sticky: a client stays on its version.
  Configure(
      "model_version_policy { specific { versions: 1 versions: 2 } }\n version_labels { key: \"stable\" value: 1 }\n"
      " version_labels { key: \"canary\" value: 2 }\n traffic_split { arms { label: \"stable\" weight: 90 }\n"
      " arms { label: \"canary\" weight: 10 } }");
  std::map<std::string, int64_t> arm;
  int on_canary = 0;
  for (int k = 0; k < 400; ++k) {
    const std::string key = "user-" + std::to_string(k);
    arm[key] = Predict(rows[static_cast<size_t>(k) % rows.size()].features, key);
    on_canary += arm[key] == 2;
  }
  EXPECT_GE(on_canary, 20) << "10 % of 400 keys";
  EXPECT_LE(on_canary, 65) << "10 % of 400 keys";
  for (int k = 0; k < 100; ++k) {
    const std::string key = "user-" + std::to_string(k);
    EXPECT_EQ(Predict(rows[0].features, key), arm[key]) << key;
  }

  // 9. Roll back: the canary gets nothing, its clients included.
  Configure(
      "model_version_policy { specific { versions: 1 versions: 2 } }\n version_labels { key: \"stable\" value: 1 }\n"
      " version_labels { key: \"canary\" value: 2 }\n traffic_split { arms { label: \"stable\" weight: 100 }\n"
      " arms { label: \"canary\" weight: 0 } }");
  for (const auto& [key, version] : arm) {
    if (version == 2) {
      EXPECT_EQ(Predict(rows[0].features, key), 1) << key;
    }
  }

  // 10. Promote: stable is version 2, version 1 leaves.
  Configure("model_version_policy { specific { versions: 2 } }\n version_labels { key: \"stable\" value: 2 }");
  for (int k = 0; k < 20; ++k) EXPECT_EQ(Predict(rows[0].features, "user-" + std::to_string(k)), 2);
}

}  // namespace
}  // namespace lockstep::e2e
