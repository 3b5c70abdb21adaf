// logging_config end to end: model-server logs every kind of answered request (REST and gRPC
// predict, classify, regress, multi-inference, the Open Inference Protocol's infer) as
// PredictionLog records in TFRecord files that TensorFlow Serving's warm-up reader reads; the
// drain writes what is queued; a log directory that disappears, or a file size limit the log
// reaches, costs records (counted) and never a request.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "runtime/tfrecord.h"
#include "tensorflow_serving/apis/prediction_log.pb.h"
#include "tests/e2e/grpc_test_util.h"
#include "tests/common/run_command.h"
#include "tests/e2e/http_client.h"

namespace lockstep::e2e {
namespace {

std::vector<fs::path> LogFiles(const fs::path& dir, const std::string& suffix = ".tfrecord") {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      out.push_back(e.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<tfs::PredictionLog> ReadLogs(const fs::path& dir) {
  std::vector<tfs::PredictionLog> logs;
  for (const fs::path& file : LogFiles(dir)) {
    StatusOr<TfRecordReader> reader = TfRecordReader::Open(file.string());
    EXPECT_TRUE(reader.ok()) << reader.status().ToString();
    if (!reader.ok()) continue;
    std::string record;
    for (StatusOr<bool> more = reader->Next(&record); more.ok() && *more; more = reader->Next(&record)) {
      tfs::PredictionLog log;
      EXPECT_TRUE(log.ParseFromString(record)) << file;
      logs.push_back(std::move(log));
    }
  }
  return logs;
}

// The request log counter of `model` for `result`, as the server's /metrics shows it.
int64_t LogCounter(HttpClient& http, const std::string& model, const std::string& result) {
  const HttpResult metrics = http.Get("/metrics");
  const std::string key = "lockstep_request_log_records_total{model=\"" + model + "\",result=\"" + result + "\"} ";
  const size_t at = metrics.body.find(key);
  return at == std::string::npos ? 0 : std::stoll(metrics.body.substr(at + key.size()));
}

std::string LoggingConfig(const fs::path& prefix, double rate) {
  return "logging_config {\n      log_collector_config { type: \"file\" filename_prefix: \"" + prefix.string() +
         "\" }\n      sampling_config { sampling_rate: " + std::to_string(rate) + " }\n    }";
}

// Model "m" (half_plus_two, version 1) in `dir`, every request of it logged under `logs`/m:
// the config file's path.
fs::path LoggedHalfPlusTwo(const ScratchDir& dir, const fs::path& logs) {
  WriteHalfPlusTwo(dir / "m", 1);
  const fs::path config = dir / "models.config";
  WriteFile(config, ConfigText({{"m", dir / "m", LoggingConfig(logs / "m", 1.0)}}));
  return config;
}

tensorflow::Example ExampleX(float x) {
  tensorflow::Example example;
  (*example.mutable_features()->mutable_feature())["x"].mutable_float_list()->add_value(x);
  return example;
}

grpc::ClientContext* WithRequestId(grpc::ClientContext* context, const std::string& id) {
  context->AddMetadata("x-request-id", id);
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  return context;
}

TEST(RequestLogTest, EveryKindOfAnsweredRequestIsLoggedAndTheDrainWritesThem) {
  ScratchDir dir;
  WriteHalfPlusTwo(dir / "half_plus_two", 1);
  WriteHalfPlusTwo(dir / "quiet", 1);
  const fs::path logs = dir / "logs";
  const fs::path config = dir / "models.config";
  WriteFile(config, ConfigText({{"half_plus_two", dir / "half_plus_two", LoggingConfig(logs / "hp", 1.0)},
                                {"quiet", dir / "quiet", ""}}));
  ServerProcess server(dir.path(), {"--model_config_file=" + config.string()});
  HttpClient http(server.rest_port());
  auto channel = MakeChannel(server.grpc_target());
  auto stub = tfs::PredictionService::NewStub(channel);

  // REST predict, classify and regress; the v2 protocol's infer.
  HttpResult r = http.Request("POST", "/v1/models/half_plus_two:predict", R"({"instances": [1.0, 2.0]})",
                              {{"X-Request-Id", "rest-predict"}});
  ASSERT_EQ(r.status, 200) << r.body;
  r = http.Request("POST", "/v1/models/half_plus_two:classify",
                   R"({"signature_name": "classify_x_to_y", "examples": [{"x": 4.0}]})", {{"X-Request-Id", "rest-classify"}});
  ASSERT_EQ(r.status, 200) << r.body;
  r = http.Post("/v1/models/half_plus_two:regress", R"({"signature_name": "regress_x_to_y", "examples": [{"x": 6.0}]})");
  ASSERT_EQ(r.status, 200) << r.body;
  r = http.Post("/v2/models/half_plus_two/infer",
                R"({"id": "v2-infer", "inputs": [{"name": "x", "shape": [2], "datatype": "FP32", "data": [8.0, 10.0]}]})");
  ASSERT_EQ(r.status, 200) << r.body;

  // gRPC predict, regress and multi-inference.
  {
    tfs::PredictResponse response;
    grpc::ClientContext context;
    ASSERT_TRUE(stub->Predict(WithRequestId(&context, "grpc-predict"), PredictX("half_plus_two", {3.0f}), &response).ok());
  }
  {
    tfs::RegressionRequest request;
    request.mutable_model_spec()->set_name("half_plus_two");
    request.mutable_model_spec()->set_signature_name("regress_x_to_y");
    *request.mutable_input()->mutable_example_list()->add_examples() = ExampleX(12.0f);
    tfs::RegressionResponse response;
    grpc::ClientContext context;
    ASSERT_TRUE(stub->Regress(WithRequestId(&context, "grpc-regress"), request, &response).ok());
  }
  {
    tfs::MultiInferenceRequest request;
    for (const char* signature : {"classify_x_to_y", "regress_x_to_y"}) {
      tfs::InferenceTask* task = request.add_tasks();
      task->mutable_model_spec()->set_name("half_plus_two");
      task->mutable_model_spec()->set_signature_name(signature);
      task->set_method_name(std::string(signature) == "classify_x_to_y" ? "tensorflow/serving/classify"
                                                                         : "tensorflow/serving/regress");
    }
    *request.mutable_input()->mutable_example_list()->add_examples() = ExampleX(14.0f);
    tfs::MultiInferenceResponse response;
    grpc::ClientContext context;
    const grpc::Status status = stub->MultiInference(WithRequestId(&context, "grpc-multi"), request, &response);
    ASSERT_TRUE(status.ok()) << Describe(status);
  }
  // Not logged: a model without logging_config, and a request that failed.
  ASSERT_EQ(http.Post("/v1/models/quiet:predict", R"({"instances": [1.0]})").status, 200);
  ASSERT_EQ(http.Post("/v1/models/half_plus_two:predict", R"({"instances": [[1.0, 2.0], [3.0]]})").status, 400);

  // Written while the server runs, into a file still named .partial (it is not closed yet).
  ASSERT_TRUE(WaitFor([&] { return LogCounter(http, "half_plus_two", "written") == 7; }))
      << http.Get("/metrics").body;
  EXPECT_EQ(LogFiles(logs, ".tfrecord.partial").size(), 1u);
  EXPECT_TRUE(LogFiles(logs).empty());
  ASSERT_EQ(server.Stop(), 0);
  EXPECT_TRUE(LogFiles(logs, ".tfrecord.partial").empty());
  ASSERT_EQ(LogFiles(logs).size(), 1u);
  EXPECT_EQ(LogFiles(logs)[0].filename().string().rfind("hp.", 0), 0u);

  const std::vector<tfs::PredictionLog> records = ReadLogs(logs);
  ASSERT_EQ(records.size(), 7u);
  std::map<std::string, const tfs::PredictionLog*> by_id;
  for (const tfs::PredictionLog& log : records) {
    const tfs::LogMetadata& metadata = log.log_metadata();
    EXPECT_EQ(metadata.model_spec().name(), "half_plus_two");
    EXPECT_EQ(metadata.model_spec().version().value(), 1);
    EXPECT_EQ(metadata.sampling_config().sampling_rate(), 1.0);
    EXPECT_FALSE(metadata.request_id().empty());
    EXPECT_FALSE(metadata.truncated());
    by_id[metadata.request_id()] = &log;
  }
  EXPECT_EQ(by_id.size(), 7u);  // the REST regress got an id of the server's

  ASSERT_TRUE(by_id.contains("rest-predict"));
  const tfs::PredictLog& rest_predict = by_id["rest-predict"]->predict_log();
  EXPECT_EQ(by_id["rest-predict"]->log_metadata().model_spec().signature_name(), "serving_default");
  EXPECT_EQ(FloatsOf(rest_predict.request().inputs().at("x")), (std::vector<float>{1.0f, 2.0f}));
  EXPECT_EQ(FloatsOf(rest_predict.response().outputs().at("y")), (std::vector<float>{2.5f, 3.0f}));

  ASSERT_TRUE(by_id.contains("rest-classify"));
  const tfs::ClassifyLog& classify = by_id["rest-classify"]->classify_log();
  EXPECT_EQ(classify.request().model_spec().signature_name(), "classify_x_to_y");
  // REST's examples are a list with a (here empty) context, as its JSON has one.
  ASSERT_EQ(classify.request().input().example_list_with_context().examples_size(), 1);
  ASSERT_EQ(classify.response().result().classifications_size(), 1);
  EXPECT_EQ(classify.response().result().classifications(0).classes(0).score(), 4.0f);

  ASSERT_TRUE(by_id.contains("v2-infer"));
  const tfs::PredictLog& infer = by_id["v2-infer"]->predict_log();
  EXPECT_EQ(FloatsOf(infer.request().inputs().at("x")), (std::vector<float>{8.0f, 10.0f}));
  EXPECT_EQ(FloatsOf(infer.response().outputs().at("y")), (std::vector<float>{6.0f, 7.0f}));

  ASSERT_TRUE(by_id.contains("grpc-predict"));
  const tfs::PredictLog& grpc_predict = by_id["grpc-predict"]->predict_log();
  EXPECT_EQ(FloatsOf(grpc_predict.request().inputs().at("x")), std::vector<float>{3.0f});
  EXPECT_EQ(FloatsOf(grpc_predict.response().outputs().at("y")), std::vector<float>{3.5f});
  EXPECT_EQ(grpc_predict.response().model_spec().version().value(), 1);

  ASSERT_TRUE(by_id.contains("grpc-regress"));
  const tfs::RegressLog& regress = by_id["grpc-regress"]->regress_log();
  ASSERT_EQ(regress.response().result().regressions_size(), 1);
  EXPECT_EQ(regress.response().result().regressions(0).value(), 8.0f);

  ASSERT_TRUE(by_id.contains("grpc-multi"));
  const tfs::MultiInferenceLog& multi = by_id["grpc-multi"]->multi_inference_log();
  EXPECT_EQ(multi.request().tasks_size(), 2);
  ASSERT_EQ(multi.response().results_size(), 2);
  EXPECT_EQ(multi.response().results(1).regression_result().regressions(0).value(), 9.0f);

  int regress_logs = 0;
  for (const tfs::PredictionLog& log : records) regress_logs += log.has_regress_log();
  EXPECT_EQ(regress_logs, 2);
}

// The log's directory is removed while the server serves, then a file size limit (ulimit -f,
// as a full disk) stops its writes: every request is still answered, the lost records are
// counted as failed, the server says so in its log, and logging resumes in a directory made
// anew. Each file left is whole.
TEST(RequestLogTest, ALogThatCannotBeWrittenCostsRecordsNeverRequests) {
  ScratchDir dir;
  const fs::path logs = dir / "logs";
  const fs::path config = LoggedHalfPlusTwo(dir, logs);
  // Records are about 150 bytes: a file reaches the limit after a few hundred. The limit holds
  // for the server's own log (its stdout here) too, which stays far below it.
  ServerProcess server(dir.path(), {"--model_config_file=" + config.string()}, true,
                       {"/usr/bin/prlimit", "--fsize=65536", "--"});
  HttpClient http(server.rest_port());
  auto predict = [&] { return http.Post("/v1/models/m:predict", R"({"instances": [1.0, 2.0, 3.0]})").status; };
  ASSERT_EQ(predict(), 200);
  ASSERT_TRUE(WaitFor([&] { return LogCounter(http, "m", "written") == 1; })) << server.Log();

  fs::remove_all(logs);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  int answered = 0;
  // Until a removed file's loss is counted and records are written again.
  while (std::chrono::steady_clock::now() < until &&
         (LogCounter(http, "m", "failed") == 0 || !fs::exists(logs) || LogCounter(http, "m", "written") < 3)) {
    ASSERT_EQ(predict(), 200);
    ++answered;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_GT(LogCounter(http, "m", "failed"), 0) << server.Log();
  EXPECT_GE(LogCounter(http, "m", "written"), 3);
  EXPECT_NE(server.Log().find("event=request_log_failed"), std::string::npos);

  // Past the file size limit: writes fail (EFBIG), requests do not.
  const int64_t failed_before = LogCounter(http, "m", "failed");
  for (int i = 0; i < 200 && LogCounter(http, "m", "failed") == failed_before; ++i) {
    for (int j = 0; j < 20; ++j) ASSERT_EQ(predict(), 200);
  }
  EXPECT_GT(LogCounter(http, "m", "failed"), failed_before) << server.Log();
  EXPECT_NE(server.Log().find("File too large"), std::string::npos) << server.Log();
  ASSERT_EQ(predict(), 200);
  ASSERT_EQ(server.Stop(), 0);
  int64_t read = 0;
  for (const fs::path& file : LogFiles(logs)) {
    StatusOr<TfRecordReader> reader = TfRecordReader::Open(file.string());
    ASSERT_TRUE(reader.ok());
    std::string record;
    StatusOr<bool> more = reader->Next(&record);
    for (; more.ok() && *more; more = reader->Next(&record)) ++read;
    EXPECT_TRUE(more.ok()) << file << ": " << more.status().ToString();  // whole records only
  }
  EXPECT_GT(read, 0);
  EXPECT_GT(answered, 0);
}

// From logs back to a warm-up: the requests model-server logged for version 1, cut by
// `model-cli warmup --from-log` into a warm-up file, warm version 2 up before it serves.
TEST(RequestLogTest, AWarmupFileCutFromTheLogsWarmsTheNextVersion) {
  ScratchDir dir;
  const fs::path logs = dir / "logs";
  const fs::path config = LoggedHalfPlusTwo(dir, logs);
  {
    ServerProcess server(dir.path(), {"--model_config_file=" + config.string(), "--file_system_poll_wait_seconds=1"});
    HttpClient http(server.rest_port());
    for (int i = 0; i < 30; ++i) {
      ASSERT_EQ(http.Post("/v1/models/m:predict", "{\"instances\": [" + std::to_string(i) + ".0]}").status, 200);
    }
    ASSERT_EQ(http.Post("/v1/models/m:classify", R"({"signature_name": "classify_x_to_y", "examples": [{"x": 1.0}]})")
                  .status,
              200);
    ASSERT_EQ(server.Stop(), 0);
  }
  const fs::path warmup = dir / "warmup" / "tf_serving_warmup_requests";
  const std::string cli = std::string(MODEL_CLI_PATH) + " warmup --from-log '" + (logs / "*.tfrecord").string() +
                          "' --out " + warmup.string();
  test::CommandResult cut = test::RunCommand(cli + " --max 10 2>&1");
  ASSERT_EQ(cut.exit_code, 0) << cut.output;
  EXPECT_NE(cut.output.find("wrote 10 of 31 logged requests from 1 file(s)"), std::string::npos) << cut.output;
  // The same logs and seed, the same file; an existing file needs --overwrite.
  const std::string first = ReadFile(warmup);
  EXPECT_NE(test::RunCommand(cli + " --max 10 2>&1").exit_code, 0);
  ASSERT_EQ(test::RunCommand(cli + " --max 10 --overwrite 2>&1").exit_code, 0);
  EXPECT_EQ(ReadFile(warmup), first);
  // Refusals name what is wrong.
  test::CommandResult refused = test::RunCommand(std::string(MODEL_CLI_PATH) + " warmup --from-log '" +
                                                 (dir / "none-*.tfrecord").string() + "' --out /tmp/x 2>&1");
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.output.find("matches no file"), std::string::npos) << refused.output;
  refused = test::RunCommand(cli + " --max 5000 --overwrite 2>&1");
  EXPECT_NE(refused.output.find("--max must be between 1 and 1000"), std::string::npos) << refused.output;
  refused = test::RunCommand(cli + " --model other --overwrite 2>&1");
  EXPECT_NE(refused.output.find("31 of other models"), std::string::npos) << refused.output;
  // Records that cannot be replayed are left out: a truncated one, one with no request.
  {
    tfs::PredictionLog truncated = ReadLogs(logs).front();
    truncated.mutable_log_metadata()->set_truncated(true);
    tfs::PredictionLog metadata_only;
    metadata_only.mutable_log_metadata()->mutable_model_spec()->set_name("m");
    StatusOr<TfRecordWriter> writer = TfRecordWriter::Create((dir / "odd.tfrecord").string());
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE(writer->Write(truncated.SerializeAsString()).ok());
    ASSERT_TRUE(writer->Write(metadata_only.SerializeAsString()).ok());
    ASSERT_TRUE(writer->Flush().ok());
  }
  test::CommandResult odd = test::RunCommand(cli + " --from-log " + (dir / "odd.tfrecord").string() +
                                             " --max 1000 --model m --overwrite 2>&1");
  ASSERT_EQ(odd.exit_code, 0) << odd.output;
  EXPECT_NE(odd.output.find("wrote 31 of 33 logged requests from 2 file(s)"), std::string::npos) << odd.output;
  EXPECT_NE(odd.output.find("1 truncated, 1 without a request, 0 of other models"), std::string::npos) << odd.output;
  WriteFile(dir / "junk.tfrecord", std::string(FrameTfRecord("\xff\xff\xff")));
  refused = test::RunCommand(cli + " --from-log " + (dir / "junk.tfrecord").string() + " --overwrite 2>&1");
  EXPECT_NE(refused.output.find("junk.tfrecord: record 0: not a tensorflow.serving.PredictionLog"), std::string::npos)
      << refused.output;

  // Version 2 carries the file (a bundle's extras are in its manifest) and replays it.
  BundleWriteOptions options;
  options.extras["tf_serving_warmup_requests"] = first;
  ASSERT_TRUE(WriteBundle(AffineModel(0.5f, 2.0f), dir / "m" / "2", options).ok());
  ServerProcess server(dir.path(), {"--model_config_file=" + config.string()});
  EXPECT_NE(server.Log().find("event=warmup_replayed model=m version=2 records=10"), std::string::npos)
      << server.Log();
}

}  // namespace
}  // namespace lockstep::e2e
