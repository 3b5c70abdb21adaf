// Versions, labels, config reloads and the command line of model-server, against the real
// binary: new version directories, broken versions, labels from the config file, rollback by
// config file and by gRPC, a bad config file, a version change and rollback under load, and
// the flags' exit codes and messages.
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "runtime/bundle/bundle.h"
#include "tensorflow_serving/config/model_server_config.pb.h"
#include "tests/e2e/server_harness.h"

namespace lockstep::e2e {
namespace {

namespace tfs = tensorflow::serving;
using std::chrono::milliseconds;
using std::chrono::seconds;

// How long a change the server polls for (a version directory, the config file, each polled
// every second in these tests) may take to show: the poll interval, a load, and slack for a
// busy machine.
constexpr milliseconds kPollSettle = seconds(6);

// Writes `text` to `path` through a rename, so a poll never reads half of it.
void ReplaceFile(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  WriteFile(tmp, text);
  fs::rename(tmp, path);
}

// Writes version `version` of y = version * x under `base` in a directory the server ignores
// (".tmp-N"), then renames it into place, as an exporter should: the version appears whole.
// `corrupt` flips a byte of its weights first, so that it fails to load.
void PublishVersionModel(const fs::path& base, int64_t version, bool corrupt = false) {
  const fs::path staging = base / ".tmp-staging";
  fs::remove_all(staging);
  fs::create_directories(staging);
  WriteVersionModel(staging, version);
  const fs::path dir = staging / std::to_string(version);
  if (corrupt) {
    std::fstream f(dir / std::string(kBundleWeightsFile), std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.good());
    char c = 0;
    f.get(c);
    f.seekp(0);
    f.put(static_cast<char>(c ^ 0x40));
    ASSERT_TRUE(f.good());
  }
  fs::rename(dir, base / std::to_string(version));
  fs::remove_all(staging);
}

tfs::PredictRequest PredictOne(const tfs::ModelSpec& spec) {
  tfs::PredictRequest request;
  *request.mutable_model_spec() = spec;
  tensorflow::TensorProto& x = (*request.mutable_inputs())["x"];
  x.set_dtype(tensorflow::DT_FLOAT);
  x.mutable_tensor_shape()->add_dim()->set_size(1);
  x.add_float_val(1.0f);
  return request;
}

tfs::ModelSpec VersionedSpec(const std::string& name, std::optional<int64_t> version = std::nullopt,
                    const std::string& label = "") {
  tfs::ModelSpec spec;
  spec.set_name(name);
  if (version) spec.mutable_version()->set_value(*version);
  if (!label.empty()) spec.set_version_label(label);
  return spec;
}

// A Predict of x = 1 over gRPC: y (the version that served it, for WriteVersionModel
// bundles) and the version the response names; or the status it failed with.
struct Answer {
  grpc::Status status;
  float y = -1.0f;
  int64_t version = -1;
};

class GrpcClient {
 public:
  explicit GrpcClient(const std::string& target)
      : channel_(MakeChannel(target)),
        prediction_(tfs::PredictionService::NewStub(channel_)),
        models_(tfs::ModelService::NewStub(channel_)) {}

  Answer Predict(const tfs::ModelSpec& spec) {
    Answer answer;
    tfs::PredictResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + seconds(10));
    answer.status = prediction_->Predict(&context, PredictOne(spec), &response);
    if (answer.status.ok()) {
      const auto it = response.outputs().find("y");
      if (it != response.outputs().end() && it->second.float_val_size() == 1) answer.y = it->second.float_val(0);
      answer.version = response.model_spec().version().value();
    }
    return answer;
  }

  grpc::Status Status(const tfs::ModelSpec& spec, tfs::GetModelStatusResponse* response) {
    tfs::GetModelStatusRequest request;
    *request.mutable_model_spec() = spec;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + seconds(10));
    return models_->GetModelStatus(&context, request, response);
  }

  // The state of one version, or UNKNOWN when the status call fails.
  tfs::ModelVersionStatus VersionStatus(const std::string& model, int64_t version) {
    tfs::GetModelStatusResponse response;
    if (!Status(VersionedSpec(model, version), &response).ok() || response.model_version_status_size() != 1) return {};
    return response.model_version_status(0);
  }

  grpc::Status Reload(const std::string& config_text, tfs::ReloadConfigResponse* response) {
    tfs::ReloadConfigRequest request;
    EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(config_text, request.mutable_config())) << config_text;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + seconds(10));
    return models_->HandleReloadConfigRequest(&context, request, response);
  }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<tfs::PredictionService::Stub> prediction_;
  std::unique_ptr<tfs::ModelService::Stub> models_;
};

// A config with the one model "m" at `base`: `policy` and `labels` are text inside its block.
std::string ModelConfigText(const fs::path& base, const std::string& policy, const std::string& labels = "") {
  return "model_config_list {\n"
         "  config {\n"
         "    name: \"m\"\n"
         "    base_path: \"" + base.string() + "\"\n"
         "    model_platform: \"tensorflow\"\n"
         "    " + policy + "\n"
         "    " + labels + "\n"
         "  }\n"
         "}\n";
}

std::string Labels(int64_t stable, std::optional<int64_t> canary = std::nullopt) {
  std::string text = "version_labels { key: \"stable\" value: " + std::to_string(stable) + " }";
  if (canary) text += " version_labels { key: \"canary\" value: " + std::to_string(*canary) + " }";
  return text;
}

std::string Describe(const grpc::Status& status) {
  return std::to_string(static_cast<int>(status.error_code())) + ": " + status.error_message();
}

class VersionsTest : public ::testing::Test {
 protected:
  fs::path base() const { return dir_ / "m"; }
  fs::path config_path() const { return dir_ / "models.config"; }

  // model-server for "m" alone, its versions polled every second.
  void StartSingleModel() {
    server_ = std::make_unique<ServerProcess>(
        dir_.path(), std::vector<std::string>{"--model_name=m", "--model_base_path=" + base().string(),
                                              "--file_system_poll_wait_seconds=1"});
    grpc_ = std::make_unique<GrpcClient>(server_->grpc_target());
  }

  // model-server reading `text` from the config file, polled every `config_poll_s` seconds.
  void StartWithConfig(const std::string& text, int config_poll_s) {
    WriteFile(config_path(), text);
    server_ = std::make_unique<ServerProcess>(
        dir_.path(), std::vector<std::string>{"--model_config_file=" + config_path().string(),
                                              "--model_config_file_poll_wait_seconds=" + std::to_string(config_poll_s),
                                              "--file_system_poll_wait_seconds=1"});
    grpc_ = std::make_unique<GrpcClient>(server_->grpc_target());
  }

  // Waits until `spec` is answered by `version`.
  bool WaitForVersion(const tfs::ModelSpec& spec, int64_t version, milliseconds timeout = kPollSettle) {
    return WaitFor(
        [&] {
          const Answer a = grpc_->Predict(spec);
          return a.status.ok() && a.version == version && a.y == static_cast<float>(version);
        },
        timeout);
  }

  void ExpectServes(const tfs::ModelSpec& spec, int64_t version) {
    const Answer a = grpc_->Predict(spec);
    ASSERT_TRUE(a.status.ok()) << Describe(a.status);
    EXPECT_EQ(a.version, version);
    EXPECT_EQ(a.y, static_cast<float>(version));
  }

  ScratchDir dir_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<GrpcClient> grpc_;
};

TEST_F(VersionsTest, NewVersionDirectoryIsServedWithinThePollInterval) {
  WriteVersionModel(base(), 1);
  StartSingleModel();
  ExpectServes(VersionedSpec("m"), 1);

  const auto published = std::chrono::steady_clock::now();
  PublishVersionModel(base(), 2);
  ASSERT_TRUE(WaitForVersion(VersionedSpec("m"), 2)) << server_->Log();
  const auto took = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - published);
  // One poll interval (1 s) and a load of a tiny bundle; the slack is for a loaded machine.
  EXPECT_LT(took.count(), 4000) << "version 2 took " << took.count() << " ms to serve";

  // The default policy (latest 1) then lets version 1 go.
  EXPECT_TRUE(
      WaitFor([&] { return grpc_->VersionStatus("m", 1).state() == tfs::ModelVersionStatus::END; }, kPollSettle));
  const Answer old = grpc_->Predict(VersionedSpec("m", 1));
  EXPECT_EQ(old.status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(old.status.error_message(), "Servable not found for request: Specific(m, 1)");
}

TEST_F(VersionsTest, BrokenVersionLeavesTheOldOneServing) {
  WriteVersionModel(base(), 1);
  StartSingleModel();
  ExpectServes(VersionedSpec("m"), 1);

  // Version 2 with corrupt weights.
  PublishVersionModel(base(), 2, /*corrupt=*/true);
  ASSERT_TRUE(WaitFor([&] { return grpc_->VersionStatus("m", 2).state() == tfs::ModelVersionStatus::END; },
                      kPollSettle))
      << server_->Log();
  tfs::ModelVersionStatus v2 = grpc_->VersionStatus("m", 2);
  EXPECT_NE(v2.status().error_code(), tensorflow::error::OK);
  EXPECT_NE(v2.status().error_message(), "");
  EXPECT_NE(v2.status().error_message().find("weights.bin"), std::string::npos) << v2.status().error_message();
  ExpectServes(VersionedSpec("m"), 1);
  EXPECT_EQ(grpc_->VersionStatus("m", 1).state(), tfs::ModelVersionStatus::AVAILABLE);

  // The REST status says the same, as TF Serving prints it.
  HttpClient http(server_->rest_port());
  const HttpResult rest = http.Get("/v1/models/m/versions/2");
  EXPECT_EQ(rest.status, 200) << rest.error << rest.body;
  EXPECT_NE(rest.body.find("\"state\": \"END\""), std::string::npos) << rest.body;
  EXPECT_NE(rest.body.find("weights.bin"), std::string::npos) << rest.body;
  EXPECT_EQ(rest.body.find("\"error_code\": \"OK\""), std::string::npos) << rest.body;
  EXPECT_NE(server_->Log().find("event=version_load_failed model=m version=2"), std::string::npos) << server_->Log();

  // A directory "3" that holds no bundle at all: refused the same way.
  fs::create_directories(dir_ / "staging");
  WriteFile(dir_ / "staging" / "garbage.txt", "not a model");
  fs::rename(dir_ / "staging", base() / "3");
  ASSERT_TRUE(WaitFor([&] { return grpc_->VersionStatus("m", 3).state() == tfs::ModelVersionStatus::END; },
                      kPollSettle))
      << server_->Log();
  EXPECT_NE(grpc_->VersionStatus("m", 3).status().error_message(), "");
  ExpectServes(VersionedSpec("m"), 1);

  // Both failures stay visible in the full status, next to the version that serves.
  tfs::GetModelStatusResponse all;
  ASSERT_TRUE(grpc_->Status(VersionedSpec("m"), &all).ok());
  ASSERT_EQ(all.model_version_status_size(), 3);
  EXPECT_EQ(all.model_version_status(0).state(), tfs::ModelVersionStatus::AVAILABLE);
  EXPECT_EQ(all.model_version_status(1).state(), tfs::ModelVersionStatus::END);
  EXPECT_EQ(all.model_version_status(2).state(), tfs::ModelVersionStatus::END);
}

TEST_F(VersionsTest, LabelsFromTheConfigFile) {
  WriteVersionModel(base(), 1);
  WriteVersionModel(base(), 2);
  // No --allow_version_labels_for_unavailable_models: the server must apply the labels once
  // the versions they name have loaded.
  StartWithConfig(ModelConfigText(base(), "model_version_policy { specific { versions: 1 versions: 2 } }",
                                  Labels(1, 2)),
                  /*config_poll_s=*/0);
  ExpectServes(VersionedSpec("m", std::nullopt, "stable"), 1);
  ExpectServes(VersionedSpec("m", std::nullopt, "canary"), 2);
  ExpectServes(VersionedSpec("m"), 2);

  HttpClient http(server_->rest_port());
  HttpResult r = http.Post("/v1/models/m/labels/stable:predict", R"({"instances": [1.0]})");
  EXPECT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(r.body, R"({"predictions": [1.0]})");
  EXPECT_EQ(r.headers["x-model-version"], "1");
  r = http.Post("/v1/models/m/labels/canary:predict", R"({"instances": [1.0]})");
  EXPECT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(r.headers["x-model-version"], "2");
  r = http.Post("/v1/models/m/labels/beta:predict", R"({"instances": [1.0]})");
  EXPECT_EQ(r.status, 404) << r.body;

  tfs::GetModelStatusResponse status;
  ASSERT_TRUE(grpc_->Status(VersionedSpec("m", std::nullopt, "canary"), &status).ok());
  ASSERT_EQ(status.model_version_status_size(), 1);
  EXPECT_EQ(status.model_version_status(0).version(), 2);
}

TEST_F(VersionsTest, RollbackByConfigFileReload) {
  WriteVersionModel(base(), 1);
  WriteVersionModel(base(), 2);
  const std::string both = "model_version_policy { specific { versions: 1 versions: 2 } }";
  StartWithConfig(ModelConfigText(base(), both, Labels(2)), /*config_poll_s=*/1);
  ExpectServes(VersionedSpec("m", std::nullopt, "stable"), 2);

  // Move "stable" back to 1: no restart.
  ReplaceFile(config_path(), ModelConfigText(base(), both, Labels(1)));
  ASSERT_TRUE(WaitForVersion(VersionedSpec("m", std::nullopt, "stable"), 1)) << server_->Log();
  ExpectServes(VersionedSpec("m", 2), 2);  // still loaded: the policy keeps it

  // Then serve version 1 alone.
  ReplaceFile(config_path(), ModelConfigText(base(), "model_version_policy { specific { versions: 1 } }", Labels(1)));
  ASSERT_TRUE(WaitFor([&] { return grpc_->Predict(VersionedSpec("m", 2)).status.error_code() == grpc::StatusCode::NOT_FOUND; },
                      kPollSettle))
      << server_->Log();
  ExpectServes(VersionedSpec("m"), 1);
  ExpectServes(VersionedSpec("m", std::nullopt, "stable"), 1);
  EXPECT_NE(server_->Log().find("event=config_file_reloaded"), std::string::npos);
}

TEST_F(VersionsTest, RollbackByReloadConfigRequest) {
  WriteVersionModel(base(), 1);
  WriteVersionModel(base(), 2);
  const std::string both = "model_version_policy { specific { versions: 1 versions: 2 } }";
  StartWithConfig(ModelConfigText(base(), both, Labels(2)), /*config_poll_s=*/0);
  ExpectServes(VersionedSpec("m", std::nullopt, "stable"), 2);

  // A label move applies before the reply.
  tfs::ReloadConfigResponse response;
  grpc::Status status = grpc_->Reload(ModelConfigText(base(), both, Labels(1)), &response);
  ASSERT_TRUE(status.ok()) << Describe(status);
  EXPECT_EQ(response.status().error_code(), tensorflow::error::OK);
  ExpectServes(VersionedSpec("m", std::nullopt, "stable"), 1);

  // A label may not move to a version the server does not hold.
  status = grpc_->Reload(ModelConfigText(base(), both, Labels(3)), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << Describe(status);
  EXPECT_EQ(status.error_message(),
            "Request to assign label to version 3 of model m, which is not currently available for inference");
  ExpectServes(VersionedSpec("m", std::nullopt, "stable"), 1);

  // Policy rollback: version 1 alone. Version 1 is loaded already, so version 2 goes at once.
  status = grpc_->Reload(ModelConfigText(base(), "model_version_policy { specific { versions: 1 } }", Labels(1)),
                         &response);
  ASSERT_TRUE(status.ok()) << Describe(status);
  ExpectServes(VersionedSpec("m"), 1);
  EXPECT_EQ(grpc_->Predict(VersionedSpec("m", 2)).status.error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(VersionsTest, BadConfigFileKeepsTheOldConfig) {
  WriteVersionModel(base(), 1);
  WriteVersionModel(base(), 2);
  const std::string both = "model_version_policy { specific { versions: 1 versions: 2 } }";
  StartWithConfig(ModelConfigText(base(), both, Labels(2)), /*config_poll_s=*/1);
  ExpectServes(VersionedSpec("m", std::nullopt, "stable"), 2);

  ReplaceFile(config_path(), "model_config_list {\n  config {\n    this is not a config\n");
  ASSERT_TRUE(WaitFor([&] { return server_->Log().find("event=config_file_rejected") != std::string::npos; },
                      kPollSettle))
      << server_->Log();
  const std::string log = server_->Log();
  const std::string rejected = log.substr(log.find("event=config_file_rejected"));
  // The line names the file and where in it the parse failed.
  EXPECT_NE(rejected.find(config_path().string() + ":3:"), std::string::npos) << rejected;
  ExpectServes(VersionedSpec("m", std::nullopt, "stable"), 2);
  ExpectServes(VersionedSpec("m", 1), 1);

  // A config that parses but is refused (a relative base path) is rejected the same way.
  ReplaceFile(config_path(), ModelConfigText("relative/m", both));
  ASSERT_TRUE(WaitFor([&] { return server_->Log().find("is not an absolute path") != std::string::npos; }, kPollSettle))
      << server_->Log();
  ExpectServes(VersionedSpec("m", std::nullopt, "stable"), 2);

  // A good file again is taken.
  ReplaceFile(config_path(), ModelConfigText(base(), both, Labels(1)));
  ASSERT_TRUE(WaitForVersion(VersionedSpec("m", std::nullopt, "stable"), 1)) << server_->Log();
}

// Under steady load from both protocols: version 1, then version 2 appears, then a config
// rollback to version 1. No request may fail, and every answer is version 1 or 2.
TEST_F(VersionsTest, VersionChangesAndRollbackUnderLoadFailNoRequest) {
  WriteVersionModel(base(), 1);
  StartWithConfig(ModelConfigText(base(), ""), /*config_poll_s=*/1);
  ExpectServes(VersionedSpec("m"), 1);

  std::atomic<bool> stop{false};
  std::atomic<int> requests{0};
  std::atomic<int> failures{0};
  std::atomic<int> last_answer{0};
  std::mutex mu;
  std::vector<std::string> errors;   // the first few failures, for the report
  std::set<int> answers;            // every version that answered
  auto record = [&](bool ok, int version, const std::string& error) {
    ++requests;
    if (ok && (version == 1 || version == 2)) {
      last_answer = version;
      std::lock_guard<std::mutex> lock(mu);
      answers.insert(version);
      return;
    }
    ++failures;
    std::lock_guard<std::mutex> lock(mu);
    if (errors.size() < 5) errors.push_back(error + " (version " + std::to_string(version) + ")");
  };

  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&] {
      GrpcClient client(server_->grpc_target());
      while (!stop) {
        const Answer a = client.Predict(VersionedSpec("m"));
        const bool consistent = a.status.ok() && a.y == static_cast<float>(a.version);
        record(consistent, static_cast<int>(a.version), "gRPC " + Describe(a.status));
      }
    });
    threads.emplace_back([&] {
      HttpClient http(server_->rest_port());
      while (!stop) {
        const HttpResult r = http.Post("/v1/models/m:predict", R"({"instances": [1.0]})");
        int version = -1;
        if (r.status == 200 && r.headers.count("x-model-version") != 0) {
          version = std::stoi(r.headers.at("x-model-version"));
        }
        const bool consistent = r.status == 200 && r.body == "{\"predictions\": [" + std::to_string(version) + ".0]}";
        record(consistent, version, "REST " + std::to_string(r.status) + " " + r.error + r.body);
      }
    });
  }
  auto version_two_gone = [&] {
    return grpc_->Predict(VersionedSpec("m", 2)).status.error_code() == grpc::StatusCode::NOT_FOUND;
  };

  std::this_thread::sleep_for(milliseconds(500));
  PublishVersionModel(base(), 2);
  const bool saw_two = WaitFor([&] { return last_answer == 2; }, kPollSettle);
  std::this_thread::sleep_for(milliseconds(500));
  ReplaceFile(config_path(), ModelConfigText(base(), "model_version_policy { specific { versions: 1 } }"));
  // Rolled back once version 2 is gone (version 1 is loaded again before it goes).
  const bool back_to_one = saw_two && WaitFor(version_two_gone, kPollSettle);
  std::this_thread::sleep_for(milliseconds(500));
  stop = true;
  for (std::thread& t : threads) t.join();

  RecordProperty("requests", requests.load());
  EXPECT_TRUE(saw_two) << server_->Log();
  EXPECT_TRUE(back_to_one) << server_->Log();
  EXPECT_EQ(last_answer.load(), 1);
  EXPECT_GT(requests.load(), 100);
  EXPECT_EQ(failures.load(), 0) << "of " << requests.load() << " requests; first: "
                                << (errors.empty() ? "" : errors.front());
  EXPECT_EQ(answers, (std::set<int>{1, 2}));
}

// ---- Flags ----

struct RunResult {
  int exit_code = -1;  // -1: killed after the timeout
  std::string output;  // stdout and stderr together
};

// Runs model-server with exactly `args` and waits (at most `timeout`) for it to exit.
RunResult RunServer(const fs::path& dir, const std::vector<std::string>& args, milliseconds timeout = seconds(10)) {
  const fs::path out_path = dir / "run.out";
  std::vector<std::string> argv_strings = {MODEL_SERVER_PATH};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  const pid_t pid = Spawn(std::move(argv_strings), out_path);
  RunResult result;
  int status = 0;
  const bool exited = WaitFor([&] { return waitpid(pid, &status, WNOHANG) == pid; }, timeout);
  if (!exited) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  } else if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else {
    result.exit_code = 128 + WTERMSIG(status);
  }
  result.output = ReadFile(out_path);
  return result;
}

class VersionsFlagsTest : public ::testing::Test {
 protected:
  RunResult Run(const std::vector<std::string>& args) { return RunServer(dir_.path(), args); }
  ScratchDir dir_;
};

TEST_F(VersionsFlagsTest, HelpListsTheFlags) {
  const RunResult r = Run({"--help"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (const char* flag : {"--port", "--rest_api_port", "--model_config_file", "--model_name", "--model_base_path",
                           "--model_config_file_poll_wait_seconds", "--file_system_poll_wait_seconds",
                           "--allow_version_labels_for_unavailable_models", "--rest_api_timeout_in_ms",
                           "--grpc_max_threads", "--version"}) {
    EXPECT_NE(r.output.find(flag), std::string::npos) << flag << " missing from:\n" << r.output;
  }
}

TEST_F(VersionsFlagsTest, VersionPrintsTheVersion) {
  const RunResult r = Run({"--version"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("model-server ", 0), 0u) << r.output;
  EXPECT_NE(r.output.find("TensorFlow Serving API compatible"), std::string::npos) << r.output;
}

TEST_F(VersionsFlagsTest, UnknownFlagExitsTwoNamingIt) {
  const RunResult r = Run({"--model_base_path=/tmp/m", "--frobnicate=3"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--frobnicate"), std::string::npos) << r.output;
}

TEST_F(VersionsFlagsTest, BadValueExitsTwoNamingTheFlag) {
  const RunResult r = Run({"--model_base_path=/tmp/m", "--port=eighty"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--port"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("eighty"), std::string::npos) << r.output;
}

TEST_F(VersionsFlagsTest, NoModelExitsTwo) {
  const RunResult r = Run({"--port=0"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--model_base_path"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--model_config_file"), std::string::npos) << r.output;
}

TEST_F(VersionsFlagsTest, SameGrpcAndRestPortExitsTwo) {
  const std::string port = std::to_string(FreePort());
  const RunResult r = Run({"--model_base_path=" + dir_.path().string(), "--port=" + port, "--rest_api_port=" + port});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--rest_api_port and --port must differ"), std::string::npos) << r.output;
}

TEST_F(VersionsFlagsTest, ConfigFileThatDoesNotParseFailsStartup) {
  const fs::path config = dir_ / "broken.config";
  WriteFile(config, "model_config_list {\n  config {\n    nmae: \"m\"\n  }\n}\n");
  const RunResult r = Run({"--port=0", "--model_config_file=" + config.string()});
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.exit_code, -1) << "still running after 10 s:\n" << r.output;
  // file:line:column, then protobuf's words.
  EXPECT_NE(r.output.find(config.string() + ":3:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("nmae"), std::string::npos) << r.output;
}

TEST_F(VersionsFlagsTest, ConfigFileWithARefusedModelFailsStartup) {
  const fs::path config = dir_ / "relative.config";
  WriteFile(config, ModelConfigText("relative/m", ""));
  const RunResult r = Run({"--port=0", "--model_config_file=" + config.string()});
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.exit_code, -1) << "still running after 10 s:\n" << r.output;
  EXPECT_NE(r.output.find(config.string()), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("is not an absolute path"), std::string::npos) << r.output;
}

TEST_F(VersionsFlagsTest, MissingConfigFileFailsStartup) {
  const fs::path config = dir_ / "absent.config";
  const RunResult r = Run({"--port=0", "--model_config_file=" + config.string()});
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.exit_code, -1) << "still running after 10 s:\n" << r.output;
  EXPECT_NE(r.output.find(config.string()), std::string::npos) << r.output;
}

}  // namespace
}  // namespace lockstep::e2e
