// A real S3-compatible server for tests: s3rver (npm, installed once by tests/s3/s3rver) on
// 127.0.0.1 at a free port, serving a scratch directory with one bucket, and boto3 to put
// objects into it as another tool would.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "tests/common/ports.h"
#include "tests/common/run_command.h"
#include "tests/common/scratch_dir.h"

namespace lockstep::s3_test {

namespace fs = std::filesystem;

inline constexpr const char* kAccessKey = "S3RVER";  // s3rver's own key pair
inline constexpr const char* kSecretKey = "S3RVER";

class S3rver {
 public:
  explicit S3rver(std::string bucket = "models") : bucket_(std::move(bucket)) {
    const test::CommandResult installed = test::RunCommand(std::string(LOCKSTEP_SOURCE_DIR) + "/tests/s3/s3rver");
    script_ = installed.output.substr(0, installed.output.find_last_not_of("\n") + 1);
    script_ = script_.substr(script_.find_last_of('\n') + 1);
    EXPECT_EQ(installed.exit_code, 0) << installed.output;
    Start();
  }
  ~S3rver() { Stop(); }
  S3rver(const S3rver&) = delete;
  S3rver& operator=(const S3rver&) = delete;

  // host:port, as S3_ENDPOINT takes it.
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port_); }
  const std::string& bucket() const { return bucket_; }

  void Stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  // Starts again on the same port and data (after Stop).
  void Start() {
    if (port_ == 0) port_ = test::FreePort();
    pid_ = fork();
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      const std::string port = std::to_string(port_), data = dir_.path().string();
      // s3rver makes its continuation tokens with DES, which OpenSSL 3 keeps in its legacy
      // provider: without it a paged listing answers 500.
      execlp("node", "node", "--openssl-legacy-provider", script_.c_str(), "-d", data.c_str(), "-a", "127.0.0.1", "-p", port.c_str(), "--silent",
             "--configure-bucket", bucket_.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!test::Accepts(port_) && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_TRUE(test::Accepts(port_)) << "s3rver did not start (" << script_ << ")";
  }

  // Puts (FILE) or deletes ("-") objects with boto3: {{key, file}, ...}.
  void Put(const std::vector<std::pair<std::string, std::string>>& objects) const {
    std::string command = std::string("AWS_ACCESS_KEY_ID=") + kAccessKey + " AWS_SECRET_ACCESS_KEY=" + kSecretKey +
                          " python3 " + LOCKSTEP_SOURCE_DIR + "/tests/s3/boto3_put.py http://" + endpoint() + " " +
                          bucket_;
    for (const auto& [key, file] : objects) command += " '" + key + "=" + file + "'";
    const test::CommandResult put = test::RunCommand(command + " 2>&1");
    ASSERT_EQ(put.exit_code, 0) << put.output;
  }

 private:
  std::string bucket_;
  std::string script_;
  test::ScratchDir dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

// tests/s3/faulty_proxy.py in front of a server: the first `count` requests its `mode` matches
// (cut, slow, fail-put; faulty_proxy.py says what each does) go wrong, the rest pass through.
class FaultyProxy {
 public:
  FaultyProxy(const std::string& upstream, const std::string& mode, int count) {
    port_ = test::FreePort();
    log_ = dir_.path() / "requests.log";
    pid_ = fork();
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      const std::string script = std::string(LOCKSTEP_SOURCE_DIR) + "/tests/s3/faulty_proxy.py";
      const std::string port = std::to_string(port_), n = std::to_string(count), log = log_.string();
      if (FILE* null = std::fopen("/dev/null", "w")) dup2(fileno(null), 2);  // a client's hang-ups
      execlp("python3", "python3", script.c_str(), port.c_str(), upstream.c_str(), log.c_str(), mode.c_str(),
             n.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!test::Accepts(port_) && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_TRUE(test::Accepts(port_)) << "faulty_proxy.py did not start";
  }
  ~FaultyProxy() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  FaultyProxy(const FaultyProxy&) = delete;
  FaultyProxy& operator=(const FaultyProxy&) = delete;

  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port_); }
  // What went through, in order: "GET /bucket/key", "PUT /bucket/key", "fault cut /bucket/key".
  std::vector<std::string> Log() const {
    std::vector<std::string> lines;
    std::ifstream in(log_);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }
  int Faults() const {
    int n = 0;
    for (const std::string& line : Log()) n += line.starts_with("fault ");
    return n;
  }

 private:
  test::ScratchDir dir_;
  fs::path log_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace lockstep::s3_test
