// model-server: TensorFlow Serving's flags, gRPC and REST APIs, serving Lockstep bundles.
#include <grpc/grpc.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include "server/flags.h"
#include "server/model_server.h"
#include "server/process_settings.h"

namespace {

// Every REST and gRPC connection holds a file descriptor, and the usual soft limit (1024) is
// below --rest_api_max_connections' default; take what the hard limit allows, as servers do.
// Past the limit the REST server pauses accepting (http_server.cc) rather than failing.
void RaiseOpenFilesLimit(int64_t max_connections) {
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) != 0) return;
  if (files.rlim_cur < files.rlim_max) {
    const rlim_t before = files.rlim_cur;
    files.rlim_cur = files.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &files) != 0) files.rlim_cur = before;
  }
  // Headroom for gRPC's connections, the model files and the log.
  if (files.rlim_cur != RLIM_INFINITY && static_cast<int64_t>(files.rlim_cur) < max_connections + 256) {
    spdlog::warn("event=open_files_limit_low limit={} rest_api_max_connections={} action=\"connections past the "
                 "limit wait to be accepted\"",
                 static_cast<uint64_t>(files.rlim_cur), max_connections);
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace lockstep;
  ApplyServerProcessSettings();
  std::vector<std::string> args(argv + 1, argv + argc);
  StatusOr<ServerFlags> flags = ParseServerFlags(args);
  if (!flags.ok()) {
    std::fprintf(stderr, "model-server: %s\n", flags.status().message().c_str());
    return 2;
  }
  if (flags->help) {
    std::fputs(ServerUsage().c_str(), stdout);
    return 0;
  }
  if (flags->version) {
    std::printf("%s\n", ServerVersionString().c_str());
    return 0;
  }
  if (Status status = ValidateServerFlags(*flags); !status.ok()) {
    std::fprintf(stderr, "model-server: %s\n", status.message().c_str());
    return 2;
  }

  // One line per event on stderr, as key=value pairs after the level.
  auto logger = spdlog::stderr_color_mt("model-server");
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  spdlog::set_default_logger(logger);
  spdlog::flush_on(spdlog::level::info);

  // The signals are taken by sigwait below, so every thread started from here on blocks them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  // A file size limit (ulimit -f) reached by a request log makes its write fail, which the log
  // reports; it must not end the server.
  std::signal(SIGXFSZ, SIG_IGN);

  spdlog::info("event=starting version=\"{}\"", ServerVersionString());
  // A reference to gRPC's library that main never gives back, so that the server's destructor
  // after the drain is not the last and does not run grpc_shutdown: in gRPC 1.51 that joins
  // the executor's threads, and one polling for a connection's last writes (tcp_posix's backup
  // poller) sleeps out its 10 s before it sees the stop. By then every answer has been sent and
  // the process is exiting; the operating system takes back what gRPC holds.
  grpc_init();
  RaiseOpenFilesLimit(flags->rest_api_max_connections);
  StatusOr<std::unique_ptr<ModelServer>> server = ModelServer::Start(*flags);
  if (!server.ok()) {
    spdlog::error("event=start_failed error=\"{}\"", server.status().message());
    return 1;
  }
  spdlog::info("event=server_ready grpc_port={} rest_api_port={}", (*server)->grpc_port(), (*server)->rest_api_port());

  // SIGHUP reloads the config file; SIGTERM (Kubernetes' stop) and SIGINT drain and exit 0.
  for (;;) {
    int signal = 0;
    sigwait(&signals, &signal);
    if (signal == SIGHUP) {
      spdlog::info("event=sighup action=reload_config");
      (*server)->ReloadConfigFile();
      continue;
    }
    spdlog::info("event=shutting_down signal={}", signal);
    (*server)->Drain(std::chrono::seconds(flags->drain_timeout_seconds));
    spdlog::info("event=stopped");
    return 0;
  }
}
