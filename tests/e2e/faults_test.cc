// Faults on disk under a serving model-server: the files of a serving version truncated,
// rewritten and deleted; a new version that is broken; the model directory made unlistable;
// the config file replaced by garbage. Requests keep being answered correctly throughout,
// and nothing broken replaces what works.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "runtime/tensor_json.h"
#include "tests/e2e/grpc_test_util.h"
#include "tests/e2e/http_client.h"
#include "tests/e2e/rest_test_util.h"
#include "tests/e2e/server_harness.h"

namespace lockstep::e2e {
namespace {

// Counts the log lines holding `text`.
size_t CountInLog(const ServerProcess& server, std::string_view text) {
  const std::string log = server.Log();
  size_t n = 0;
  for (size_t at = log.find(text); at != std::string::npos; at = log.find(text, at + 1)) ++n;
  return n;
}

// REST predicts of x = 3 on model "m" from a thread of its own while the test does harm: every
// answer must be 3 * v for a version v in `versions` (the model is y = v x).
class SteadyLoad {
 public:
  SteadyLoad(int port, std::vector<int> versions) : versions_(std::move(versions)) {
    thread_ = std::thread([this, port] {
      HttpClient client(port);
      while (!stop_) {
        const HttpResult r = client.Post("/v1/models/m:predict", R"({"instances": [3.0]})");
        bool ok = false;
        for (int v : versions_) ok = ok || r.body == "{\"predictions\": [" + FormatFloat(3.0f * v) + "]}";
        ++requests_;
        if (!ok && failures_++ == 0) first_failure_ = std::to_string(r.status) + " " + r.error + " " + r.body;
      }
    });
  }
  ~SteadyLoad() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  int requests() const { return requests_; }
  int failures() const { return failures_; }
  const std::string& first_failure() const { return first_failure_; }

 private:
  const std::vector<int> versions_;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
  std::atomic<int> failures_{0};
  std::string first_failure_;
  std::thread thread_;
};

class FaultsTest : public ::testing::Test {
 protected:
  fs::path base() const { return dir_.path() / "m"; }
  // A server polling `base()` (and the config file, when `config` is set) every second.
  void Start(bool config = false) {
    std::vector<std::string> flags = {"--file_system_poll_wait_seconds=1"};
    if (config) {
      flags.push_back("--model_config_file=" + (dir_.path() / "models.config").string());
      flags.push_back("--model_config_file_poll_wait_seconds=1");
    } else {
      flags.push_back("--model_name=m");
      flags.push_back("--model_base_path=" + base().string());
    }
    server_ = std::make_unique<ServerProcess>(dir_.path(), flags);
  }
  // Lets two polls of the disk go by.
  static void Polls() { std::this_thread::sleep_for(std::chrono::milliseconds(2500)); }

  ScratchDir dir_;
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(FaultsTest, AServingVersionOutlivesItsFilesAndABrokenVersionNeverReplacesIt) {
  WriteVersionModel(base(), 1);
  Start();
  SteadyLoad load(server_->rest_port(), {1});

  // The files of the serving version, rewritten in place and truncated: what was loaded is
  // a copy, so nothing changes (a mapping of the file would fault on the next request).
  WriteFile(base() / "1" / "model.pb", "garbage");
  fs::resize_file(base() / "1" / "weights.bin", 0);
  Polls();

  // A new version whose weights are cut short fails its load; version 1 goes on.
  WriteVersionModel(base(), 2);
  fs::resize_file(base() / "2" / "weights.bin", fs::file_size(base() / "2" / "weights.bin") / 2);
  ASSERT_TRUE(WaitFor([&] { return CountInLog(*server_, "event=version_load_failed") > 0; }))
      << server_->Log();
  EXPECT_TRUE(Contains(server_->Log(), "weights.bin")) << server_->Log();

  // Version 1's directory deleted, with no other version available: it keeps serving
  // (model_store/README.md) rather than leave the model with nothing.
  fs::remove_all(base() / "1");
  Polls();
  load.Stop();
  EXPECT_EQ(load.failures(), 0) << load.first_failure();
  EXPECT_GT(load.requests(), 20);

  // A good version is taken as usual.
  WriteVersionModel(base(), 3);
  HttpClient client(server_->rest_port());
  EXPECT_TRUE(WaitFor([&] {
    return client.Post("/v1/models/m:predict", R"({"instances": [3.0]})").body == R"({"predictions": [9.0]})";
  })) << server_->Log();
  EXPECT_EQ(server_->Stop(), 0);
}

// The base path replaced by a file (and, for a user the permission bits bind, made
// unreadable): the loaded version keeps serving, the error is logged once, and the path is
// picked up again when it is back.
TEST_F(FaultsTest, AModelDirectoryThatCannotBeListedKeepsWhatIsLoaded) {
  WriteVersionModel(base(), 1);
  Start();
  SteadyLoad load(server_->rest_port(), {1, 2});

  const fs::path moved = dir_.path() / "m-moved";
  fs::rename(base(), moved);
  WriteFile(base(), "not a directory");
  ASSERT_TRUE(WaitFor([&] { return CountInLog(*server_, "event=source_error") > 0; })) << server_->Log();
  Polls();
  EXPECT_EQ(CountInLog(*server_, "event=source_error"), 1u) << "once per distinct error";
  fs::remove(base());
  fs::rename(moved, base());

  if (geteuid() != 0) {  // root reads whatever the mode bits say
    fs::permissions(base(), fs::perms::none);
    ASSERT_TRUE(WaitFor([&] { return CountInLog(*server_, "event=source_error") > 1; })) << server_->Log();
    Polls();
    fs::permissions(base(), fs::perms::owner_all);
  }

  WriteVersionModel(base(), 2);
  ASSERT_TRUE(WaitFor([&] { return CountInLog(*server_, "event=version_available model=m version=2") > 0; }))
      << server_->Log();
  load.Stop();
  EXPECT_EQ(load.failures(), 0) << load.first_failure();
}

// The config file replaced by binary garbage, by an empty file (an editor that truncates
// before writing), and by half of itself: each is rejected, naming the file, and the working
// config keeps serving.
TEST_F(FaultsTest, AConfigFileReplacedByGarbageKeepsTheWorkingConfig) {
  WriteVersionModel(base(), 1);
  const std::string good = ConfigText({{"m", base(), ""}});
  WriteFile(dir_.path() / "models.config", good);
  Start(/*config=*/true);
  SteadyLoad load(server_->rest_port(), {1});

  std::string garbage;
  for (int i = 0; i < 4096; ++i) garbage += static_cast<char>((i * 7919) % 256);
  const std::vector<std::string> broken = {garbage, "", good.substr(0, good.size() / 2)};
  for (size_t i = 0; i < broken.size(); ++i) {
    const fs::path next = dir_.path() / "next.config";
    WriteFile(next, broken[i]);
    fs::rename(next, dir_.path() / "models.config");
    ASSERT_TRUE(WaitFor([&] { return CountInLog(*server_, "event=config_file_rejected") > i; }))
        << server_->Log();
  }
  EXPECT_TRUE(Contains(server_->Log(), (dir_.path() / "models.config").string())) << server_->Log();
  Polls();
  load.Stop();
  EXPECT_EQ(load.failures(), 0) << load.first_failure();
  EXPECT_GT(load.requests(), 20);
}

}  // namespace
}  // namespace lockstep::e2e
