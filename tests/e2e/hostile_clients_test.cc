// Hostile clients against the real model-server: slow senders, lying Content-Lengths, bodies
// built to exhaust a parser, shapes that overflow, thousands of idle connections, requests
// abandoned mid-flight, pipelining. After each, the server must answer a normal request
// correctly, and its resident memory must come back to where it was before (within a margin
// for the allocator's caches). Every scenario is bounded in time and in requests.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/tensor_json.h"
#include "tensorflow_serving/apis/prediction_service.grpc.pb.h"
#include "tests/e2e/grpc_test_util.h"
#include "tests/e2e/http_client.h"
#include "tests/e2e/rest_test_util.h"
#include "tests/e2e/server_harness.h"

namespace lockstep::e2e {
namespace {

constexpr char kPredict[] = "/v1/models/half:predict";
constexpr char kEcho[] = "/v1/models/multi:predict";

// Resident memory of `pid` in KiB (VmRSS), or -1.
int64_t ResidentKib(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  }
  return -1;
}

// CPU time `pid` has used, user and system, in seconds (-1 if unknown).
double CpuSeconds(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t name_end = text.rfind(')');
  if (name_end == std::string::npos) return -1;
  std::istringstream fields(text.substr(name_end + 2));
  std::string field;
  long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {  // fields 14 and 15 of proc(5)
    if (i == 14) utime = std::stoll(field);
    if (i == 15) stime = std::stoll(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

class HostileClientsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteHalfPlusTwo(dir_.path() / "half", 1);
    WriteModel(MultiModel(), dir_.path() / "multi" / "1");
    WriteFile(dir_.path() / "models.config",
              ConfigText({{"half", dir_.path() / "half", ""}, {"multi", dir_.path() / "multi", ""}}));
    server_ = std::make_unique<ServerProcess>(
        dir_.path(),
        std::vector<std::string>{"--model_config_file=" + (dir_.path() / "models.config").string(),
                                 "--rest_api_timeout_in_ms=1000", "--rest_api_num_threads=4"});
    // Warm up what every request touches (threads' stacks, the allocator's arenas, the
    // session's buffers) before taking the baseline.
    HttpClient client(server_->rest_port());
    for (int i = 0; i < 200; ++i)
      ASSERT_EQ(client.Post(kPredict, R"({"instances": [1.0, 2.0]})").status, 200);
    baseline_kib_ = ResidentKib(server_->pid());
    ASSERT_GT(baseline_kib_, 0);
  }

  // The server answers a normal request correctly, and its memory comes back to the baseline.
  void ExpectHealthyAndBackToBaseline() {
    HttpClient client(server_->rest_port());
    const HttpResult r = client.Post(kPredict, R"({"instances": [1.0, 2.0, 5.0]})");
    EXPECT_EQ(r.status, 200) << r.error;
    EXPECT_EQ(r.body, R"({"predictions": [2.5, 3.0, 4.5]})");
    EXPECT_FALSE(server_->Exited()) << server_->Log();
#ifndef LOCKSTEP_SANITIZER_BUILD  // whose allocators hold freed memory in quarantine on purpose
    // 10% and 8 MiB over the baseline: what glibc may keep cached after a burst of frees.
    const int64_t limit = baseline_kib_ + baseline_kib_ / 10 + 8 * 1024;
    int64_t now = 0;
    EXPECT_TRUE(
        WaitFor([&] { return (now = ResidentKib(server_->pid())) <= limit; }, std::chrono::seconds(10)))
        << "resident " << now << " KiB, baseline " << baseline_kib_ << " KiB";
#endif
  }

  ScratchDir dir_;
  std::unique_ptr<ServerProcess> server_;
  int64_t baseline_kib_ = 0;
};

// One byte every 300 ms: the request never completes, and the connection is closed once the
// REST timeout (1 s here) has passed, while other clients are served as usual.
TEST_F(HostileClientsTest, ASlowSenderIsCutOffAndOthersAreServed) {
  RawConnection slow(server_->rest_port());
  ASSERT_TRUE(slow.connected());
  const std::string request = RawRequest("POST", kPredict, R"({"instances": [1.0]})");
  const auto start = std::chrono::steady_clock::now();
  bool closed = false;
  for (size_t i = 0; i < request.size() && !closed; ++i) {
    if (!slow.Send(request.substr(i, 1))) break;
    HttpClient other(server_->rest_port());
    ASSERT_EQ(other.Post(kPredict, R"({"instances": [2.0]})").body, R"({"predictions": [3.0]})");
    closed = slow.WaitClosed(std::chrono::milliseconds(300));
    ASSERT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  }
  EXPECT_TRUE(closed || slow.WaitClosed(std::chrono::seconds(3)));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4));
  ExpectHealthyAndBackToBaseline();
}

// A body longer than its Content-Length: the rest is read as the next request, which is
// malformed, answered 400, and the connection closed.
TEST_F(HostileClientsTest, ABodyLongerThanAnnouncedIsTheNextRequest) {
  RawConnection raw(server_->rest_port());
  const std::string body = R"({"instances": [1.0]})";
  std::string request = RawRequest("POST", kPredict, body);
  request += "garbage that is no request line\r\n\r\n";
  ASSERT_TRUE(raw.Send(request));
  EXPECT_EQ(raw.ReadResponse().body, R"({"predictions": [2.5]})");
  EXPECT_EQ(raw.ReadResponse().status, 400);
  EXPECT_TRUE(raw.WaitClosed(std::chrono::seconds(3)));
  ExpectHealthyAndBackToBaseline();
}

// A body shorter than its Content-Length: the server waits for the rest only as long as the
// REST timeout, then closes the connection without answering.
TEST_F(HostileClientsTest, ABodyShorterThanAnnouncedTimesOut) {
  RawConnection raw(server_->rest_port());
  ASSERT_TRUE(
      raw.Send("POST /v1/models/half:predict HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"inst"));
  EXPECT_TRUE(raw.WaitClosed(std::chrono::seconds(4)));
  EXPECT_EQ(raw.pending(), "");
  ExpectHealthyAndBackToBaseline();
}

// A 1 GB Content-Length is refused before any of the body is read or allocated.
TEST_F(HostileClientsTest, AGigabyteContentLengthIs413AtOnce) {
  RawConnection raw(server_->rest_port());
  ASSERT_TRUE(
      raw.Send("POST /v1/models/half:predict HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000\r\n\r\n[[[["));
  const HttpResult r = raw.ReadResponse(std::chrono::seconds(3));
  EXPECT_EQ(r.status, 413) << r.error;
  EXPECT_TRUE(raw.WaitClosed(std::chrono::seconds(3)));
  ExpectHealthyAndBackToBaseline();
}

// Bodies aimed at the JSON parser and the tensor decoder, each answered 400 with a message.
TEST_F(HostileClientsTest, ParserBombsAre400) {
  HttpClient client(server_->rest_port());
  const std::string deep = "{\"instances\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  EXPECT_REST_ERROR(client.Post(kPredict, deep), 400, "JSON nests deeper than");
  EXPECT_REST_ERROR(client.Post(kPredict, R"({"instances": [1e400]})"), 400, "number overflow");
  EXPECT_REST_ERROR(client.Post(kPredict, R"({"instances": [123456789012345678901234567890123456789012]})"),
                    400, "out of range");
  EXPECT_REST_ERROR(client.Post(kPredict, "{\"instances\": [1.0], \"signature_name\": \"\xff\xfe\"}"), 400,
                    "not valid JSON");
  EXPECT_REST_ERROR(
      client.Post(kEcho, R"({"signature_name": "echo", "instances": [{"b64": "not base64!"}]})"), 400,
      "base64");
  EXPECT_REST_ERROR(client.Post(kEcho, R"({"signature_name": "echo", "instances": [{"b64": "QQ="}]})"), 400,
                    "base64");
  // A million elements in one flat list is fine; it is the shape of things that is bounded.
  std::string wide = "{\"instances\": [";
  for (int i = 0; i < 1000000; ++i) wide += i ? ",0" : "0";
  wide += "]}";
  const HttpResult big = client.Post(kPredict, wide);
  EXPECT_EQ(big.status, 200) << big.error;
  ExpectHealthyAndBackToBaseline();
}

// Shapes whose element counts overflow int64 (or just exceed the bound), over gRPC where a
// client states a shape outright: INVALID_ARGUMENT before anything is allocated.
TEST_F(HostileClientsTest, ShapesThatOverflowAreInvalidArgument) {
  auto stub = tensorflow::serving::PredictionService::NewStub(
      grpc::CreateChannel(server_->grpc_target(), grpc::InsecureChannelCredentials()));
  for (const std::vector<int64_t>& dims : std::vector<std::vector<int64_t>>{
           {int64_t{1} << 62, int64_t{1} << 62}, {int64_t{1} << 32, int64_t{1} << 32, 0, 5}, {INT64_MAX}}) {
    tfs::PredictRequest request;
    request.mutable_model_spec()->set_name("half");
    tensorflow::TensorProto& x = (*request.mutable_inputs())["x"];
    x.set_dtype(tensorflow::DT_FLOAT);
    for (int64_t d : dims) x.mutable_tensor_shape()->add_dim()->set_size(d);
    x.add_float_val(1.0f);
    grpc::ClientContext context;
    tfs::PredictResponse response;
    const grpc::Status status = stub->Predict(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(status);
  }
  ExpectHealthyAndBackToBaseline();
}

// Two thousand connections that send nothing: the server keeps answering others while they
// are open, closes them after its timeout, and gives their memory back.
TEST_F(HostileClientsTest, ThousandsOfIdleConnections) {
  constexpr int kIdle = 2000;
  // This process holds the client ends (the server raises its own limit).
  rlimit files{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &files), 0);
  if (files.rlim_max < kIdle + 200)
    GTEST_SKIP() << "needs " << kIdle + 200 << " open files; the hard limit is " << files.rlim_max;
  files.rlim_cur = files.rlim_max;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &files), 0);
  std::vector<std::unique_ptr<RawConnection>> idle;
  for (int i = 0; i < kIdle; ++i) {
    idle.push_back(std::make_unique<RawConnection>(server_->rest_port()));
    ASSERT_TRUE(idle.back()->connected()) << "connection " << i;
  }
  HttpClient client(server_->rest_port());
  EXPECT_EQ(client.Post(kPredict, R"({"instances": [4.0]})").body, R"({"predictions": [4.0]})");
  int closed = 0;
  for (auto& c : idle) closed += c->WaitClosed(std::chrono::seconds(5)) ? 1 : 0;
  EXPECT_EQ(closed, kIdle) << "the server closes idle connections after --rest_api_timeout_in_ms";
  idle.clear();
  ExpectHealthyAndBackToBaseline();
}

// Clients that give up: REST requests whose connection closes before the answer, and gRPC
// calls cancelled or past their deadline while in flight.
TEST_F(HostileClientsTest, RequestsAbandonedMidFlight) {
  const std::string body = R"({"instances": [1.0, 2.0, 3.0]})";
  for (int i = 0; i < 200; ++i) {
    RawConnection raw(server_->rest_port());
    ASSERT_TRUE(raw.Send(RawRequest("POST", kPredict, body)));
  }  // closed at once
  auto stub = tensorflow::serving::PredictionService::NewStub(
      grpc::CreateChannel(server_->grpc_target(), grpc::InsecureChannelCredentials()));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        grpc::ClientContext context;
        tfs::PredictResponse response;
        if (t % 2 == 0) {
          context.set_deadline(std::chrono::system_clock::now() + std::chrono::microseconds(100 * (i % 10)));
          (void)stub->Predict(&context, PredictX("half", {1.0f, 2.0f}), &response);
        } else {
          std::thread cancel([&] { context.TryCancel(); });
          (void)stub->Predict(&context, PredictX("half", {1.0f, 2.0f}), &response);
          cancel.join();
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  grpc::ClientContext context;
  tfs::PredictResponse response;
  const grpc::Status status = stub->Predict(&context, PredictX("half", {2.0f}), &response);
  EXPECT_TRUE(status.ok()) << Describe(status);
  EXPECT_EQ(FloatsOf(response.outputs().at("y")), std::vector<float>{3.0f});
  ExpectHealthyAndBackToBaseline();
}

// A hundred requests in one write, answered in order on the one connection; then a batch
// with a bad request in the middle, answered up to it.
TEST_F(HostileClientsTest, PipelinedRequestsAreAnsweredInOrder) {
  RawConnection raw(server_->rest_port());
  std::string burst;
  for (int i = 0; i < 100; ++i)
    burst += RawRequest("POST", kPredict, "{\"instances\": [" + std::to_string(2 * i) + "]}");
  ASSERT_TRUE(raw.Send(burst));
  for (int i = 0; i < 100; ++i) {
    const HttpResult r = raw.ReadResponse();
    ASSERT_EQ(r.status, 200) << i << ": " << r.error;
    ASSERT_EQ(r.body, "{\"predictions\": [" + FormatFloat(static_cast<float>(i) + 2.0f) + "]}");
  }
  std::string mixed = RawRequest("POST", kPredict, R"({"instances": [0]})") +
                      RawRequest("POST", kPredict, "{") + RawRequest("GET", "/v1/models/half");
  ASSERT_TRUE(raw.Send(mixed));
  EXPECT_EQ(raw.ReadResponse().status, 200);
  EXPECT_EQ(raw.ReadResponse().status, 400);
  EXPECT_EQ(raw.ReadResponse().status, 200) << "a 400 for a bad body keeps the connection";
  ExpectHealthyAndBackToBaseline();
}

// Past the process's file descriptor limit accepting fails: the server pauses and retries
// (once every 50 ms) instead of retrying in a loop that burns a core and floods the log, and
// serves again once connections close.
TEST(HostileClientsLimitsTest, OutOfFileDescriptorsPausesAcceptingWithoutSpinning) {
#ifdef LOCKSTEP_SANITIZER_BUILD
  // The sanitizers' runtimes need descriptors of their own: UBSan's vptr check probes memory
  // through a pipe, and with none left it reports every virtual call as one on a bad object
  // ("memory cannot be printed") and aborts the server.
  GTEST_SKIP() << "a process out of file descriptors cannot run the sanitizers' checks";
#endif
  ScratchDir dir;
  WriteHalfPlusTwo(dir.path() / "half", 1);
  ServerProcess server(dir.path(),
                       {"--model_name=half", "--model_base_path=" + (dir.path() / "half").string(),
                        "--rest_api_timeout_in_ms=3000"},
                       /*expect_ready=*/true, {"/usr/bin/prlimit", "--nofile=128:128"});
  ASSERT_TRUE(Contains(server.Log(), "event=open_files_limit_low limit=128")) << server.Log();
  std::vector<std::unique_ptr<RawConnection>> held;
  for (int i = 0; i < 200; ++i) held.push_back(std::make_unique<RawConnection>(server.rest_port()));
  ASSERT_TRUE(
      WaitFor([&] { return Contains(server.Log(), "event=http_accept_failed"); }, std::chrono::seconds(5)))
      << server.Log();
  const double cpu_before = CpuSeconds(server.pid());
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  EXPECT_LT(CpuSeconds(server.pid()) - cpu_before, 0.3) << "the acceptor spins on its failure";
  held.clear();
  EXPECT_TRUE(WaitFor(
      [&] {
        HttpClient client(server.rest_port());
        return client.Post(kPredict, R"({"instances": [1.0]})").body == R"({"predictions": [2.5]})";
      },
      std::chrono::seconds(15)));
  const std::string log = server.Log();
  size_t warnings = 0;
  for (size_t at = log.find("event=http_accept_failed"); at != std::string::npos;
       at = log.find("event=http_accept_failed", at + 1)) {
    ++warnings;
  }
  EXPECT_LE(warnings, 5u) << "one warning per run of failures";
  EXPECT_EQ(server.Stop(), 0);
}

}  // namespace
}  // namespace lockstep::e2e
