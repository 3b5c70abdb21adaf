// The shadow-and-reload stress: the scenario of ShadowTrafficTest (every request version 1
// answers is copied to a shadow, and config reloads move the shadow between versions), run for
// a while with every kind of reader at once: REST and gRPC predicts on kept-alive connections,
// a Prometheus scrape and a readiness probe every few milliseconds. Every answer is checked.
//
// It once saw every REST request fail at the transport after a reload, with nothing in the
// log: a scrape during a reload read the freed serving snapshot and the server died (fixed in
// d004b1d). So when a request fails at the transport, the test dumps the server's state at that
// moment, its threads' stacks (gdb -batch, else eu-stack) and its sockets (ss), into the
// failure message, and into $LOCKSTEP_STRESS_DUMP_DIR when set.
//
// In the suite it runs for 4 s. scripts/flake-harness runs it for minutes, under CPU pressure,
// in any of the three builds: LOCKSTEP_STRESS_SECONDS sets the length.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/common/prometheus_text.h"
#include "tests/common/run_command.h"
#include "tests/e2e/server_harness.h"
#include "tests/e2e/shadow_scenario.h"

namespace lockstep::e2e {
namespace {

namespace tfs = tensorflow::serving;
using Clock = std::chrono::steady_clock;

double StressSeconds() {
  const char* s = std::getenv("LOCKSTEP_STRESS_SECONDS");
  return s != nullptr && std::atof(s) > 0 ? std::atof(s) : 4.0;
}

// The server's state, for a failure that left nothing in its log: every thread's stack and
// every socket on its two ports, as a text.
std::string DumpServerState(const ServerProcess& server) {
  const std::string pid = std::to_string(server.pid());
  std::string dump = "=== threads of model-server (pid " + pid + ") ===\n";
  // gdb may be refused (ptrace rules) or hang on a wedged process: bounded, and the kernel's
  // own view of each thread (name, where it sleeps) comes whatever the debugger did.
  const std::string stacks =
      "if command -v gdb >/dev/null; then timeout 30 gdb -batch -nx -p " + pid +
      " -ex 'thread apply all bt 30' 2>&1 | grep -v '^\\[New LWP'; elif command -v eu-stack >/dev/null; then "
      "timeout 30 eu-stack -p " + pid + "; else echo 'neither gdb nor eu-stack is installed'; fi; "
      "echo '--- threads (name, wait channel) ---'; "
      "for t in /proc/" + pid + "/task/*; do echo \"$(cat $t/comm) $(cat $t/wchan)\"; done";
  dump += test::RunCommand(stacks).output;
  const std::string rest = std::to_string(server.rest_port()), grpc = std::to_string(server.grpc_port());
  dump += "=== sockets on ports " + rest + " and " + grpc + " ===\n";
  dump += test::RunCommand("ss -tanpi '( sport = :" + rest + " or dport = :" + rest + " or sport = :" + grpc +
                           " or dport = :" + grpc + " )'")
              .output;
  dump += "=== open descriptors: " + test::RunCommand("ls /proc/" + pid + "/fd | wc -l").output;
  if (const char* dir = std::getenv("LOCKSTEP_STRESS_DUMP_DIR")) {
    const fs::path path = fs::path(dir) / ("stress-dump-" + pid + "-" +
                                           std::to_string(Clock::now().time_since_epoch().count()) + ".txt");
    std::ofstream(path) << dump << "=== log ===\n" << server.Log();
  }
  return dump;
}

// What went wrong, once per failure; the first transport failure also dumps the server.
class Failures {
 public:
  explicit Failures(const ServerProcess& server) : server_(server), start_(Clock::now()) {}

  void Add(const std::string& client, const std::string& what, bool transport) {
    const double at = std::chrono::duration<double>(Clock::now() - start_).count();
    bool dump = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (lines_.size() < 20) lines_.push_back(client + " at " + std::to_string(at) + " s: " + what);
      ++count_;
      dump = transport && !dumped_;
      dumped_ = dumped_ || dump;
    }
    // Outside the lock: the other clients go on failing (and counting) meanwhile.
    if (dump) {
      std::string text = DumpServerState(server_);
      std::lock_guard<std::mutex> lock(mu_);
      dump_ = std::move(text);
    }
  }
  int count() const {
    std::lock_guard<std::mutex> lock(mu_);
    return count_;
  }
  std::string Report() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::string out = std::to_string(count_) + " failures; the first ones:\n";
    for (const std::string& l : lines_) out += "  " + l + "\n";
    return out + dump_;
  }

 private:
  const ServerProcess& server_;
  const Clock::time_point start_;
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
  std::string dump_;
  bool dumped_ = false;
  int count_ = 0;
};

TEST(ReloadStressTest, EveryReaderIsAnsweredWhileTheShadowMoves) {
  ScratchDir dir;
  const fs::path base = dir.path() / "m";
  ASSERT_NO_FATAL_FAILURE(WriteShadowScenarioModels(base));
  const fs::path config_path = dir.path() / "models.config";
  WriteFile(config_path, ShadowConfig(base, "same"));
  ServerProcess server(dir.path(),
                       {"--model_config_file=" + config_path.string(), "--model_config_file_poll_wait_seconds=1"});
  {
    HttpClient http(server.rest_port());
    ASSERT_TRUE(WaitFor([&] { return http.Get("/v1/models/m/labels/same").status == 200; })) << server.Log();
  }

  Failures failures(server);
  std::atomic<bool> stop{false};
  std::atomic<int> rest_answers{0}, grpc_answers{0}, scrapes{0}, probes{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 2; ++c) {
    clients.emplace_back([&, c] {
      HttpClient http(server.rest_port());
      const std::string who = "REST predict client " + std::to_string(c);
      while (!stop.load()) {
        const HttpResult r = http.Post("/v1/models/m/labels/stable:predict", R"({"instances": [3.0]})");
        if (r.status == 200 && r.body == R"({"predictions": [3.0]})") {
          ++rest_answers;
        } else {
          failures.Add(who, std::to_string(r.status) + " " + r.error + " " + r.body, r.status == 0);
        }
      }
    });
  }
  clients.emplace_back([&] {
    auto stub = tfs::PredictionService::NewStub(MakeChannel(server.grpc_target()));
    while (!stop.load()) {
      tfs::PredictRequest request = PredictX("m", 3.0f);
      request.mutable_model_spec()->set_version_label("stable");
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
      tfs::PredictResponse response;
      const grpc::Status s = stub->Predict(&context, request, &response);
      const auto y = response.outputs().find("y");
      if (s.ok() && y != response.outputs().end() && y->second.float_val_size() == 1 &&
          y->second.float_val(0) == 3.0f) {
        ++grpc_answers;
      } else if (s.ok()) {
        failures.Add("gRPC predict client", "a wrong answer: " + response.ShortDebugString(), false);
      } else {
        const bool transport = s.error_code() == grpc::StatusCode::UNAVAILABLE ||
                               s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
        failures.Add("gRPC predict client", std::to_string(s.error_code()) + " " + s.error_message(), transport);
      }
    }
  });
  // The scraper and the prober: the readers of the serving snapshot that once read it freed.
  clients.emplace_back([&] {
    HttpClient http(server.rest_port());
    while (!stop.load()) {
      const HttpResult r = http.Get("/metrics");
      const test::PrometheusText m = test::ParsePrometheusText(r.body);
      if (r.status == 200 && m.Get(R"(lockstep_model_version_state{model="m",version="1",state="AVAILABLE"})", 0) == 1) {
        ++scrapes;
      } else {
        failures.Add("scraper", std::to_string(r.status) + " " + r.error + " " + r.body.substr(0, 200), r.status == 0);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  clients.emplace_back([&] {
    HttpClient http(server.rest_port());
    while (!stop.load()) {
      const HttpResult ready = http.Get("/v2/health/ready");
      const HttpResult model = http.Get("/v1/models/m");
      if (ready.status == 200 && model.status == 200) {
        ++probes;
      } else {
        failures.Add("prober", std::to_string(ready.status) + " " + std::to_string(model.status) + " " +
                                   ready.error + model.error + ready.body + model.body,
                     ready.status == 0 || model.status == 0);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });

  // The watchdog: a wedged server fails no request (the clients wait on it for ever), so
  // when no answer at all comes for 30 s it is dumped, then killed to free the clients.
  std::atomic<bool> clients_done{false};
  std::thread watchdog([&] {
    int last = -1;
    auto last_progress = Clock::now();
    while (!clients_done.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      const int answers = rest_answers.load() + grpc_answers.load() + scrapes.load() + probes.load();
      if (answers != last) {
        last = answers;
        last_progress = Clock::now();
      } else if (Clock::now() - last_progress > std::chrono::seconds(30)) {
        failures.Add("watchdog", "no answer for 30 s", /*transport=*/true);
        kill(server.pid(), SIGKILL);
        return;
      }
    }
  });

  // The reloads: the shadow moves between version 3 (agrees) and version 2 (disagrees), every
  // 1.1 s against the server's 1 s poll: most polls see a change, none sees two.
  const auto end = Clock::now() + std::chrono::duration<double>(StressSeconds());
  int reloads = 0;
  for (bool same = false; Clock::now() < end; same = !same, ++reloads) {
    const fs::path tmp = config_path.string() + ".tmp";
    WriteFile(tmp, ShadowConfig(base, same ? "same" : "double"));
    fs::rename(tmp, config_path);
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  }
  stop = true;
  for (std::thread& t : clients) t.join();
  clients_done = true;
  watchdog.join();

  EXPECT_EQ(failures.count(), 0) << failures.Report() << server.Log();
  EXPECT_GT(rest_answers.load(), 0);
  EXPECT_GT(grpc_answers.load(), 0);
  EXPECT_GT(scrapes.load(), 0);
  EXPECT_GT(probes.load(), 0);
  // The reloads took effect: the shadow ran on both versions, and every copy was compared.
  HttpClient http(server.rest_port());
  const test::PrometheusText m = test::ParsePrometheusText(http.Get("/metrics").body);
  EXPECT_GT(m.Get(R"(lockstep_shadow_requests_total{model="m",version="3",result="agree"})", 0), 0);
  if (reloads >= 2) {
    EXPECT_GT(m.Get(R"(lockstep_shadow_requests_total{model="m",version="2",result="disagree"})", 0), 0);
  }
  EXPECT_EQ(m.Get(R"(lockstep_shadow_requests_total{model="m",version="3",result="disagree"})", 0), 0);
  EXPECT_EQ(server.Stop(), 0) << server.Log();
  EXPECT_EQ(server.Log().find("Sanitizer"), std::string::npos) << server.Log();
  std::printf("stress: %.0f s, %d reloads, %d REST and %d gRPC answers, %d scrapes, %d probes, %d failures\n",
              StressSeconds(), reloads, rest_answers.load(), grpc_answers.load(), scrapes.load(), probes.load(),
              failures.count());
}

}  // namespace
}  // namespace lockstep::e2e
