// The REST API end to end: every path, body form and error case of TF Serving's REST API,
// and the HTTP transport under it (keep-alive, pipelining, 100-continue, disconnects,
// concurrency, CORS, size and time limits), against the real model-server binary.
//
// Most tests share one server (RestApiTest) serving five models from a config file:
//   half_plus_two    y = 0.5 x + 2 with TF Serving's three signatures (version 1)
//   versioned        y = v x, versions 1..3 all served, labels stable=1, canary=2, "pre release"=3
//   multi            several named inputs and outputs, strings, and an identity for floats
//   half plus two    half_plus_two again under a name that must be URL-encoded
//   broken           version 1 is not a bundle, so it shows as END with its error
// Tests of flags that change the transport start their own server.
#include <gtest/gtest.h>
#include <poll.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "tests/e2e/server_harness.h"

namespace lockstep::e2e {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// ---- The models ----

// serving_default: a[-1], b[-1] -> sum, product. "echo": a string input returned twice, as
// "text" (plain strings) and "text_bytes" (which TF Serving writes as {"b64": ...}).
// "identity": a float vector returned unchanged, to see how floats are written.
Model MultiModel() {
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

void WriteModel(const Model& model, const fs::path& dir) {
  BundleWriteOptions options;
  options.overwrite = true;
  const Status s = WriteBundle(model, dir, options);
  ASSERT_TRUE(s.ok()) << s.ToString();
}

// ---- Response helpers ----

json ParseBody(const HttpResult& r) {
  json parsed = json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(parsed.is_discarded()) << "not JSON: " << r.body;
  return parsed;
}

// The "error" string of an error response ("" if the body is not {"error": "..."} alone).
std::string ErrorOf(const HttpResult& r) {
  const json parsed = json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_object() || parsed.size() != 1 || !parsed.contains("error") || !parsed["error"].is_string()) {
    ADD_FAILURE() << "not an {\"error\": ...} body: " << r.body;
    return "";
  }
  return parsed["error"].get<std::string>();
}

// A response header by lower-case name, "" when absent.
std::string HeaderOf(const HttpResult& r, const std::string& name) {
  const auto it = r.headers.find(name);
  return it == r.headers.end() ? "" : it->second;
}

bool Contains(std::string_view haystack, std::string_view needle) {
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

std::string RawRequest(const std::string& method, const std::string& target, const std::string& body = "",
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

// The float tokens of a JSON list of numbers, as the server wrote them.
std::vector<std::string> NumberTokens(std::string_view list) {
  std::vector<std::string> tokens;
  std::string current;
  for (char c : list) {
    if (c == '[' || c == ']' || c == ' ') continue;
    if (c == ',') {
      tokens.push_back(current);
      current.clear();
    } else {
      current += c;
    }
  }
  if (!current.empty()) tokens.push_back(current);
  return tokens;
}

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

constexpr std::chrono::seconds kTestTimeLimit{15};

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

json OkStatus(const std::string& version) {
  return {{"version", version}, {"state", "AVAILABLE"}, {"status", {{"error_code", "OK"}, {"error_message", ""}}}};
}

// model_version_status sorted by version: the order is not part of the API.
json SortedVersions(json status) {
  json list = status.at("model_version_status");
  std::sort(list.begin(), list.end(), [](const json& a, const json& b) {
    return std::stoll(a.at("version").get<std::string>()) < std::stoll(b.at("version").get<std::string>());
  });
  return list;
}

// ---- GET status ----

TEST_F(RestApiTest, StatusOfTheOnlyVersionIsExactlyTfServingsJson) {
  const HttpResult r = Get("/v1/models/half_plus_two");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(r.headers.at("content-type"), "application/json");
  EXPECT_EQ(ParseBody(r), json({{"model_version_status", json::array({OkStatus("1")})}}));
  // Status requests are served by no particular version.
  EXPECT_EQ(r.headers.count("x-model-version"), 0u);
  // No CORS headers unless asked for.
  EXPECT_EQ(r.headers.count("access-control-allow-origin"), 0u);
}

TEST_F(RestApiTest, StatusListsAllVersions) {
  const HttpResult r = Get("/v1/models/versioned");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  const json body = ParseBody(r);
  ASSERT_EQ(body.size(), 1u) << r.body;
  EXPECT_EQ(SortedVersions(body), json::array({OkStatus("1"), OkStatus("2"), OkStatus("3")}));
}

TEST_F(RestApiTest, StatusOfOneVersion) {
  const HttpResult r = Get("/v1/models/versioned/versions/2");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(ParseBody(r), json({{"model_version_status", json::array({OkStatus("2")})}}));
}

TEST_F(RestApiTest, StatusByLabel) {
  HttpResult r = Get("/v1/models/versioned/labels/stable");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(ParseBody(r), json({{"model_version_status", json::array({OkStatus("1")})}}));
  r = Get("/v1/models/versioned/labels/canary");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(ParseBody(r), json({{"model_version_status", json::array({OkStatus("2")})}}));
  // Labels are URL-decoded.
  r = Get("/v1/models/versioned/labels/pre%20release");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(ParseBody(r), json({{"model_version_status", json::array({OkStatus("3")})}}));
}

TEST_F(RestApiTest, StatusOfAFailedVersionCarriesItsError) {
  const HttpResult r = Get("/v1/models/broken");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  const json body = ParseBody(r);
  ASSERT_EQ(body.at("model_version_status").size(), 1u) << r.body;
  const json& v = body["model_version_status"][0];
  EXPECT_EQ(v.at("version"), "1");
  EXPECT_EQ(v.at("state"), "END");
  ASSERT_TRUE(v.at("status").at("error_code").is_string()) << r.body;
  EXPECT_NE(v["status"]["error_code"], "OK") << r.body;
  EXPECT_FALSE(v["status"].at("error_message").get<std::string>().empty()) << r.body;
  // And nothing serves it.
  EXPECT_REST_ERROR(Post("/v1/models/broken:predict", R"({"instances": [1.0]})"), 404,
                    "Servable not found for request: Latest(broken)");
}

TEST_F(RestApiTest, StatusOfUnknownModelVersionOrLabelIs404) {
  EXPECT_REST_ERROR(Get("/v1/models/nope"), 404, "Could not find any versions of model nope");
  EXPECT_REST_ERROR(Get("/v1/models/versioned/versions/9"), 404, "Could not find version 9 of model versioned");
  EXPECT_REST_ERROR(Get("/v1/models/versioned/labels/nope"), 404, "Unrecognized servable version label: nope");
  EXPECT_REST_ERROR(Get("/v1/models/nope/labels/stable"), 404, "Unrecognized servable version label: stable");
}

TEST_F(RestApiTest, MissingModelNameIs400) {
  EXPECT_REST_ERROR(Get("/v1/models"), 400, "Missing model name in request.");
  EXPECT_REST_ERROR(Get("/v1/models/"), 400, "Missing model name in request.");
  EXPECT_REST_ERROR(Post("/v1/models:predict", R"({"instances": [1.0]})"), 400, "Malformed request");
}

TEST_F(RestApiTest, VersionAndLabelTogetherAre400) {
  const std::string message = "Both model version (1) and model version label (stable) cannot be supplied.";
  EXPECT_REST_ERROR(Get("/v1/models/versioned/versions/1/labels/stable"), 400, message);
  EXPECT_REST_ERROR(Get("/v1/models/versioned/versions/1/labels/stable/metadata"), 400, message);
  EXPECT_REST_ERROR(Post("/v1/models/versioned/versions/1/labels/stable:predict", R"({"instances": [1.0]})"), 400,
                    message);
}

TEST_F(RestApiTest, MalformedPathsAre400) {
  for (const std::string target :
       {"/v1/models/versioned/versions/abc", "/v1/models/versioned/versions/-1", "/v1/models/versioned/versions/1a",
        "/v1/models/versioned/versions/", "/v1/models/versioned/labels/", "/v1/models/versioned/bogus",
        "/v1/models/versioned/metadata/extra", "/v1/models/half_plus_two:predict"}) {
    SCOPED_TRACE(target);
    EXPECT_REST_ERROR(Get(target), 400, "Malformed request");
  }
  EXPECT_REST_ERROR(Post("/v1/models/half_plus_two:explain", "{}"), 400, "Malformed request");
  EXPECT_REST_ERROR(Post("/v1/models/half_plus_two/versions/x:predict", R"({"instances": [1.0]})"), 400,
                    "Malformed request");
  // Outside /v1/ nothing is served.
  const HttpResult outside = Get("/v2/models/half_plus_two");
  EXPECT_EQ(outside.status, 404) << outside.body;
}

TEST_F(RestApiTest, PathsMatchCaseInsensitively) {
  HttpResult r = Get("/V1/MODELS/versioned/VERSIONS/2");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(ParseBody(r), json({{"model_version_status", json::array({OkStatus("2")})}}));
  r = Get("/v1/Models/versioned/Labels/canary/METADATA");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(ParseBody(r).at("model_spec").at("version"), "2");
  r = Post("/V1/models/half_plus_two:PREDICT", R"({"instances": [1.0]})");
  EXPECT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(r.body, R"({"predictions": [2.5]})");
  r = Post("/v1/MODELS/half_plus_two:Regress", R"({"signature_name": "regress_x_to_y", "examples": [{"x": 1.0}]})");
  EXPECT_EQ(r.status, 200) << r.error << r.body;
  // The model name itself is not a path keyword: it is matched as written.
  EXPECT_REST_ERROR(Get("/v1/models/HALF_PLUS_TWO"), 404, "HALF_PLUS_TWO");
}

TEST_F(RestApiTest, ModelNameIsUrlDecoded) {
  HttpResult r = Get("/v1/models/half%20plus%20two");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(ParseBody(r), json({{"model_version_status", json::array({OkStatus("1")})}}));
  r = Post("/v1/models/half%20plus%20two:predict", R"({"instances": [1.0, 2.0]})");
  EXPECT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(r.body, R"({"predictions": [2.5, 3.0]})");
  r = Get("/v1/models/half%20plus%20two/metadata");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(ParseBody(r).at("model_spec").at("name"), "half plus two");
  // Lower-case hex too; a broken escape is a malformed path.
  EXPECT_EQ(Get("/v1/models/half_plus%5ftwo").status, 200);
  EXPECT_REST_ERROR(Get("/v1/models/half%2"), 400, "Malformed request");
  EXPECT_REST_ERROR(Get("/v1/models/half%zztwo"), 400, "Malformed request");
}

TEST_F(RestApiTest, QueryStringIsIgnored) {
  const HttpResult r = Post("/v1/models/half_plus_two:predict?debug=1", R"({"instances": [1.0]})");
  EXPECT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(r.body, R"({"predictions": [2.5]})");
}

// ---- GET metadata ----

TEST_F(RestApiTest, MetadataHasTheThreeSignaturesOfHalfPlusTwo) {
  const HttpResult r = Get("/v1/models/half_plus_two/metadata");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  const json body = ParseBody(r);
  ASSERT_EQ(body.size(), 2u) << r.body;
  EXPECT_EQ(body.at("model_spec"), json({{"name", "half_plus_two"}, {"signature_name", ""}, {"version", "1"}}));
  const json& metadata = body.at("metadata");
  ASSERT_EQ(metadata.size(), 1u) << r.body;
  // The double nesting is TF Serving's: metadata.signature_def is a SignatureDefMap.
  const json& signatures = metadata.at("signature_def").at("signature_def");
  std::set<std::string> names;
  for (const auto& [name, def] : signatures.items()) names.insert(name);
  EXPECT_EQ(names, (std::set<std::string>{"serving_default", "regress_x_to_y", "classify_x_to_y"}));

  const json vector_shape = {{"dim", json::array({{{"size", "-1"}, {"name", ""}}})}, {"unknown_rank", false}};
  const auto check_info = [&](const json& info, const json& shape) {
    EXPECT_EQ(info.at("dtype"), "DT_FLOAT") << info;
    EXPECT_EQ(info.at("tensor_shape"), shape) << info;
    EXPECT_TRUE(info.at("name").is_string()) << info;
  };
  const json& predict = signatures.at("serving_default");
  EXPECT_EQ(predict.at("method_name"), "tensorflow/serving/predict");
  ASSERT_EQ(predict.at("inputs").size(), 1u);
  check_info(predict["inputs"].at("x"), vector_shape);
  ASSERT_EQ(predict.at("outputs").size(), 1u);
  check_info(predict["outputs"].at("y"), vector_shape);

  const json& regress = signatures.at("regress_x_to_y");
  EXPECT_EQ(regress.at("method_name"), "tensorflow/serving/regress");
  check_info(regress.at("inputs").at("x"), vector_shape);
  check_info(regress.at("outputs").at("outputs"), vector_shape);

  const json& classify = signatures.at("classify_x_to_y");
  EXPECT_EQ(classify.at("method_name"), "tensorflow/serving/classify");
  check_info(classify.at("inputs").at("x"), vector_shape);
  const json matrix_shape = {{"dim", json::array({{{"size", "-1"}, {"name", ""}}, {{"size", "1"}, {"name", ""}}})},
                             {"unknown_rank", false}};
  check_info(classify.at("outputs").at("scores"), matrix_shape);
}

TEST_F(RestApiTest, MetadataOfAVersionOrLabel) {
  HttpResult r = Get("/v1/models/versioned/versions/3/metadata");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(ParseBody(r).at("model_spec").at("version"), "3");
  r = Get("/v1/models/versioned/labels/stable/metadata");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(ParseBody(r).at("model_spec").at("version"), "1");
  r = Get("/v1/models/versioned/metadata");  // latest
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(ParseBody(r).at("model_spec").at("version"), "3");

  EXPECT_REST_ERROR(Get("/v1/models/nope/metadata"), 404, "Servable not found for request: Latest(nope)");
  EXPECT_REST_ERROR(Get("/v1/models/versioned/versions/7/metadata"), 404,
                    "Servable not found for request: Specific(versioned, 7)");
  EXPECT_REST_ERROR(Get("/v1/models/versioned/labels/nope/metadata"), 404,
                    "Unrecognized servable version label: nope");
}

TEST_F(RestApiTest, MetadataOfSeveralInputsAndStrings) {
  const HttpResult r = Get("/v1/models/multi/metadata");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  const json signatures = ParseBody(r).at("metadata").at("signature_def").at("signature_def");
  const json& predict = signatures.at("serving_default");
  EXPECT_EQ(predict.at("inputs").size(), 2u);
  EXPECT_EQ(predict.at("inputs").at("b").at("dtype"), "DT_FLOAT");
  EXPECT_EQ(predict.at("outputs").size(), 2u);
  EXPECT_TRUE(predict.at("outputs").contains("product"));
  EXPECT_EQ(signatures.at("echo").at("inputs").at("text").at("dtype"), "DT_STRING");
}

// ---- POST :predict ----

TEST_F(RestApiTest, PredictRowForm) {
  const HttpResult r = Post("/v1/models/half_plus_two:predict", R"({"instances": [1.0, 2.0, 5.0]})");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(r.body, R"({"predictions": [2.5, 3.0, 4.5]})");
  EXPECT_EQ(r.headers.at("content-type"), "application/json");
  EXPECT_EQ(r.headers.at("x-model-version"), "1");
  // Each instance may also name the single input.
  const HttpResult named = Post("/v1/models/half_plus_two:predict", R"({"instances": [{"x": 1.0}, {"x": 5.0}]})");
  ASSERT_EQ(named.status, 200) << named.error << named.body;
  EXPECT_EQ(named.body, R"({"predictions": [2.5, 4.5]})");
}

TEST_F(RestApiTest, PredictColumnarForm) {
  HttpResult r = Post("/v1/models/half_plus_two:predict", R"({"inputs": [1.0, 2.0, 5.0]})");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(r.body, R"({"outputs": [2.5, 3.0, 4.5]})");
  r = Post("/v1/models/half_plus_two:predict", R"({"inputs": {"x": [1.0, 2.0]}})");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(r.body, R"({"outputs": [2.5, 3.0]})");
  EXPECT_EQ(r.headers.at("x-model-version"), "1");
}

TEST_F(RestApiTest, PredictWithSignatureName) {
  // regress_x_to_y's output is [N]; classify_x_to_y's is [N, 1].
  HttpResult r = Post("/v1/models/half_plus_two:predict",
                      R"({"signature_name": "regress_x_to_y", "instances": [1.0, 2.0]})");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(r.body, R"({"predictions": [2.5, 3.0]})");
  r = Post("/v1/models/half_plus_two:predict", R"({"signature_name": "classify_x_to_y", "inputs": [1.0, 2.0]})");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(r.body, R"({"outputs": [[2.5], [3.0]]})");
  r = Post("/v1/models/half_plus_two:predict", R"({"signature_name": "serving_default", "instances": [0.0]})");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(r.body, R"({"predictions": [2.0]})");
}

TEST_F(RestApiTest, PredictOnAVersionOrLabelSaysWhichVersionServed) {
  const auto predict = [](const std::string& target) {
    return Post(target, R"({"instances": [1.0]})");
  };
  HttpResult r = predict("/v1/models/versioned:predict");  // the latest
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(r.body, R"({"predictions": [3.0]})");
  EXPECT_EQ(r.headers.at("x-model-version"), "3");
  r = predict("/v1/models/versioned/versions/2:predict");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(r.body, R"({"predictions": [2.0]})");
  EXPECT_EQ(r.headers.at("x-model-version"), "2");
  r = predict("/v1/models/versioned/labels/stable:predict");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(r.body, R"({"predictions": [1.0]})");
  EXPECT_EQ(r.headers.at("x-model-version"), "1");
  r = predict("/v1/models/versioned/labels/pre%20release:predict");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(r.headers.at("x-model-version"), "3");

  r = predict("/v1/models/versioned/versions/4:predict");
  EXPECT_REST_ERROR(r, 404, "Servable not found for request: Specific(versioned, 4)");
  EXPECT_EQ(r.headers.count("x-model-version"), 0u);
  EXPECT_REST_ERROR(predict("/v1/models/versioned/labels/beta:predict"), 404,
                    "Unrecognized servable version label: beta");
  EXPECT_REST_ERROR(predict("/v1/models/nope:predict"), 404, "Servable not found for request: Latest(nope)");
}

TEST_F(RestApiTest, PredictSeveralNamedInputsRowFormIsAListOfObjects) {
  const HttpResult r = Post("/v1/models/multi:predict", R"({"instances": [{"a": 1.0, "b": 2.0}, {"a": 3, "b": 4}]})");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(r.headers.at("x-model-version"), "1");
  const json body = ParseBody(r);
  EXPECT_EQ(body, json::parse(R"({"predictions": [{"sum": 3.0, "product": 2.0}, {"sum": 7.0, "product": 12.0}]})"));
  // Whole numbers print with ".0", also inside the objects.
  EXPECT_TRUE(Contains(r.body, "\"sum\": 3.0")) << r.body;
}

TEST_F(RestApiTest, PredictSeveralNamedInputsColumnarFormIsAnObject) {
  const HttpResult r = Post("/v1/models/multi:predict", R"({"inputs": {"a": [1.0, 2.0, 3.0], "b": [4, 5, 6]}})");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(ParseBody(r), json::parse(R"({"outputs": {"sum": [5.0, 7.0, 9.0], "product": [4.0, 10.0, 18.0]}})"));
}

TEST_F(RestApiTest, PredictSeveralInputsNeedsThemNamed) {
  EXPECT_REST_ERROR(Post("/v1/models/multi:predict", R"({"instances": [1.0, 2.0]})"), 400,
                    "each instance must be an object naming them");
  EXPECT_REST_ERROR(Post("/v1/models/multi:predict", R"({"inputs": [1.0, 2.0]})"), 400,
                    "'inputs' must be an object naming them");
  EXPECT_REST_ERROR(Post("/v1/models/multi:predict", R"({"instances": [{"a": 1.0}]})"), 400,
                    "Missing named input: b");
  EXPECT_REST_ERROR(Post("/v1/models/multi:predict", R"({"inputs": {"b": [1.0]}})"), 400, "Missing named input: a");
  EXPECT_REST_ERROR(Post("/v1/models/multi:predict", R"({"instances": [{"a": 1.0, "b": 2.0}, 3.0]})"), 400,
                    "Expecting object but got number at item 1");
}

TEST_F(RestApiTest, PredictStringsInAndBytesOut) {
  // Plain strings and {"b64": ...} both feed a string input; "text" comes back as strings,
  // "text_bytes" as {"b64": ...}.
  HttpResult r = Post("/v1/models/multi:predict",
                      R"({"signature_name": "echo", "instances": ["hello", {"b64": "d29ybGQ="}]})");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(ParseBody(r), json::parse(R"({"predictions": [
      {"text": "hello", "text_bytes": {"b64": "aGVsbG8="}},
      {"text": "world", "text_bytes": {"b64": "d29ybGQ="}}]})"));

  // Bytes that are not text survive the round trip through b64.
  r = Post("/v1/models/multi:predict", R"({"signature_name": "echo", "inputs": {"text": [{"b64": "AP8QgA=="}]}})");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  const json body = ParseBody(r);
  EXPECT_EQ(body.at("outputs").at("text_bytes"), json::parse(R"([{"b64": "AP8QgA=="}])")) << r.body;
}

TEST_F(RestApiTest, PredictB64Errors) {
  EXPECT_REST_ERROR(Post("/v1/models/half_plus_two:predict", R"({"instances": [{"b64": "AAAA"}]})"), 400,
                    "can only be used with DT_STRING");
  EXPECT_REST_ERROR(Post("/v1/models/multi:predict", R"({"signature_name": "echo", "instances": [{"b64": "a=b"}]})"),
                    400, "invalid base64");
  EXPECT_REST_ERROR(Post("/v1/models/multi:predict", R"({"signature_name": "echo", "instances": [{"b64": 5}]})"), 400,
                    "\"b64\" must be a string");
  EXPECT_REST_ERROR(Post("/v1/models/multi:predict", R"({"signature_name": "echo", "instances": [7]})"), 400,
                    "expected a string");
}

TEST_F(RestApiTest, OutputFloatsPrintShortestRoundTripText) {
  const HttpResult r = Post("/v1/models/multi:predict",
                            R"({"signature_name": "identity", "inputs": [0.1, 1.0, 3, -2.0, 2.5, 16777216, 1e-7,
                                0.3333333432674408, 1.2345678, 100, 3.4028234663852886e38]})");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  ASSERT_TRUE(r.body.starts_with(R"({"outputs": [)")) << r.body;
  const std::vector<std::string> tokens = NumberTokens(r.body.substr(12, r.body.size() - 13));
  const std::vector<std::string> expected = {"0.1",        "1.0",       "3.0",   "-2.0",
                                             "2.5",        "16777216.0", "1e-07", "0.33333334",
                                             "1.2345678",  "100.0",     "3.4028235e+38"};
  EXPECT_EQ(tokens, expected) << r.body;
  // Every token reads back as the float that was sent, bit for bit.
  const std::vector<float> sent = {0.1f, 1.0f, 3.0f, -2.0f, 2.5f, 16777216.0f, 1e-7f, 1.0f / 3.0f, 1.2345678f, 100.0f,
                                   3.4028234663852886e38f};
  ASSERT_EQ(tokens.size(), sent.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    float back = 0;
    std::from_chars(tokens[i].data(), tokens[i].data() + tokens[i].size(), back);
    EXPECT_EQ(back, sent[i]) << tokens[i];
  }
}

TEST_F(RestApiTest, NanAndInfinityGoInAndComeOut) {
  HttpResult r = Post("/v1/models/multi:predict",
                      R"({"signature_name": "identity", "instances": [NaN, Infinity, -Infinity, 1.5]})");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(r.body, R"({"predictions": [NaN, Infinity, -Infinity, 1.5]})");
  // Through arithmetic too: 0.5 * inf + 2.
  r = Post("/v1/models/half_plus_two:predict", R"({"inputs": {"x": [-Infinity, NaN]}})");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(r.body, R"({"outputs": [-Infinity, NaN]})");
  // The tokens are only special outside strings.
  EXPECT_REST_ERROR(Post("/v1/models/half_plus_two:predict", R"({"instances": ["NaN"]})"), 400,
                    "expected a number, got a string");
}

TEST_F(RestApiTest, PredictFloatOutOfRangeIs400) {
  const HttpResult r = Post("/v1/models/half_plus_two:predict", R"({"instances": [1e39]})");
  EXPECT_REST_ERROR(r, 400, "Cannot convert JSON value: 1e+39 to float32: out of range");
  EXPECT_PRED2(Contains, ErrorOf(r), "input 'x'");
}

// ---- POST :classify and :regress ----

TEST_F(RestApiTest, Regress) {
  HttpResult r = Post("/v1/models/half_plus_two:regress",
                      R"({"signature_name": "regress_x_to_y", "examples": [{"x": 1.0}, {"x": 2}, {"x": [5.0]}]})");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(r.body, R"({"results": [2.5, 3.0, 4.5]})");
  EXPECT_EQ(r.headers.at("x-model-version"), "1");
  // The context supplies features the examples lack; an example's own value wins.
  r = Post("/v1/models/half_plus_two:regress",
           R"({"signature_name": "regress_x_to_y", "context": {"x": 4.0}, "examples": [{}, {"x": 2.0}]})");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(r.body, R"({"results": [4.0, 3.0]})");
  r = Post("/v1/models/versioned/labels/canary:regress",
           R"({"signature_name": "regress_x_to_y", "examples": [{"x": 3.0}]})");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(r.body, R"({"results": [6.0]})");
  EXPECT_EQ(r.headers.at("x-model-version"), "2");
}

TEST_F(RestApiTest, Classify) {
  HttpResult r = Post("/v1/models/half_plus_two:classify",
                      R"({"signature_name": "classify_x_to_y", "examples": [{"x": 1.0}, {"x": 5.0}]})");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  // No "classes" output: the labels are empty, as TensorFlow's are.
  EXPECT_EQ(r.body, R"({"results": [[["", 2.5]], [["", 4.5]]]})");
  EXPECT_EQ(r.headers.at("x-model-version"), "1");
  r = Post("/v1/models/half_plus_two:classify",
           R"({"signature_name": "classify_x_to_y", "context": {"x": 2.0}, "examples": [{}, {}]})");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(r.body, R"({"results": [[["", 3.0]], [["", 3.0]]]})");
}

TEST_F(RestApiTest, ClassifyOrRegressOnTheWrongSignatureIs400) {
  EXPECT_REST_ERROR(Post("/v1/models/half_plus_two:classify", R"({"examples": [{"x": 1.0}]})"), 400,
                    "Expected classification signature method_name to be tensorflow/serving/classify. Was: "
                    "tensorflow/serving/predict");
  EXPECT_REST_ERROR(Post("/v1/models/half_plus_two:regress",
                         R"({"signature_name": "classify_x_to_y", "examples": [{"x": 1.0}]})"),
                    400,
                    "Expected regression signature method_name to be tensorflow/serving/regress. Was: "
                    "tensorflow/serving/classify");
  EXPECT_REST_ERROR(Post("/v1/models/half_plus_two:classify", R"({"signature_name": "nope", "examples": [{}]})"), 400,
                    "Serving signature name: \"nope\" not found in signature def");
}

TEST_F(RestApiTest, ClassifyAndRegressBodyErrorsAre400) {
  const std::string target = "/v1/models/half_plus_two:regress";
  EXPECT_REST_ERROR(Post(target, R"({"signature_name": "regress_x_to_y"})"), 400, "Missing 'examples' key");
  EXPECT_REST_ERROR(Post(target, R"({"signature_name": "regress_x_to_y", "examples": {}})"), 400,
                    "Expecting 'examples' to be an list/array");
  EXPECT_REST_ERROR(Post(target, R"({"signature_name": "regress_x_to_y", "examples": [{"y": 1.0}]})"), 400,
                    "has no feature 'x'");
  EXPECT_REST_ERROR(Post(target, R"({"signature_name": "regress_x_to_y", "examples": [{"x": "a"}]})"), 400,
                    "feature 'x' must be a float_list or int64_list");
  EXPECT_REST_ERROR(Post(target, R"({"signature_name": "regress_x_to_y", "examples": []})"), 400, "Input is empty.");
  EXPECT_REST_ERROR(Post(target, R"({"signature_name": "regress_x_to_y", "examples": [{"x": 1.0}],)"), 400,
                    "JSON Parse error");
}

// ---- Predict errors ----

TEST_F(RestApiTest, MalformedJsonIs400) {
  const std::string target = "/v1/models/half_plus_two:predict";
  // What is wrong, and where.
  HttpResult r = Post(target, R"({"instances": [1.0, 2.0)");
  EXPECT_REST_ERROR(r, 400, "JSON Parse error");
  EXPECT_PRED2(Contains, ErrorOf(r), "unexpected end of input");
  EXPECT_PRED2(Contains, ErrorOf(r), "at offset: 23");
  r = Post(target, R"({"instances": [1.0 2.0]})");
  EXPECT_REST_ERROR(r, 400, "JSON Parse error");
  EXPECT_PRED2(Contains, ErrorOf(r), "unexpected number literal");
  EXPECT_PRED2(Contains, ErrorOf(r), "at offset: 21");  // where the parser gave up: the end of "2.0"
  // Offsets are in the client's text, also after NaN and Infinity (which the parser sees
  // rewritten).
  r = Post(target, R"({"instances": [NaN, Infinity, NaN x]})");
  EXPECT_REST_ERROR(r, 400, "JSON Parse error");
  EXPECT_PRED2(Contains, ErrorOf(r), "at offset: 34");
  EXPECT_REST_ERROR(Post(target, ""), 400, "JSON Parse error");
  EXPECT_REST_ERROR(Post(target, "instances"), 400, "JSON Parse error");
  EXPECT_REST_ERROR(Post(target, R"({"instances": [1.0]} trailing)"), 400, "JSON Parse error");
  EXPECT_REST_ERROR(Post(target, R"([1.0, 2.0])"), 400, "the request body must be a JSON object");
  // Nesting that no tensor needs is refused before it is parsed.
  EXPECT_REST_ERROR(Post(target, R"({"instances": )" + std::string(1000, '[') + std::string(1000, ']') + "}"), 400,
                    "JSON nests deeper than");
}

TEST_F(RestApiTest, WrongDtypeIs400) {
  const std::string target = "/v1/models/half_plus_two:predict";
  HttpResult r = Post(target, R"({"instances": ["a", "b"]})");
  EXPECT_REST_ERROR(r, 400, "expected a number, got a string");
  EXPECT_PRED2(Contains, ErrorOf(r), "input 'x'");
  EXPECT_REST_ERROR(Post(target, R"({"inputs": {"x": [true]}})"), 400, "expected a number, got a boolean");
  EXPECT_REST_ERROR(Post(target, R"({"instances": [null]})"), 400, "expected a number, got a null");
  EXPECT_REST_ERROR(Post("/v1/models/multi:predict", R"({"instances": [{"a": 1.0, "b": "x"}]})"), 400, "input 'b'");
}

TEST_F(RestApiTest, RaggedListsAre400) {
  EXPECT_REST_ERROR(Post("/v1/models/half_plus_two:predict", R"({"instances": [[1.0, 2.0], [3.0]]})"), 400,
                    "JSON lists are not rectangular");
  EXPECT_REST_ERROR(Post("/v1/models/half_plus_two:predict", R"({"inputs": [1.0, [2.0]]})"), 400,
                    "JSON lists are not rectangular");
  EXPECT_REST_ERROR(
      Post("/v1/models/multi:predict", R"({"instances": [{"a": 1.0, "b": 2.0}, {"a": [1.0], "b": 3.0}]})"), 400,
      "JSON lists are not rectangular");
}

TEST_F(RestApiTest, ShapeMismatchIs400) {
  // Rank 2 to the rank-1 input x.
  EXPECT_REST_ERROR(Post("/v1/models/half_plus_two:predict", R"({"instances": [[1.0, 2.0], [3.0, 4.0]]})"), 400,
                    "input 'x' must have shape [-1], got [2,2]");
  EXPECT_REST_ERROR(Post("/v1/models/half_plus_two:predict", R"({"inputs": 1.0})"), 400,
                    "input 'x' must have shape [-1], got []");
}

TEST_F(RestApiTest, InstancesAndInputsAreExclusive) {
  const std::string target = "/v1/models/half_plus_two:predict";
  EXPECT_REST_ERROR(Post(target, R"({"instances": [1.0], "inputs": [1.0]})"), 400,
                    "Not formatted correctly expecting only one of 'inputs' or 'instances' keys exists");
  EXPECT_REST_ERROR(Post(target, R"({})"), 400, "Missing 'inputs' or 'instances' key");
  EXPECT_REST_ERROR(Post(target, R"({"signature_name": "serving_default"})"), 400,
                    "Missing 'inputs' or 'instances' key");
  EXPECT_REST_ERROR(Post(target, R"({"instances": 1.0})"), 400, "Expecting 'instances' to be an list/array");
  EXPECT_REST_ERROR(Post(target, R"({"instances": []})"), 400, "'instances' is empty");
  EXPECT_REST_ERROR(Post(target, R"({"instances": [1.0], "signature_name": 3})"), 400,
                    "'signature_name' key must be a string value.");
}

TEST_F(RestApiTest, UnknownSignatureIs400) {
  EXPECT_REST_ERROR(Post("/v1/models/half_plus_two:predict", R"({"signature_name": "nope", "instances": [1.0]})"),
                    400, "Serving signature name: \"nope\" not found in signature def");
}

TEST_F(RestApiTest, UnknownInputNameIs400) {
  EXPECT_REST_ERROR(Post("/v1/models/half_plus_two:predict", R"({"inputs": {"y": [1.0]}})"), 400,
                    "\"y\" is not an input of signature 'serving_default' (inputs: x)");
  EXPECT_REST_ERROR(Post("/v1/models/multi:predict", R"({"inputs": {"a": [1.0], "b": [1.0], "c": [1.0]}})"), 400,
                    "\"c\" is not an input of signature 'serving_default' (inputs: a, b)");
  EXPECT_REST_ERROR(Post("/v1/models/multi:predict", R"({"instances": [{"a": 1.0, "b": 1.0, "c": 1.0}]})"), 400,
                    "\"c\" is not an input of signature");
}

TEST_F(RestApiTest, UnsupportedMethodIs400) {
  HttpClient client(port());
  EXPECT_REST_ERROR(client.Request("PUT", "/v1/models/half_plus_two", "{}"), 400, "Malformed request");
  EXPECT_REST_ERROR(client.Request("DELETE", "/v1/models/half_plus_two"), 400, "Malformed request");
}

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
    EXPECT_EQ(HeaderOf(r, "access-control-allow-headers"), "Content-Type");
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
