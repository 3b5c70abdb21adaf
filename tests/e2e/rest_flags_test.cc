// The REST flags that shape the transport end to end (CORS, the body size limit, the timeout):
// each test starts its own model-server with the flag.
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tests/e2e/rest_test_util.h"

namespace lockstep::e2e {
namespace {

// ---- Flags that shape the transport: each test starts its own server ----

class RestFlagsTest : public ::testing::Test {
 protected:
  void StartServer(std::vector<std::string> flags) {
    WriteHalfPlusTwo(dir_ / "half_plus_two", 1);
    flags.push_back("--model_name=half_plus_two");
    flags.push_back("--model_base_path=" + (dir_ / "half_plus_two").string());
    server_ = std::make_unique<ServerProcess>(dir_.path(), flags);
    ASSERT_FALSE(server_->Exited()) << server_->Log();
    watchdog_.emplace(*server_, kTestTimeLimit);
  }

  ScratchDir dir_;
  std::unique_ptr<ServerProcess> server_;
  std::optional<Watchdog> watchdog_;  // after server_: destroyed (joined) before it
};

TEST_F(RestFlagsTest, CorsSupportAddsTheHeaders) {
  StartServer({"--rest_api_enable_cors_support"});
  HttpClient client(server_->rest_port());
  const auto check = [](const HttpResult& r) {
    EXPECT_EQ(HeaderOf(r, "access-control-allow-origin"), "*");
    EXPECT_EQ(HeaderOf(r, "access-control-allow-methods"), "POST, GET");
    EXPECT_EQ(HeaderOf(r, "access-control-allow-headers"),
              "Content-Type, Inference-Header-Content-Length, X-Request-Id, X-Routing-Key");
    EXPECT_EQ(HeaderOf(r, "access-control-expose-headers"),
              "Inference-Header-Content-Length, X-Request-Id, X-Model-Version");
  };
  HttpResult r = client.Post("/v1/models/half_plus_two:predict", R"({"instances": [1.0]})");
  EXPECT_EQ(r.status, 200) << r.error << r.body;
  check(r);
  r = client.Get("/v1/models/half_plus_two/metadata");
  EXPECT_EQ(r.status, 200) << r.error;
  check(r);
  // Errors carry them too, or a browser could not read the message.
  r = client.Get("/v1/models/nope");
  EXPECT_EQ(r.status, 404);
  check(r);
  // A browser's preflight is answered, with no body.
  r = client.Request("OPTIONS", "/v1/models/half_plus_two:predict");
  EXPECT_EQ(r.status, 204) << r.error << r.body;
  EXPECT_EQ(r.body, "");
  check(r);

  // A v2 answer with binary outputs, then a preflight on the same connection: the preflight
  // carries no header length of its own.
  const std::string header =
      R"({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1], "parameters": {"binary_data_size": 4}}],)"
      R"( "parameters": {"binary_data_output": true}})";
  const float x = 1.0f;
  r = client.Request("POST", "/v2/models/half_plus_two/infer",
                     header + std::string(reinterpret_cast<const char*>(&x), sizeof(x)),
                     {{"Inference-Header-Content-Length", std::to_string(header.size())}});
  EXPECT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_FALSE(HeaderOf(r, "inference-header-content-length").empty());
  check(r);
  r = client.Request("OPTIONS", "/v2/models/half_plus_two/infer");
  EXPECT_EQ(r.status, 204) << r.error << r.body;
  EXPECT_EQ(HeaderOf(r, "inference-header-content-length"), "");
  check(r);
}

TEST_F(RestFlagsTest, BodiesOverTheLimitAre413) {
  StartServer({"--rest_api_max_request_bytes=1024"});
  const int port = server_->rest_port();
  // Just under the limit is served.
  std::string small = R"({"instances": [)";
  while (small.size() < 1000) small += "1.0, ";
  small += "1.0]}";
  ASSERT_LE(small.size(), 1024u);
  HttpResult r = HttpClient(port).Post("/v1/models/half_plus_two:predict", small);
  EXPECT_EQ(r.status, 200) << r.error << r.body;

  // Over it: 413 with the JSON error, and the connection is closed.
  std::string big = R"({"instances": [)";
  while (big.size() < 4000) big += "1.0, ";
  big += "1.0]}";
  {
    RawConnection connection(port);
    ASSERT_TRUE(connection.connected());
    connection.Send(RawRequest("POST", "/v1/models/half_plus_two:predict", big));
    r = connection.ReadResponse();
    EXPECT_REST_ERROR(r, 413, "larger than the limit of 1024 bytes");
    EXPECT_TRUE(connection.WaitClosed(5s));
  }
  // With Expect: 100-continue the client learns it before sending the body.
  {
    RawConnection connection(port);
    ASSERT_TRUE(connection.Send(
        "POST /v1/models/half_plus_two:predict HTTP/1.1\r\nHost: 127.0.0.1\r\nExpect: 100-continue\r\n"
        "Content-Type: application/json\r\nContent-Length: 10000000\r\n\r\n"));
    r = connection.ReadResponse();
    EXPECT_REST_ERROR(r, 413, "larger than the limit of 1024 bytes");
  }
  // A big body sent without asking first: the client still gets its 413 rather than a reset.
  {
    RawConnection connection(port);
    std::string huge = R"({"instances": [)";
    huge.reserve(1 << 20);
    while (huge.size() < (1 << 20)) huge += "1.0, ";
    huge += "1.0]}";
    connection.Send(RawRequest("POST", "/v1/models/half_plus_two:predict", huge));
    r = connection.ReadResponse();
    EXPECT_REST_ERROR(r, 413, "larger than the limit of 1024 bytes");
  }
  // And the server goes on serving.
  r = HttpClient(port).Post("/v1/models/half_plus_two:predict", R"({"instances": [1.0]})");
  EXPECT_EQ(r.status, 200) << r.error << r.body;
}

// --rest_api_max_connections: with the cap's worth of idle connections open, one more is closed
// at once; when one of them goes, new clients are served again.
TEST_F(RestFlagsTest, ConnectionsOverTheCapAreClosed) {
  StartServer({"--rest_api_max_connections=3"});
  const int port = server_->rest_port();
  std::vector<std::unique_ptr<RawConnection>> idle;
  for (int i = 0; i < 3; ++i) {
    idle.push_back(std::make_unique<RawConnection>(port));
    ASSERT_TRUE(idle.back()->Send(RawRequest("GET", "/v2/health/live")));
    ASSERT_EQ(idle.back()->ReadResponse().status, 200);  // accepted and registered
  }
  RawConnection extra(port);
  EXPECT_TRUE(extra.WaitClosed(5s)) << "a connection over the cap was kept";
  EXPECT_TRUE(WaitFor([&] { return server_->Log().find("event=http_connections_full limit=3") != std::string::npos; }))
      << server_->Log();
  idle.pop_back();  // closing one makes room
  EXPECT_TRUE(WaitFor([&] {
    HttpClient client(port);
    return client.Post("/v1/models/half_plus_two:predict", R"({"instances": [2.0]})").status == 200;
  }));
  for (const auto& connection : idle) {
    ASSERT_TRUE(connection->Send(RawRequest("GET", "/v2/health/live")));
    EXPECT_EQ(connection->ReadResponse().status, 200);
  }
}

TEST_F(RestFlagsTest, TimeoutClosesAStalledConnection) {
  StartServer({"--rest_api_timeout_in_ms=300"});
  const int port = server_->rest_port();
  // A request whose header never ends, and one whose body never comes.
  RawConnection stalled_header(port);
  ASSERT_TRUE(stalled_header.Send("POST /v1/models/half_plus_two:predict HTTP/1.1\r\nHost: 127.0.0.1\r\n"));
  RawConnection stalled_body(port);
  ASSERT_TRUE(stalled_body.Send("POST /v1/models/half_plus_two:predict HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                "Content-Length: 100\r\n\r\n{\"instances\""));
  const auto start = std::chrono::steady_clock::now();

  // Others are served meanwhile.
  HttpClient client(port);
  HttpResult r = client.Post("/v1/models/half_plus_two:predict", R"({"instances": [1.0]})");
  EXPECT_EQ(r.status, 200) << r.error << r.body;

  EXPECT_TRUE(stalled_header.WaitClosed(5s)) << "a stalled header held its connection";
  EXPECT_TRUE(stalled_body.WaitClosed(5s)) << "a stalled body held its connection";
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, 250ms) << "closed before the timeout";
  EXPECT_LT(waited, 4s);

  // An idle keep-alive connection is closed too, after the same time.
  RawConnection idle(port);
  ASSERT_TRUE(idle.Send(RawRequest("GET", "/v1/models/half_plus_two")));
  EXPECT_EQ(idle.ReadResponse().status, 200);
  EXPECT_TRUE(idle.WaitClosed(5s)) << "an idle connection was kept";

  // The server still serves new clients.
  r = HttpClient(port).Post("/v1/models/half_plus_two:predict", R"({"instances": [2.0]})");
  EXPECT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(r.body, R"({"predictions": [3.0]})");
}

}  // namespace
}  // namespace lockstep::e2e
