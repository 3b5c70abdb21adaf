// The request logger's file collector: TFRecord files of PredictionLog records, rotated by size
// and age, whole files only under their final names; sampling; a full queue drops and counts;
// the truncation rule; a write that fails (a file size limit, a removed directory) loses only
// its own records and the next record opens a new file; and the config's checks.
#include "server/request_log/request_logger.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <cctype>
#include <set>
#include <string>
#include <vector>

#include "google/protobuf/text_format.h"
#include "tests/common/file_util.h"
#include "runtime/tfrecord.h"
#include "server/request_log/log_file.h"
#include "server/request_log/prediction_logs.h"
#include "tests/model_store/manager_test_util.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
namespace tfs = tensorflow::serving;
using store_test::ScratchDir;

std::vector<fs::path> Files(const fs::path& dir, const std::string& suffix) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      out.push_back(e.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> Records(const fs::path& file) {
  std::vector<std::string> out;
  StatusOr<TfRecordReader> reader = TfRecordReader::Open(file.string(), {});
  EXPECT_TRUE(reader.ok()) << reader.status().ToString();
  if (!reader.ok()) return out;
  std::string record;
  for (;;) {
    StatusOr<bool> more = reader->Next(&record);
    EXPECT_TRUE(more.ok()) << more.status().ToString();
    if (!more.ok() || !*more) break;
    out.push_back(record);
  }
  return out;
}

std::vector<tfs::PredictionLog> AllLogs(const fs::path& dir) {
  std::vector<tfs::PredictionLog> out;
  for (const fs::path& file : Files(dir, ".tfrecord")) {
    for (const std::string& r : Records(file)) {
      tfs::PredictionLog log;
      EXPECT_TRUE(log.ParseFromString(r));
      out.push_back(std::move(log));
    }
  }
  return out;
}

tfs::PredictionLog PredictLogOf(float x, size_t floats = 1) {
  tfs::PredictionLog log;
  log.mutable_log_metadata()->mutable_model_spec()->set_name("m");
  tensorflow::TensorProto& in = (*log.mutable_predict_log()->mutable_request()->mutable_inputs())["x"];
  in.set_dtype(tensorflow::DT_FLOAT);
  in.mutable_tensor_shape()->add_dim()->set_size(static_cast<int64_t>(floats));
  for (size_t i = 0; i < floats; ++i) in.add_float_val(x);
  return log;
}

const auto kT0 = std::chrono::steady_clock::time_point() + std::chrono::hours(1);

TEST(RotatingLogFileTest, RotatesBySizeAndAgeAndShowsOnlyClosedFiles) {
  ScratchDir dir;
  const std::string prefix = (dir.path() / "logs" / "m").string();  // the directory is made
  RotatingLogFile file(prefix, {/*max_file_bytes=*/100, /*max_file_age=*/std::chrono::seconds(60)});
  int64_t lost = 0;
  const std::string record(30, 'r');  // 46 bytes framed: two fit in 100
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(file.Append(record, kT0, &lost).ok());
  ASSERT_TRUE(file.Flush(&lost).ok());
  EXPECT_EQ(lost, 0);
  // Two closed (two records each), one open with one.
  std::vector<fs::path> closed = Files(dir.path() / "logs", ".tfrecord");
  ASSERT_EQ(closed.size(), 2u);
  EXPECT_EQ(Files(dir.path() / "logs", ".tfrecord.partial").size(), 1u);
  // m.<8 digits>T<6 digits>Z.<6 digits>.tfrecord, # standing for a digit
  const auto well_named = [](const std::string& name) {
    const std::string shape = "m.########T######Z.######.tfrecord";
    if (name.size() != shape.size()) return false;
    for (size_t i = 0; i < name.size(); ++i) {
      if (shape[i] == '#' ? !std::isdigit(static_cast<unsigned char>(name[i])) : name[i] != shape[i]) return false;
    }
    return true;
  };
  for (const fs::path& f : closed) {
    EXPECT_TRUE(well_named(f.filename().string())) << f;
    EXPECT_EQ(Records(f), (std::vector<std::string>{record, record}));
    EXPECT_LE(fs::file_size(f), 100u);
  }
  // Not old yet; then old: it closes and takes its final name.
  ASSERT_TRUE(file.CloseIfOld(kT0 + std::chrono::seconds(59), &lost).ok());
  EXPECT_EQ(Files(dir.path() / "logs", ".tfrecord").size(), 2u);
  ASSERT_TRUE(file.CloseIfOld(kT0 + std::chrono::seconds(60), &lost).ok());
  closed = Files(dir.path() / "logs", ".tfrecord");
  ASSERT_EQ(closed.size(), 3u);
  EXPECT_TRUE(Files(dir.path() / "logs", ".tfrecord.partial").empty());
  EXPECT_EQ(Records(closed[2]), std::vector<std::string>{record});
  // A record past the age opens a new file; a record larger than a file gets one of its own.
  ASSERT_TRUE(file.Append(std::string(300, 'b'), kT0 + std::chrono::seconds(61), &lost).ok());
  ASSERT_TRUE(file.Close(&lost).ok());
  EXPECT_EQ(Files(dir.path() / "logs", ".tfrecord").size(), 4u);
}

// The write fails (a file size limit: EFBIG, as a full disk gives ENOSPC): the buffered records
// are lost and counted, the file is cut back to its last whole record, and after the back-off
// the next record writes to a new file. In a child process, which alone has the limit.
TEST(RotatingLogFileTest, AFailedWriteLosesOnlyItsBufferAndTheFileStaysReadable) {
  ScratchDir dir;
  const std::string prefix = (dir.path() / "m").string();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{200, 200};
    if (setrlimit(RLIMIT_FSIZE, &limit) != 0) _exit(10);
    RotatingLogFile file(prefix, {1 << 20, std::chrono::seconds(600)});
    int64_t lost = 0;
    const std::string record(50, 'r');  // 66 bytes framed
    if (!file.Append(record, kT0, &lost).ok() || !file.Append(record, kT0, &lost).ok()) _exit(11);
    if (!file.Flush(&lost).ok() || lost != 0) _exit(12);  // 132 bytes: within the limit
    if (!file.Append(record, kT0, &lost).ok() || !file.Append(record, kT0, &lost).ok()) _exit(13);
    if (file.Flush(&lost).ok() || lost != 2) _exit(14);  // 264 bytes: past it
    // In the back-off, a record fails at once.
    if (file.Append(record, std::chrono::steady_clock::now(), &lost).ok()) _exit(15);
    // After it, a new file takes the record.
    if (!file.Append(record, std::chrono::steady_clock::now() + std::chrono::seconds(2), &lost).ok()) _exit(16);
    if (!file.Close(&lost).ok()) _exit(17);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  const std::vector<fs::path> files = Files(dir.path(), ".tfrecord");
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(Records(files[0]).size(), 2u);  // cut back to its whole records
  EXPECT_EQ(fs::file_size(files[0]), 132u);
  EXPECT_EQ(Records(files[1]).size(), 1u);
}

// Another writer of the same prefix in the same second (a server restarted, a prefix that
// left the config and came back), or a file that took the final name meanwhile: no file is
// replaced, each keeps its records under a name of its own.
TEST(RotatingLogFileTest, NoFileIsEverReplacedByAnother) {
  ScratchDir dir;
  const std::string prefix = (dir.path() / "m").string();
  int64_t lost = 0;
  {
    RotatingLogFile first(prefix, {1 << 20, std::chrono::seconds(600)});
    ASSERT_TRUE(first.Append("first", kT0, &lost).ok());
    ASSERT_TRUE(first.Close(&lost).ok());
  }
  RotatingLogFile second(prefix, {1 << 20, std::chrono::seconds(600)});
  ASSERT_TRUE(second.Append("second", kT0, &lost).ok());
  ASSERT_TRUE(second.Flush(&lost).ok());
  // A foreign file takes the name the open file would get.
  std::string taken = second.open_path();
  taken.resize(taken.size() - std::string(".partial").size());
  { std::ofstream(taken) << "foreign"; }
  ASSERT_TRUE(second.Close(&lost).ok());
  std::vector<std::string> contents;
  for (const fs::path& f : Files(dir.path(), ".tfrecord")) {
    if (f.string() == taken) continue;
    for (const std::string& r : Records(f)) contents.push_back(r);
  }
  EXPECT_EQ(Files(dir.path(), ".tfrecord").size(), 3u);
  std::sort(contents.begin(), contents.end());
  EXPECT_EQ(contents, (std::vector<std::string>{"first", "second"}));
  EXPECT_EQ(test::ReadFile(taken), "foreign");
}

TEST(RotatingLogFileTest, ARemovedDirectoryIsAFailureAndTheNextRecordMakesItAgain) {
  ScratchDir dir;
  const fs::path logs = dir.path() / "logs";
  RotatingLogFile file((logs / "m").string(), {1 << 20, std::chrono::seconds(600)});
  int64_t lost = 0;
  ASSERT_TRUE(file.Append("one", kT0, &lost).ok());
  ASSERT_TRUE(file.Flush(&lost).ok());
  fs::remove_all(logs);
  ASSERT_TRUE(file.Append("two", kT0, &lost).ok());
  EXPECT_FALSE(file.Flush(&lost).ok());
  EXPECT_EQ(lost, 1);
  ASSERT_TRUE(file.Append("three", kT0, &lost).ok());
  ASSERT_TRUE(file.Close(&lost).ok());
  const std::vector<fs::path> files = Files(logs, ".tfrecord");
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(Records(files[0]), std::vector<std::string>{"three"});
}

class RequestLoggerTest : public ::testing::Test {
 protected:
  std::string Counter(const std::string& result) {
    const std::string text = metrics_.Render();
    const std::string key = "lockstep_request_log_records_total{model=\"m\",result=\"" + result + "\"} ";
    const size_t at = text.find(key);
    return at == std::string::npos ? "0" : text.substr(at + key.size(), text.find('\n', at) - at - key.size());
  }

  ScratchDir dir_;
  ModelManager manager_{store_test::ManualOptions()};
  ServingMetrics metrics_{manager_};
};

TEST_F(RequestLoggerTest, WritesEverySampledRecordWithItsMetadataAndFlushesOnStop) {
  RequestLogger logger(metrics_, {});
  EXPECT_EQ(logger.Draw("m"), nullptr);  // no model logs yet
  logger.SetModels({{"m", {(dir_.path() / "m").string(), 1.0, 0}}});
  EXPECT_EQ(logger.Draw("other"), nullptr);
  for (int i = 0; i < 50; ++i) {
    const RequestLogger::Ticket ticket = logger.Draw("m");
    ASSERT_NE(ticket, nullptr);
    logger.Submit(ticket, PredictLogOf(static_cast<float>(i)), i == 0 ? "client-id-0" : "");
  }
  logger.Stop();
  const std::vector<tfs::PredictionLog> logs = AllLogs(dir_.path());
  ASSERT_EQ(logs.size(), 50u);
  EXPECT_TRUE(Files(dir_.path(), ".partial").empty());
  std::set<std::string> ids;
  for (size_t i = 0; i < logs.size(); ++i) {
    const tfs::LogMetadata& metadata = logs[i].log_metadata();
    EXPECT_EQ(metadata.model_spec().name(), "m");
    EXPECT_EQ(metadata.sampling_config().sampling_rate(), 1.0);
    EXPECT_FALSE(metadata.truncated());
    EXPECT_FALSE(metadata.request_id().empty());
    ids.insert(metadata.request_id());
    EXPECT_EQ(logs[i].predict_log().request().inputs().at("x").float_val(0), static_cast<float>(i));
  }
  EXPECT_EQ(logs[0].log_metadata().request_id(), "client-id-0");
  EXPECT_EQ(ids.size(), 50u);  // the server's own ids are unique
  EXPECT_EQ(Counter("written"), "50");
  // After Stop nothing is taken.
  EXPECT_EQ(logger.Draw("m"), nullptr);
}

// Config reloads: a model that keeps its prefix keeps its file; one whose model leaves and
// comes back (within the same second, most likely) writes a new file beside the old one.
TEST_F(RequestLoggerTest, ReloadsKeepOrCloseFilesAndLoseNoRecord) {
  RequestLogger logger(metrics_, {});
  const ModelLogging logging{(dir_.path() / "m").string(), 1.0, 0};
  logger.SetModels({{"m", logging}});
  logger.Submit(logger.Draw("m"), PredictLogOf(1), "a");
  logger.SetModels({{"m", logging}, {"n", {(dir_.path() / "n").string(), 1.0, 0}}});
  logger.Submit(logger.Draw("m"), PredictLogOf(2), "b");
  logger.SetModels({});
  EXPECT_EQ(logger.Draw("m"), nullptr);
  logger.SetModels({{"m", logging}});
  logger.Submit(logger.Draw("m"), PredictLogOf(3), "c");
  logger.Stop();
  std::vector<std::string> ids;
  for (const tfs::PredictionLog& log : AllLogs(dir_.path())) ids.push_back(log.log_metadata().request_id());
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(Files(dir_.path(), ".partial").empty());
  EXPECT_EQ(Counter("written"), "3");
}

TEST_F(RequestLoggerTest, SamplesAtTheConfiguredRate) {
  RequestLogger logger(metrics_, {});
  logger.SetModels({{"m", {(dir_.path() / "m").string(), 0.25, 0}}});
  int drawn = 0;
  for (int i = 0; i < 8000; ++i) drawn += logger.Draw("m") != nullptr;
  // Binomial(8000, 0.25): mean 2000, standard deviation 39; six of them either side.
  EXPECT_GT(drawn, 1760);
  EXPECT_LT(drawn, 2240);
}

TEST_F(RequestLoggerTest, AFullQueueDropsAndCountsInsteadOfWaiting) {
  RequestLogOptions options;
  options.max_queue_bytes = 1;  // no record fits
  RequestLogger logger(metrics_, options);
  logger.SetModels({{"m", {(dir_.path() / "m").string(), 1.0, 0}}});
  for (int i = 0; i < 3; ++i) logger.Submit(logger.Draw("m"), PredictLogOf(1), "");
  logger.Stop();
  EXPECT_EQ(Counter("dropped"), "3");
  EXPECT_TRUE(AllLogs(dir_.path()).empty());
}

TEST_F(RequestLoggerTest, ARecordTooLargeKeepsItsShapesAndLosesItsValues) {
  RequestLogOptions options;
  options.max_record_bytes = 1000;
  RequestLogger logger(metrics_, options);
  logger.SetModels({{"m", {(dir_.path() / "m").string(), 1.0, 0}}});
  logger.Submit(logger.Draw("m"), PredictLogOf(3, 10), "small");
  logger.Submit(logger.Draw("m"), PredictLogOf(3, 1000), "large");
  logger.Stop();
  const std::vector<tfs::PredictionLog> logs = AllLogs(dir_.path());
  ASSERT_EQ(logs.size(), 2u);
  EXPECT_FALSE(logs[0].log_metadata().truncated());
  EXPECT_EQ(logs[0].predict_log().request().inputs().at("x").float_val_size(), 10);
  const tfs::PredictionLog& cut = logs[1];
  EXPECT_TRUE(cut.log_metadata().truncated());
  EXPECT_EQ(cut.log_metadata().request_id(), "large");
  const tensorflow::TensorProto& x = cut.predict_log().request().inputs().at("x");
  EXPECT_EQ(x.dtype(), tensorflow::DT_FLOAT);
  EXPECT_EQ(x.tensor_shape().dim(0).size(), 1000);
  EXPECT_EQ(x.float_val_size(), 0);
  EXPECT_NE(metrics_.Render().find("lockstep_request_log_truncated_total{model=\"m\"} 1"), std::string::npos);
}

TEST(TruncatePredictionLogTest, EmptiesExamplesAndResultsButKeepsTheirCount) {
  tfs::PredictionLog log;
  tfs::ClassifyLog* classify = log.mutable_classify_log();
  auto* examples = classify->mutable_request()->mutable_input()->mutable_example_list();
  for (int i = 0; i < 3; ++i) {
    (*examples->add_examples()->mutable_features()->mutable_feature())["x"].mutable_float_list()->add_value(1);
    classify->mutable_response()->mutable_result()->add_classifications()->add_classes()->set_score(0.5f);
  }
  TruncatePredictionLog(&log);
  EXPECT_TRUE(log.log_metadata().truncated());
  ASSERT_EQ(classify->request().input().example_list().examples_size(), 3);
  EXPECT_EQ(classify->request().input().example_list().examples(0).features().feature_size(), 0);
  ASSERT_EQ(classify->response().result().classifications_size(), 3);
  EXPECT_EQ(classify->response().result().classifications(0).classes_size(), 0);
}

tfs::ModelServerConfig ConfigOf(const std::string& text) {
  tfs::ModelServerConfig config;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &config)) << text;
  return config;
}

TEST(ModelLoggingFromConfigTest, ReadsUpstreamsFieldsAndRefusesWhatCannotLog) {
  StatusOr<ModelLoggingMap> models = ModelLoggingFromConfig(ConfigOf(R"pb(
    model_config_list {
      config { name: "a" base_path: "/m/a" }
      config {
        name: "b" base_path: "/m/b"
        logging_config {
          log_collector_config { type: "file" filename_prefix: "/logs/b" }
          sampling_config { sampling_rate: 0.5 }
        }
      }
      config {
        name: "c" base_path: "/m/c"
        logging_config { sampling_config { sampling_rate: 0 } }
      }
    }
  )pb"));
  ASSERT_TRUE(models.ok()) << models.status().ToString();
  ASSERT_EQ(models->size(), 1u);  // a has none; c samples nothing
  EXPECT_EQ(models->at("b").filename_prefix, "/logs/b");
  EXPECT_EQ(models->at("b").sampling_rate, 0.5);

  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"(sampling_config { sampling_rate: 1.5 } log_collector_config { type: "file" filename_prefix: "/l/m" })",
       "sampling_rate 1.500000 is not a probability in [0, 1]"},
      {R"(sampling_config { sampling_rate: 0.1 } log_collector_config { type: "kafka" filename_prefix: "/l/m" })",
       "log_collector_config.type 'kafka' is not a collector of Lockstep's"},
      {R"(sampling_config { sampling_rate: 0.1 } log_collector_config { type: "file" })",
       "filename_prefix is empty"},
      {R"(sampling_config { sampling_rate: 0.1 } log_collector_config { type: "file" filename_prefix: "/l/" })",
       "names a directory"},
  };
  for (const auto& [logging, message] : bad) {
    const StatusOr<ModelLoggingMap> refused = ModelLoggingFromConfig(ConfigOf(
        "model_config_list { config { name: 'm' base_path: '/m' logging_config { " + logging + " } } }"));
    ASSERT_FALSE(refused.ok()) << logging;
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(refused.status().message().find("model_config_list.config[0] (model 'm'): logging_config."),
              std::string::npos)
        << refused.status().message();
    EXPECT_NE(refused.status().message().find(message), std::string::npos) << refused.status().message();
  }
}

}  // namespace
}  // namespace lockstep
