// model-server: TensorFlow Serving's flags, gRPC and REST APIs, serving Lockstep bundles.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include "server/flags.h"
#include "server/model_server.h"

int main(int argc, char** argv) {
  using namespace lockstep;
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

  spdlog::info("event=starting version=\"{}\"", ServerVersionString());
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
