// Prometheus metrics from the real binary: after REST and gRPC requests that succeed and fail,
// /metrics and the --monitoring_config_file path serve a valid exposition (read by a strict
// parser) whose counts are the requests sent, by model, version, protocol and status, with
// latency histograms, version states and load times, traffic-split arms, process memory and
// build info. A bad monitoring config stops the server at start with the file named.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "tests/common/prometheus_text.h"
#include "tests/common/run_command.h"
#include "tests/e2e/server_harness.h"

namespace lockstep::e2e {
namespace {

namespace tfs = tensorflow::serving;
using test::ParsePrometheusText;
using test::PrometheusText;

std::string Config(const fs::path& base) {
  return "model_config_list { config {\n"
         "  name: \"m\" base_path: \"" +
         base.string() +
         "\"\n"
         "  model_version_policy { specific { versions: 1 versions: 2 } }\n"
         "  version_labels { key: \"stable\" value: 1 } version_labels { key: \"canary\" value: 2 }\n"
         "  traffic_split { arms { label: \"stable\" weight: 1 } arms { label: \"canary\" weight: 1 } }\n"
         "} }\n";
}

class MetricsTest : public ::testing::Test {
 protected:
  // `before_server` runs once the models are written, before the server starts.
  void Start(const std::string& monitoring, const std::function<void()>& before_server = {}) {
    WriteVersionModel(dir_.path() / "m", 1);
    WriteVersionModel(dir_.path() / "m", 2);
    if (before_server) before_server();
    WriteFile(dir_.path() / "models.config", Config(dir_.path() / "m"));
    WriteFile(dir_.path() / "monitoring.config", monitoring);
    server_ = std::make_unique<ServerProcess>(
        dir_.path(),
        std::vector<std::string>{"--model_config_file=" + (dir_.path() / "models.config").string(),
                                 "--monitoring_config_file=" + (dir_.path() / "monitoring.config").string()});
  }

  PrometheusText Scrape(const std::string& path) {
    HttpClient http(server_->rest_port());
    const HttpResult r = http.Get(path);
    EXPECT_EQ(r.status, 200) << path << ": " << r.body;
    EXPECT_EQ(r.headers.count("content-type") ? r.headers.at("content-type") : "",
              "text/plain; version=0.0.4; charset=utf-8");
    PrometheusText parsed = ParsePrometheusText(r.body);
    EXPECT_EQ(parsed.error, "") << r.body;
    return parsed;
  }

  ScratchDir dir_;
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(MetricsTest, CountsWhatWasServedAndHowItEnded) {
  Start("prometheus_config { enable: true path: \"/monitoring/prometheus/metrics\" }\n");
  HttpClient http(server_->rest_port());
  for (int i = 0; i < 20; ++i)
    ASSERT_EQ(http.Post("/v1/models/m:predict", R"({"instances": [1.0]})").status, 200);
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(http.Post("/v1/models/nope:predict", R"({"instances": [1.0]})").status, 404);
  for (int i = 0; i < 2; ++i) ASSERT_EQ(http.Post("/v1/models/m:predict", R"({"instances": )").status, 400);
  ASSERT_EQ(http.Post("/v1/models/m/versions/1:regress", R"({"signature_name": "regress_x_to_y",
      "examples": [{"x": 1.0}, {"x": 2.0}]})")
                .status,
            200);
  auto stub = tfs::PredictionService::NewStub(MakeChannel(server_->grpc_target()));
  for (int i = 0; i < 5; ++i) {
    tfs::PredictRequest request = PredictX("m");
    request.mutable_model_spec()->mutable_version()->set_value(1);
    grpc::ClientContext context;
    tfs::PredictResponse response;
    ASSERT_TRUE(stub->Predict(&context, request, &response).ok());
  }

  const PrometheusText m = Scrape("/metrics");
  EXPECT_EQ(Scrape("/monitoring/prometheus/metrics").Sum("lockstep_requests_total"),
            m.Sum("lockstep_requests_total"));
  EXPECT_EQ(m.Sum("lockstep_requests_total", R"(model="m",protocol="rest",api="predict",status="OK")"), 20);
  EXPECT_EQ(m.Sum("lockstep_requests_total", R"(version="1",signature="serving_default",protocol="grpc")"),
            5);
  EXPECT_EQ(m.Sum("lockstep_requests_total", R"(signature="regress_x_to_y",api="regress",status="OK")"), 1);
  // A model the server does not serve is no label: its requests count with an empty model.
  EXPECT_EQ(
      m.Get(
          R"(lockstep_requests_total{model="",version="",signature="",protocol="rest",api="predict",status="NOT_FOUND"})"),
      3);
  EXPECT_EQ(m.Sum("lockstep_requests_total", R"(status="INVALID_ARGUMENT")"), 2);
  EXPECT_EQ(m.Sum("lockstep_request_seconds_count", R"(protocol="rest",api="predict")"), 20);
  EXPECT_EQ(m.Sum("lockstep_request_compute_seconds_count"), 26);
  EXPECT_EQ(m.Sum("lockstep_request_queue_seconds_count"), 26);
  EXPECT_GT(m.Sum("lockstep_request_compute_seconds_sum"), 0);
  EXPECT_LE(m.Sum("lockstep_request_compute_seconds_sum"), m.Sum("lockstep_request_seconds_sum"));
  EXPECT_EQ(m.Get(R"(:tensorflow:serving:request_count{model_name="m",status="OK"})"), 26);
  EXPECT_EQ(m.Sum(":tensorflow:serving:request_latency_count", R"(entrypoint="GRPC")"), 5);
  EXPECT_EQ(m.types.at(":tensorflow:serving:runtime_latency"), "histogram");

  for (const char* v : {"1", "2"}) {
    EXPECT_EQ(m.Get(std::string(R"(lockstep_model_version_state{model="m",version=")") + v +
                    R"(",state="AVAILABLE"})"),
              1);
    EXPECT_GT(m.Get(std::string(R"(lockstep_model_version_load_seconds{model="m",version=")") + v + "\"}", 0),
              0);
  }
  EXPECT_EQ(m.Get(R"(lockstep_traffic_split_requests_total{model="m",arm="label:stable"})") +
                m.Get(R"(lockstep_traffic_split_requests_total{model="m",arm="label:canary"})"),
            20);
  EXPECT_GT(m.Get("process_resident_memory_bytes"), 1e6);
  EXPECT_GT(m.Get("process_open_fds"), 3);
  EXPECT_GT(m.Get("process_start_time_seconds"), 1.6e9);
  EXPECT_EQ(m.Sum("lockstep_build_info"), 1);
}

// A bundle writer that died left its temporary in the base path: the server counts it in a
// metric and leaves it (it only reads the directories it serves).
TEST_F(MetricsTest, StaleTemporariesAreCountedNotRemoved) {
  const fs::path dead = dir_.path() / "m" / ".tmp-3-0123456789abcdef";
  Start("", [&] {
    fs::create_directories(dead);
    fs::last_write_time(dead, fs::file_time_type::clock::now() - std::chrono::minutes(2));
  });
  const PrometheusText m = Scrape("/metrics");
  EXPECT_EQ(m.types.at("lockstep_model_stale_temporaries"), "gauge");
  EXPECT_EQ(m.Get(R"(lockstep_model_stale_temporaries{model="m"})"), 1);
  EXPECT_TRUE(fs::exists(dead));
  EXPECT_NE(server_->Log().find("event=stale_temporaries model=m"), std::string::npos) << server_->Log();
}

// A version that is gone keeps its series, with its last counts, for the grace period, and loses
// them at the first scrape after it: a server rolling versions for a week does not grow its
// exposition.
TEST(MetricSeriesTest, AGoneVersionsSeriesGoAfterTheGrace) {
  ScratchDir dir;
  const fs::path base = dir.path() / "m";
  WriteVersionModel(base, 1);
  ServerProcess server(dir.path(), {"--model_name=m", "--model_base_path=" + base.string(),
                                    "--file_system_poll_wait_seconds=1", "--metrics_gone_version_grace_seconds=2"});
  HttpClient http(server.rest_port());
  for (int i = 0; i < 3; ++i) ASSERT_EQ(http.Post("/v1/models/m:predict", R"({"instances": [1.0]})").status, 200);
  auto scrape = [&] { return ParsePrometheusText(http.Get("/metrics").body); };
  EXPECT_EQ(scrape().Sum("lockstep_requests_total", R"(version="1")"), 3);

  WriteVersionModel(base, 2);  // the latest policy serves 2 and unloads 1
  ASSERT_TRUE(WaitFor([&] {
    const std::string status = http.Get("/v1/models/m/versions/1").body;
    return status.find("\"END\"") != std::string::npos;
  })) << http.Get("/v1/models/m").body;
  ASSERT_EQ(http.Post("/v1/models/m:predict", R"({"instances": [1.0]})").body, R"({"predictions": [2.0]})");
  const auto gone = std::chrono::steady_clock::now();
  const PrometheusText last = scrape();
  EXPECT_EQ(last.Sum("lockstep_requests_total", R"(version="1")"), 3);
  EXPECT_EQ(last.Sum("lockstep_request_seconds_count", R"(version="1")"), 3);
  // Within the grace every scraper still sees them.
  EXPECT_EQ(scrape().Sum("lockstep_requests_total", R"(version="1")"), 3);
  std::this_thread::sleep_until(gone + std::chrono::milliseconds(2100));
  const PrometheusText after = scrape();
  EXPECT_EQ(after.Sum("lockstep_requests_total", R"(version="1")"), 0);
  EXPECT_EQ(after.Sum("lockstep_request_seconds_count", R"(version="1")"), 0);
  EXPECT_EQ(after.Sum("lockstep_requests_total", R"(version="2")"), 1);
  EXPECT_EQ(after.Sum(":tensorflow:serving:request_count", R"(model_name="m")"), 4);  // the model stays
  EXPECT_NE(server.Log().find("event=metric_series_dropped versions=1 models=0"), std::string::npos)
      << server.Log();
}

// A model that leaves the config loses TensorFlow Serving's per-model series the same way.
TEST(MetricSeriesTest, AModelOutOfTheConfigLosesItsSeriesAfterTheGrace) {
  ScratchDir dir;
  WriteVersionModel(dir.path() / "a", 1);
  WriteVersionModel(dir.path() / "b", 1);
  const fs::path config = dir.path() / "models.config";
  auto write_config = [&](std::vector<std::string> names) {
    std::string text = "model_config_list {";
    for (const std::string& name : names)
      text += " config { name: \"" + name + "\" base_path: \"" + (dir.path() / name).string() + "\" }";
    WriteFile(config, text + " }\n");
  };
  write_config({"a", "b"});
  ServerProcess server(dir.path(), {"--model_config_file=" + config.string(), "--model_config_file_poll_wait_seconds=1",
                                    "--metrics_gone_version_grace_seconds=1"});
  HttpClient http(server.rest_port());
  ASSERT_EQ(http.Post("/v1/models/b:predict", R"({"instances": [1.0]})").status, 200);
  auto scrape = [&] { return ParsePrometheusText(http.Get("/metrics").body); };
  EXPECT_EQ(scrape().Sum(":tensorflow:serving:request_count", R"(model_name="b")"), 1);
  write_config({"a"});
  ASSERT_TRUE(WaitFor([&] { return http.Get("/v1/models/b").status == 404; }));
  EXPECT_EQ(scrape().Sum(":tensorflow:serving:request_count", R"(model_name="b")"), 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  const PrometheusText after = scrape();
  EXPECT_EQ(after.Sum(":tensorflow:serving:request_count", R"(model_name="b")"), 0);
  EXPECT_EQ(after.Sum("lockstep_requests_total", R"(model="b")"), 0);
  EXPECT_NE(server.Log().find("event=metric_series_dropped versions=1 models=1"), std::string::npos)
      << server.Log();
}

// Debian's Prometheus server (scripts/install-deps) scrapes the monitoring path and answers
// queries about what it stored (scripts/prometheus-check).
TEST_F(MetricsTest, ARealPrometheusScrapesIt) {
  Start("prometheus_config { enable: true }\n");
  HttpClient http(server_->rest_port());
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(http.Post("/v1/models/m:predict", R"({"instances": [1.0]})").status, 200);
  const test::CommandResult r =
      test::RunCommand(std::string(LOCKSTEP_SOURCE_DIR) + "/scripts/prometheus-check 127.0.0.1:" +
                       std::to_string(server_->rest_port()) + " /monitoring/prometheus/metrics");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("up=1 lockstep_build_info=1 sum(lockstep_requests_total)=3"), std::string::npos)
      << r.output;
}

TEST_F(MetricsTest, MonitoringConfigDecidesTheExtraPath) {
  Start("prometheus_config { enable: false }\n");
  HttpClient http(server_->rest_port());
  EXPECT_EQ(http.Get("/monitoring/prometheus/metrics").status, 404);
  EXPECT_EQ(http.Get("/metrics").status, 200);
}

TEST_F(MetricsTest, ABadMonitoringConfigStopsTheServerNamingTheFile) {
  WriteFile(dir_.path() / "monitoring.config", "prometheus_config { enable: true path: \"metrics\" }\n");
  WriteVersionModel(dir_.path() / "m", 1);
  ServerProcess server(dir_.path(),
                       {"--model_name=m", "--model_base_path=" + (dir_.path() / "m").string(),
                        "--monitoring_config_file=" + (dir_.path() / "monitoring.config").string()},
                       /*expect_ready=*/false);
  EXPECT_NE(server.WaitExit(), 0);
  EXPECT_NE(server.Log().find("monitoring.config: prometheus_config.path 'metrics' must be an absolute path"),
            std::string::npos)
      << server.Log();
}

}  // namespace
}  // namespace lockstep::e2e
