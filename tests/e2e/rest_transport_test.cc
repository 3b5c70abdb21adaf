// The HTTP transport under the REST API end to end: request ids, keep-alive, HTTP/1.0, chunked
// bodies, pipelining, disconnects, 100-continue and concurrency, on the shared RestApiTest server.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/e2e/rest_test_util.h"

namespace lockstep::e2e {
namespace {

// ---- Transport ----

TEST_F(RestApiTest, RequestIdIsEchoedOrMade) {
  HttpClient client(port());
  HttpResult r = client.Request("GET", "/v1/models/half_plus_two", "", {{"X-Request-Id", "trace-42"}});
  ASSERT_EQ(r.status, 200) << r.error;
  EXPECT_EQ(r.headers.at("x-request-id"), "trace-42");
  // A success without a client id needs none; a failure gets a fresh one each time (it is
  // also in the server's log line about the failure).
  r = client.Get("/v1/models/half_plus_two");
  ASSERT_EQ(r.status, 200) << r.error;
  EXPECT_EQ(r.headers.count("x-request-id"), 0u);
  r = client.Get("/v1/models/nope");
  ASSERT_EQ(r.status, 404) << r.error;
  const std::string first = r.headers.at("x-request-id");
  EXPECT_FALSE(first.empty());
  r = client.Get("/v1/models/nope");
  EXPECT_NE(r.headers.at("x-request-id"), first);
  // An unusable client id (a space in it) is replaced, not echoed.
  r = client.Request("GET", "/v1/models/nope", "", {{"X-Request-Id", "a b"}});
  EXPECT_NE(r.headers.at("x-request-id"), "a b");
}

TEST_F(RestApiTest, KeepAliveServesManyRequestsOnOneConnection) {
  RawConnection connection(port());
  ASSERT_TRUE(connection.connected());
  for (int i = 0; i < 100; ++i) {
    const std::string body = R"({"instances": [)" + std::to_string(2 * i) + "]}";
    ASSERT_TRUE(connection.Send(RawRequest("POST", "/v1/models/half_plus_two:predict", body))) << i;
    const HttpResult r = connection.ReadResponse();
    ASSERT_EQ(r.status, 200) << i << " " << r.error << r.body;
    EXPECT_EQ(r.body, R"({"predictions": [)" + std::to_string(i + 2) + ".0]}");
    EXPECT_EQ(r.headers.count("connection"), 0u) << "HTTP/1.1 keeps the connection open by default";
  }
  // Errors do not end the connection either.
  ASSERT_TRUE(connection.Send(RawRequest("POST", "/v1/models/half_plus_two:predict", "{")));
  EXPECT_EQ(connection.ReadResponse().status, 400);
  ASSERT_TRUE(connection.Send(RawRequest("GET", "/v1/models/nope")));
  EXPECT_EQ(connection.ReadResponse().status, 404);
  ASSERT_TRUE(connection.Send(RawRequest("GET", "/v1/models/half_plus_two")));
  EXPECT_EQ(connection.ReadResponse().status, 200);
}

TEST_F(RestApiTest, ConnectionCloseIsHonoured) {
  RawConnection connection(port());
  ASSERT_TRUE(connection.connected());
  ASSERT_TRUE(connection.Send(
      RawRequest("POST", "/v1/models/half_plus_two:predict", R"({"instances": [1.0]})", "Connection: close\r\n")));
  const HttpResult r = connection.ReadResponse();
  ASSERT_EQ(r.status, 200) << r.error;
  EXPECT_EQ(r.body, R"({"predictions": [2.5]})");
  EXPECT_EQ(r.headers.at("connection"), "close");
  EXPECT_TRUE(connection.WaitClosed(5s)) << "the server kept the connection open";
}

TEST_F(RestApiTest, Http10ClosesUnlessKeptAlive) {
  RawConnection kept(port());
  ASSERT_TRUE(kept.connected());
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(kept.Send("GET /v1/models/half_plus_two HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
    const HttpResult r = kept.ReadResponse();
    ASSERT_EQ(r.status, 200) << r.error;
    EXPECT_EQ(ParseBody(r), json({{"model_version_status", json::array({OkStatus("1")})}}));
  }
  RawConnection closed(port());
  ASSERT_TRUE(closed.connected());
  ASSERT_TRUE(closed.Send("GET /v1/models/half_plus_two HTTP/1.0\r\n\r\n"));
  EXPECT_EQ(closed.ReadResponse().status, 200);
  EXPECT_TRUE(closed.WaitClosed(5s));
}

TEST_F(RestApiTest, ChunkedRequestBody) {
  RawConnection connection(port());
  ASSERT_TRUE(connection.connected());
  ASSERT_TRUE(connection.Send("POST /v1/models/half_plus_two:predict HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                              "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                              "f\r\n{\"instances\": [\r\n9\r\n1.0, 2.0]\r\n1\r\n}\r\n0\r\n\r\n"));
  const HttpResult r = connection.ReadResponse();
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(r.body, R"({"predictions": [2.5, 3.0]})");
}

TEST_F(RestApiTest, LargeRequestAndResponse) {
  // About 1.3 MB each way: the response needs many writes, the request many reads.
  constexpr int kCount = 200000;
  std::string body = R"({"instances": [)";
  std::string expected = R"({"predictions": [)";
  for (int i = 0; i < kCount; ++i) {
    body += (i ? ", " : "") + std::to_string(i % 1000) + ".0";
    const int k = i % 1000;  // 0.5 k + 2
    expected += (i ? ", " : "") + std::to_string(k / 2 + 2) + (k % 2 ? ".5" : ".0");
  }
  body += "]}";
  expected += "]}";
  HttpClient client(port());
  const HttpResult r = client.Post("/v1/models/half_plus_two:predict", body);
  ASSERT_EQ(r.status, 200) << r.error << r.body.substr(0, 200);
  EXPECT_TRUE(r.body == expected) << "the response differs; it starts " << r.body.substr(0, 200);
}

TEST_F(RestApiTest, MalformedHttpIs400AndOversizedHeaderIs431) {
  {
    RawConnection connection(port());
    ASSERT_TRUE(connection.Send("this is not HTTP\r\n\r\n"));
    const HttpResult r = connection.ReadResponse();
    EXPECT_REST_ERROR(r, 400, "Malformed HTTP request");
    EXPECT_TRUE(connection.WaitClosed(5s));
  }
  {
    RawConnection connection(port());
    ASSERT_TRUE(connection.Send("POST /v1/models/half_plus_two:predict HTTP/1.1\r\nContent-Length: x\r\n\r\n"));
    EXPECT_REST_ERROR(connection.ReadResponse(), 400, "Malformed HTTP request");
  }
  {
    RawConnection connection(port());
    connection.Send(RawRequest("GET", "/v1/models/half_plus_two", "", "X-Big: " + std::string(20000, 'a') + "\r\n"));
    EXPECT_REST_ERROR(connection.ReadResponse(), 431, "request header is too large");
  }
  EXPECT_EQ(Get("/v1/models/half_plus_two").status, 200);
}

TEST_F(RestApiTest, PipelinedRequestsAreAnsweredInOrder) {
  RawConnection connection(port());
  ASSERT_TRUE(connection.connected());
  // Three requests in one send, an error among them; then three more, the last closing.
  std::string batch = RawRequest("POST", "/v1/models/half_plus_two:predict", R"({"instances": [1.0]})") +
                      RawRequest("GET", "/v1/models/versioned/versions/2") +
                      RawRequest("POST", "/v1/models/half_plus_two:predict", R"({"instances": "bad"})");
  ASSERT_TRUE(connection.Send(batch));
  HttpResult r = connection.ReadResponse();
  ASSERT_EQ(r.status, 200) << r.error;
  EXPECT_EQ(r.body, R"({"predictions": [2.5]})");
  r = connection.ReadResponse();
  ASSERT_EQ(r.status, 200) << r.error;
  EXPECT_EQ(ParseBody(r), json({{"model_version_status", json::array({OkStatus("2")})}}));
  r = connection.ReadResponse();
  EXPECT_REST_ERROR(r, 400, "Expecting 'instances' to be an list/array");

  // A request pipelined after "Connection: close" is not answered.
  batch.clear();
  for (int i = 1; i <= 3; ++i) {
    batch += RawRequest("POST", "/v1/models/versioned/versions/" + std::to_string(i) + ":predict",
                        R"({"instances": [10.0]})", i == 3 ? "Connection: close\r\n" : "");
  }
  batch += RawRequest("GET", "/v1/models/half_plus_two");
  ASSERT_TRUE(connection.Send(batch));
  for (int i = 1; i <= 3; ++i) {
    r = connection.ReadResponse();
    ASSERT_EQ(r.status, 200) << i << " " << r.error;
    EXPECT_EQ(r.headers.at("x-model-version"), std::to_string(i));
    EXPECT_EQ(r.body, R"({"predictions": [)" + std::to_string(10 * i) + ".0]}");
  }
  EXPECT_TRUE(connection.WaitClosed(5s));
  EXPECT_EQ(connection.pending(), "");
}

TEST_F(RestApiTest, ClientThatDisconnectsMidRequestDoesNotHurtOthers) {
  const std::string body = R"({"instances": [1.0, 2.0, 5.0]})";
  for (int i = 0; i < 5; ++i) {
    // Half a body, then gone.
    RawConnection half_body(port());
    ASSERT_TRUE(half_body.connected());
    const std::string request = RawRequest("POST", "/v1/models/half_plus_two:predict", body);
    ASSERT_TRUE(half_body.Send(request.substr(0, request.size() - body.size() / 2)));
    half_body.Close();
    // Half a header, then gone.
    RawConnection half_header(port());
    ASSERT_TRUE(half_header.connected());
    ASSERT_TRUE(half_header.Send("POST /v1/models/half_plus_two:predict HTTP/1.1\r\nContent-Le"));
    half_header.Close();
  }
  // A client that is gone before its answer is written.
  {
    RawConnection early(port());
    ASSERT_TRUE(early.Send(RawRequest("POST", "/v1/models/half_plus_two:predict", body)));
  }
  HttpClient client(port());
  const HttpResult r = client.Post("/v1/models/half_plus_two:predict", body);
  EXPECT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(r.body, R"({"predictions": [2.5, 3.0, 4.5]})");
  EXPECT_FALSE(server_->Exited()) << server_->Log();
}

TEST_F(RestApiTest, Expect100Continue) {
  RawConnection connection(port());
  ASSERT_TRUE(connection.connected());
  const std::string body = R"({"instances": [1.0, 2.0]})";
  ASSERT_TRUE(connection.Send("POST /v1/models/half_plus_two:predict HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                              "Content-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: " +
                              std::to_string(body.size()) + "\r\n\r\n"));
  HttpResult r = connection.ReadResponse();
  ASSERT_EQ(r.status, 100) << r.error;
  ASSERT_TRUE(connection.Send(body));
  r = connection.ReadResponse();
  ASSERT_EQ(r.status, 200) << r.error;
  EXPECT_EQ(r.body, R"({"predictions": [2.5, 3.0]})");
  // The connection goes on.
  ASSERT_TRUE(connection.Send(RawRequest("GET", "/v1/models/half_plus_two")));
  EXPECT_EQ(connection.ReadResponse().status, 200);
}

TEST_F(RestApiTest, ManyConcurrentClientsAllGetTheirOwnAnswers) {
  constexpr int kThreads = 16;
  constexpr int kRequestsPerThread = 50;
  std::atomic<int> ok{0};
  std::mutex mu;
  std::vector<std::string> failures;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Even threads keep one connection; odd threads open a new one for every request.
      std::optional<HttpClient> kept;
      if (t % 2 == 0) kept.emplace(port());
      for (int i = 0; i < kRequestsPerThread; ++i) {
        // Every request is distinct, so a mixed-up answer shows.
        const int x = t * 1000 + i;
        std::optional<HttpClient> fresh;
        HttpClient& client = kept ? *kept : fresh.emplace(port());
        HttpResult r;
        std::string expected;
        if (i % 3 == 2) {
          r = client.Post("/v1/models/multi:predict",
                          R"({"inputs": {"a": [)" + std::to_string(x) + R"(], "b": [2]}})");
          expected = R"({"outputs": {"sum": [)" + std::to_string(x + 2) + R"(.0], "product": [)" +
                     std::to_string(2 * x) + ".0]}}";
        } else {
          r = client.Post("/v1/models/versioned/versions/" + std::to_string(i % 3 + 1) + ":predict",
                          R"({"instances": [)" + std::to_string(x) + "]}");
          expected = R"({"predictions": [)" + std::to_string((i % 3 + 1) * x) + ".0]}";
        }
        if (r.status == 200 && r.body == expected) {
          ++ok;
        } else {
          std::lock_guard<std::mutex> lock(mu);
          failures.push_back(std::to_string(r.status) + " " + r.error + " " + r.body + " (expected " + expected + ")");
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok.load(), kThreads * kRequestsPerThread);
  for (size_t i = 0; i < std::min<size_t>(failures.size(), 5); ++i) ADD_FAILURE() << failures[i];
}

}  // namespace
}  // namespace lockstep::e2e
