// End-to-end tests start the real model-server binary (MODEL_SERVER_PATH) on 127.0.0.1 with
// ephemeral ports and talk to it with real clients: a Beast HTTP client (http_client.h) and a
// gRPC stub.
#pragma once

#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/bundle/bundle.h"
#include "tests/e2e/http_client.h"
#include "runtime/graph_builder.h"
#include "tensorflow_serving/apis/model_service.grpc.pb.h"
#include "tensorflow_serving/apis/prediction_service.grpc.pb.h"
#include "tests/common/file_util.h"
#include "tests/common/ports.h"
#include "tests/common/scratch_dir.h"

namespace lockstep::e2e {

namespace fs = std::filesystem;
using ::lockstep::test::ScratchDir;

using ::lockstep::test::FreePort;

using ::lockstep::test::ReadFile;
using ::lockstep::test::WriteFile;

// Polls `pred` every 10 ms for at most `timeout`.
template <typename Pred>
bool WaitFor(Pred pred, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

// y = a * x + b over a float vector x, with TF Serving half_plus_two's three signatures
// (serving_default, regress_x_to_y, classify_x_to_y).
inline Model AffineModel(float a, float b) {
  GraphBuilder g;
  const std::string x = g.Input("x", DType::kFloat32, Shape{-1});
  const std::string y = g.Op("Add", {g.Op("Mul", {x, g.Const("a", Tensor::Scalar<float>(a))}),
                                     g.Const("b", Tensor::Scalar<float>(b))}, {}, "y");
  g.AddSignature({std::string(kDefaultSignature), "tensorflow/serving/predict",
                  {{"x", x, DType::kFloat32, Shape{-1}}}, {{"y", y, DType::kFloat32, Shape{-1}}}});
  g.AddSignature({"regress_x_to_y", "tensorflow/serving/regress",
                  {{"x", x, DType::kFloat32, Shape{-1}}}, {{"outputs", y, DType::kFloat32, Shape{-1}}}});
  const std::string scores = g.Op("Reshape", {y}, {{"shape", std::vector<int64_t>{-1, 1}}}, "scores");
  g.AddSignature({"classify_x_to_y", "tensorflow/serving/classify",
                  {{"x", x, DType::kFloat32, Shape{-1}}}, {{"scores", scores, DType::kFloat32, Shape{-1, 1}}}});
  return std::move(g).Build();
}

// half_plus_two (y = 0.5 x + 2) as version `version` under `base`.
inline void WriteHalfPlusTwo(const fs::path& base, int64_t version) {
  BundleWriteOptions options;
  options.overwrite = true;
  const Status s = WriteBundle(AffineModel(0.5f, 2.0f), base / std::to_string(version), options);
  ASSERT_TRUE(s.ok()) << s.ToString();
}

// y = version * x: the answer for x = 1 says which version served.
inline void WriteVersionModel(const fs::path& base, int64_t version) {
  BundleWriteOptions options;
  options.overwrite = true;
  const Status s = WriteBundle(AffineModel(static_cast<float>(version), 0.0f), base / std::to_string(version), options);
  ASSERT_TRUE(s.ok()) << s.ToString();
}

// Starts `args[0]` with `args`, its stdout and stderr going to `output`; the child's pid. The
// child is killed if the thread that started it ends (a test killed by its timeout leaves no
// server behind to take the next one's ports and cores), so spawn from the test's own thread.
inline pid_t Spawn(std::vector<std::string> args, const fs::path& output) {
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // the parent ended before the line above
    const int fd = ::open(output.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

// The model-server process. Its stderr (the log) goes to a file in `dir`.
class ServerProcess {
 public:
  // Starts model-server with `flags` plus --port and --rest_api_port on fresh ports, and
  // waits for its "event=server_ready" line. `expect_ready` false: waits for it to exit.
  // `command_prefix` runs it under another program ({"/usr/bin/prlimit", "--nofile=64"}).
  ServerProcess(const fs::path& dir, std::vector<std::string> flags, bool expect_ready = true,
                std::vector<std::string> command_prefix = {})
      : log_path_(dir / ("server-" + std::to_string(counter_++) + ".log")) {
    grpc_port_ = FreePort();
    rest_port_ = FreePort();
    while (rest_port_ == grpc_port_) rest_port_ = FreePort();
    args_ = std::move(command_prefix);
    args_.insert(args_.end(), {MODEL_SERVER_PATH, "--port=" + std::to_string(grpc_port_),
                               "--rest_api_port=" + std::to_string(rest_port_)});
    args_.insert(args_.end(), flags.begin(), flags.end());
    pid_ = Spawn(args_, log_path_);
    if (!expect_ready) return;
    WaitReady();
  }

  // A crash and a restart with the same flags and ports: SIGKILL, reap, start again (its log
  // in a new file), and wait until it is ready.
  void KillAndRestart() {
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    exited_ = false;
    log_path_ = log_path_.parent_path() / ("server-" + std::to_string(counter_++) + ".log");
    pid_ = Spawn(args_, log_path_);
    WaitReady();
  }

  ~ServerProcess() { Stop(); }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  pid_t pid() const { return pid_; }
  int grpc_port() const { return grpc_port_; }
  int rest_port() const { return rest_port_; }
  std::string grpc_target() const { return "127.0.0.1:" + std::to_string(grpc_port_); }
  // The server's log, and a last line saying how it ended if it has (a crash logs nothing).
  // waitid with WNOWAIT looks without reaping, so Exited() still sees the exit.
  std::string Log() const {
    std::string log = ReadFile(log_path_);
    siginfo_t info{};
    int status = exit_status_;
    bool ended = exited_;
    if (!ended && waitid(P_PID, pid_, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid_) {
      ended = true;
      status = info.si_code == CLD_EXITED ? W_EXITCODE(info.si_status, 0) : info.si_status;
    }
    if (ended) {
      log += WIFEXITED(status) ? "[model-server exited with code " + std::to_string(WEXITSTATUS(status)) + "]\n"
                               : "[model-server ended by signal " + std::to_string(WTERMSIG(status)) + "]\n";
    }
    return log;
  }

  // True once the process has exited (its status is then in exit_status()).
  bool Exited() {
    if (exited_) return true;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      exited_ = true;
      exit_status_ = status;
    }
    return exited_;
  }
  // Waits for the process to exit by itself; its exit code, or -1 on timeout.
  int WaitExit(std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    if (!WaitFor([&] { return Exited(); }, timeout)) return -1;
    return WIFEXITED(exit_status_) ? WEXITSTATUS(exit_status_) : 128 + WTERMSIG(exit_status_);
  }

  // SIGTERM, then SIGKILL after 10 s. Returns the exit code.
  int Stop() {
    if (Exited()) return WIFEXITED(exit_status_) ? WEXITSTATUS(exit_status_) : -1;
    kill(pid_, SIGTERM);
    int code = WaitExit(std::chrono::seconds(10));
    if (code == -1) {
      kill(pid_, SIGKILL);
      code = WaitExit(std::chrono::seconds(10));
    }
    return code;
  }

 private:
  void WaitReady() {
    const bool ready = WaitFor([&] { return Log().find("event=server_ready") != std::string::npos || Exited(); },
                               std::chrono::seconds(60));
    EXPECT_TRUE(ready && !Exited()) << "model-server did not become ready; log:\n" << Log();
  }

  static inline int counter_ = 0;
  std::vector<std::string> args_;
  fs::path log_path_;
  pid_t pid_ = -1;
  int grpc_port_ = 0;
  int rest_port_ = 0;
  bool exited_ = false;
  int exit_status_ = 0;
};

// A gRPC Predict of x = [value] on `model`'s serving_default (AffineModel's input).
inline tensorflow::serving::PredictRequest PredictX(const std::string& model, float value = 1.0f) {
  tensorflow::serving::PredictRequest request;
  request.mutable_model_spec()->set_name(model);
  tensorflow::TensorProto& x = (*request.mutable_inputs())["x"];
  x.set_dtype(tensorflow::DT_FLOAT);
  x.mutable_tensor_shape()->add_dim()->set_size(1);
  x.add_float_val(value);
  return request;
}

inline std::shared_ptr<grpc::Channel> MakeChannel(const std::string& target) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
}

}  // namespace lockstep::e2e
