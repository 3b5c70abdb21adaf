// Shared by the REST end-to-end tests (rest_*_test.cc): the models, response helpers, a raw
// HTTP connection, a watchdog, and RestApiTest, the fixture of the one shared server.
//
// Most tests share one server (RestApiTest) serving five models from a config file:
//   half_plus_two    y = 0.5 x + 2 with TF Serving's three signatures (version 1)
//   versioned        y = v x, versions 1..3 all served, labels stable=1, canary=2, "pre release"=3
//   multi            several named inputs and outputs, strings, and an identity for floats
//   half plus two    half_plus_two again under a name that must be URL-encoded
//   broken           version 1 is not a bundle, so it shows as END with its error
// Tests of flags that change the transport start their own server (rest_flags_test.cc).
#pragma once

#include <gtest/gtest.h>
#include <poll.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "tests/e2e/server_harness.h"

namespace lockstep::e2e {

using nlohmann::json;
using namespace std::chrono_literals;

// ---- The models ----

// serving_default: a[-1], b[-1] -> sum, product. "echo": a string input returned twice, as
// "text" (plain strings) and "text_bytes" (which TF Serving writes as {"b64": ...}).
// "identity": a float vector returned unchanged, to see how floats are written.
inline Model MultiModel() {
  GraphBuilder g;
  const Shape vector{-1};
  const std::string a = g.Input("a", DType::kFloat32, vector);
  const std::string b = g.Input("b", DType::kFloat32, vector);
  const std::string sum = g.Op("Add", {a, b}, {}, "sum");
  const std::string product = g.Op("Mul", {a, b}, {}, "product");
  g.AddSignature({std::string(kDefaultSignature), "tensorflow/serving/predict",
                  {{"a", a, DType::kFloat32, vector}, {"b", b, DType::kFloat32, vector}},
                  {{"sum", sum, DType::kFloat32, vector}, {"product", product, DType::kFloat32, vector}}});

  const std::string text = g.Input("text", DType::kString, vector);
  const std::string text_out = g.Op("Identity", {text}, {}, "text_out");
  const std::string text_bytes_out = g.Op("Identity", {text}, {}, "text_bytes_out");
  g.AddSignature({"echo", "tensorflow/serving/predict", {{"text", text, DType::kString, vector}},
                  {{"text", text_out, DType::kString, vector},
                   {"text_bytes", text_bytes_out, DType::kString, vector}}});

  const std::string f = g.Input("f", DType::kFloat32, vector);
  const std::string f_out = g.Op("Identity", {f}, {}, "f_out");
  g.AddSignature({"identity", "tensorflow/serving/predict", {{"f", f, DType::kFloat32, vector}},
                  {{"f", f_out, DType::kFloat32, vector}}});
  return std::move(g).Build();
}

inline void WriteModel(const Model& model, const fs::path& dir) {
  BundleWriteOptions options;
  options.overwrite = true;
  const Status s = WriteBundle(model, dir, options);
  ASSERT_TRUE(s.ok()) << s.ToString();
}

// ---- Response helpers ----

inline json ParseBody(const HttpResult& r) {
  json parsed = json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(parsed.is_discarded()) << "not JSON: " << r.body;
  return parsed;
}

// The "error" string of an error response ("" if the body is not {"error": "..."} alone).
inline std::string ErrorOf(const HttpResult& r) {
  const json parsed = json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_object() || parsed.size() != 1 || !parsed.contains("error") || !parsed["error"].is_string()) {
    ADD_FAILURE() << "not an {\"error\": ...} body: " << r.body;
    return "";
  }
  return parsed["error"].get<std::string>();
}

// A response header by lower-case name, "" when absent.
inline std::string HeaderOf(const HttpResult& r, const std::string& name) {
  const auto it = r.headers.find(name);
  return it == r.headers.end() ? "" : it->second;
}

inline bool Contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

// Asserts an error response: its HTTP status, JSON content type, and a part of its message.
#define EXPECT_REST_ERROR(result, http_status, message_part)           \
  do {                                                                 \
    const HttpResult& r_ = (result);                                   \
    EXPECT_EQ(r_.status, (http_status)) << r_.error << " " << r_.body; \
    EXPECT_EQ(HeaderOf(r_, "content-type"), "application/json");       \
    EXPECT_PRED2(Contains, ErrorOf(r_), (message_part));               \
  } while (false)

// ---- A raw HTTP connection, for what a well-behaved client library will not do ----

inline std::string RawRequest(const std::string& method, const std::string& target, const std::string& body = "",
                              const std::string& extra_headers = "") {
  std::string out = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  if (!body.empty() || method == "POST") {
    out += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  out += extra_headers;
  out += "\r\n";
  out += body;
  return out;
}

class RawConnection {
 public:
  explicit RawConnection(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~RawConnection() { Close(); }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool connected() const { return connected_; }
  // Received bytes not yet taken by ReadResponse.
  const std::string& pending() const { return buffer_; }

  // Writes all of `data`; false if the peer is gone. MSG_NOSIGNAL: a closed peer must fail
  // the call, not kill the test binary with SIGPIPE.
  bool Send(std::string_view data) {
    while (!data.empty()) {
      const ssize_t n = send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // Reads one response (an interim 1xx one included); status 0 and `error` on failure.
  HttpResult ReadResponse(std::chrono::milliseconds timeout = 5s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    HttpResult result;
    size_t header_end;
    while ((header_end = buffer_.find("\r\n\r\n")) == std::string::npos) {
      if (!Fill(deadline)) {
        result.error = "no complete response header; got: " + buffer_;
        return result;
      }
    }
    std::istringstream head(buffer_.substr(0, header_end));
    std::string line;
    std::getline(head, line);
    if (line.rfind("HTTP/1.", 0) != 0 || line.size() < 12) {
      result.error = "bad status line: " + line;
      return result;
    }
    result.status = std::stoi(line.substr(9, 3));
    while (std::getline(head, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      const size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string name = line.substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      const size_t value = line.find_first_not_of(' ', colon + 1);
      result.headers[name] = value == std::string::npos ? "" : line.substr(value);
    }
    buffer_.erase(0, header_end + 4);
    if (result.status >= 100 && result.status < 200) return result;
    // The server always sends Content-Length (it never chunks).
    const size_t length = result.headers.count("content-length") ? std::stoul(result.headers["content-length"]) : 0;
    while (buffer_.size() < length) {
      if (!Fill(deadline)) {
        result.status = 0;
        result.error = "body cut short";
        return result;
      }
    }
    result.body = buffer_.substr(0, length);
    buffer_.erase(0, length);
    return result;
  }

  // True once the server has closed the connection (EOF or reset) within `timeout`; bytes
  // that arrive first are kept for ReadResponse.
  bool WaitClosed(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      const int left = static_cast<int>(
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count());
      if (left <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, left) <= 0) continue;
      char chunk[4096];
      const ssize_t n = recv(fd_, chunk, sizeof(chunk), 0);
      if (n <= 0) return true;
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }

  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  bool Fill(std::chrono::steady_clock::time_point deadline) {
    const int left = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count());
    if (left <= 0) return false;
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, left) <= 0) return false;
    char chunk[16384];
    const ssize_t n = recv(fd_, chunk, sizeof(chunk), 0);
    if (n <= 0) return false;
    buffer_.append(chunk, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  bool connected_ = false;
  std::string buffer_;
};

// Stops the server if a test runs longer than `limit`: a client blocked on a server that
// never answers then sees its connection close and fails, instead of hanging the run.
class Watchdog {
 public:
  Watchdog(ServerProcess& server, std::chrono::seconds limit)
      : thread_([this, &server, limit] {
          std::unique_lock<std::mutex> lock(mu_);
          if (done_cv_.wait_for(lock, limit, [this] { return done_; })) return;
          ADD_FAILURE() << "the test ran over " << limit.count() << " s: stopping the server to unblock it";
          server.Stop();
        }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    done_cv_.notify_all();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  std::mutex mu_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::thread thread_;  // last: it uses the members above
};

inline constexpr std::chrono::seconds kTestTimeLimit{15};

// ---- The shared server ----

class RestApiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir();
    const fs::path root = dir_->path();
    WriteHalfPlusTwo(root / "half_plus_two", 1);
    WriteHalfPlusTwo(root / "half_plus_two_spaced", 1);
    for (int v = 1; v <= 3; ++v) WriteVersionModel(root / "versioned", v);
    WriteModel(MultiModel(), root / "multi" / "1");
    fs::create_directories(root / "broken" / "1");
    WriteFile(root / "broken" / "1" / "not_a_bundle.txt", "nothing to load here");

    const auto entry = [&](const std::string& name, const std::string& dir, const std::string& extra = "") {
      return "  config {\n    name: '" + name + "'\n    base_path: '" + (root / dir).string() +
             "'\n    model_platform: 'tensorflow'\n" + extra + "  }\n";
    };
    const std::string config =
        "model_config_list {\n" + entry("half_plus_two", "half_plus_two") +
        entry("versioned", "versioned",
              "    model_version_policy { all {} }\n"
              "    version_labels { key: 'stable' value: 1 }\n"
              "    version_labels { key: 'canary' value: 2 }\n"
              "    version_labels { key: 'pre release' value: 3 }\n") +
        entry("multi", "multi") + entry("half plus two", "half_plus_two_spaced") + entry("broken", "broken") + "}\n";
    WriteFile(root / "models.config", config);
    server_ = new ServerProcess(root, {"--model_config_file=" + (root / "models.config").string(),
                                       "--file_system_poll_wait_seconds=1", "--rest_api_num_threads=4"});
  }

  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    delete dir_;
    dir_ = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    ASSERT_FALSE(server_->Exited()) << server_->Log();
    watchdog_.emplace(*server_, kTestTimeLimit);
  }
  void TearDown() override { watchdog_.reset(); }

  static int port() { return server_->rest_port(); }
  static HttpResult Get(const std::string& target) { return HttpClient(port()).Get(target); }
  static HttpResult Post(const std::string& target, const std::string& body) {
    return HttpClient(port()).Post(target, body);
  }

  static inline ScratchDir* dir_ = nullptr;
  static inline ServerProcess* server_ = nullptr;
  std::optional<Watchdog> watchdog_;
};

inline json OkStatus(const std::string& version) {
  return {{"version", version}, {"state", "AVAILABLE"}, {"status", {{"error_code", "OK"}, {"error_message", ""}}}};
}

}  // namespace lockstep::e2e
