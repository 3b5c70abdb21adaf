// The load generator's REST driver: `concurrency` keep-alive connections on one io_context run
// by the calling thread, each with one request outstanding (closed loop). The request bytes
// are formatted once and reused, and responses go through a Beast parser that keeps only the
// status, the body (in a buffer that is reused too) and the Inference-Header-Content-Length,
// so a request costs no heap allocation of ours: the client should leave the CPU to the server
// it measures. TF Serving's predict and the Open Inference Protocol's infer (JSON or binary
// tensors) differ only in FormatRequest and AnswerMatches.
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/read.hpp>
#include <algorithm>
#include <bit>
#include <charconv>
#include <cstring>
#include <memory>
#include <optional>

#include "bench/serving/load_gen.h"

namespace lockstep::bench {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using boost::beast::string_view;
using boost::system::error_code;
using tcp = asio::ip::tcp;

// A v2 binary body's JSON header length, on requests and on responses. Spelled out here rather
// than taken from the server's code: the client must speak the protocol, not share its bugs.
constexpr char kHeaderLengthHeader[] = "Inference-Header-Content-Length";

// Keeps the status code, the body and the Inference-Header-Content-Length of one response.
// Other headers are dropped unread: the base parser already tracks what matters (keep-alive,
// framing).
class ResponseParser final : public http::basic_parser<false> {
 public:
  explicit ResponseParser(std::string* body) : body_(body) {
    body_->clear();
    body_limit(1 << 20);
  }
  int status() const { return status_; }
  // 0 when the header was absent (or not a number): then the body is all JSON.
  size_t header_length() const { return header_length_; }

 private:
  void on_request_impl(http::verb, string_view, string_view, int, error_code&) override {}
  void on_response_impl(int code, string_view, int, error_code&) override { status_ = code; }
  void on_field_impl(http::field field, string_view name, string_view value, error_code&) override {
    // Beast knows no v2 header, so only unknown fields need the name compared.
    if (field != http::field::unknown || !boost::beast::iequals(name, kHeaderLengthHeader)) return;
    if (std::from_chars(value.data(), value.data() + value.size(), header_length_).ec != std::errc()) {
      header_length_ = 0;
    }
  }
  void on_header_impl(error_code&) override {}
  void on_body_init_impl(const boost::optional<std::uint64_t>&, error_code&) override {}
  size_t on_body_impl(string_view data, error_code&) override {
    body_->append(data.data(), data.size());
    return data.size();
  }
  void on_chunk_header_impl(std::uint64_t, string_view, error_code&) override {}
  size_t on_chunk_body_impl(std::uint64_t, string_view data, error_code&) override {
    body_->append(data.data(), data.size());
    return data.size();
  }
  void on_finish_impl(error_code&) override {}

  std::string* body_;
  int status_ = 0;
  size_t header_length_ = 0;
};

struct Shared {
  asio::io_context& io;
  tcp::endpoint endpoint;
  std::string request;  // the whole HTTP request, headers and body
  Api api;
  std::string_view output;  // TF API: the body's key that holds the answer; v2: the output's name
  std::span<const float> expect;
  Tally& tally;
  Pacer pacer;
  asio::steady_timer watchdog;
  int running = 0;
};

// The v2 infer body's JSON (the whole body, or the header that raw inputs follow): the one
// input, FP32, in "data" or, binary, as spec.grpc_x's bytes. Binary also asks for the output
// binary, and for that output only, so that the raw bytes of the answer are exactly its.
std::string V2Json(const LevelSpec& spec, bool binary) {
  std::string json = R"({"inputs":[{"name":")" + spec.input + R"(","datatype":"FP32","shape":[)";
  if (spec.grpc_shape.empty()) {
    json += std::to_string(spec.grpc_x.size());
  } else {
    for (size_t i = 0; i < spec.grpc_shape.size(); ++i) json += (i > 0 ? "," : "") + std::to_string(spec.grpc_shape[i]);
  }
  json += ']';
  if (binary) {
    json += R"(,"parameters":{"binary_data_size":)" + std::to_string(spec.grpc_x.size() * sizeof(float)) +
            R"(}}],"outputs":[{"name":")" + spec.output + R"("}],"parameters":{"binary_data_output":true}})";
    return json;
  }
  json += R"(,"data":[)";
  char digits[32];
  for (size_t i = 0; i < spec.grpc_x.size(); ++i) {
    if (i > 0) json += ',';
    json.append(digits, std::to_chars(digits, digits + sizeof digits, spec.grpc_x[i]).ptr);
  }
  json += "]}]}";
  return json;
}

std::string FormatRequest(const LevelSpec& spec) {
  const std::string host = "Host: " + spec.host + ":" + spec.port + "\r\n";
  if (spec.api == Api::kTfs) {
    return "POST /v1/models/" + spec.model + ":predict HTTP/1.1\r\n" + host +
           "Content-Type: application/json\r\nContent-Length: " + std::to_string(spec.rest_body.size()) +
           "\r\n\r\n" + spec.rest_body;
  }
  const bool binary = spec.api == Api::kV2Binary;
  std::string body = V2Json(spec, binary);
  std::string extra = "Content-Type: application/json\r\n";
  if (binary) {
    extra = "Content-Type: application/octet-stream\r\n" + std::string(kHeaderLengthHeader) + ": " +
            std::to_string(body.size()) + "\r\n";
    static_assert(std::endian::native == std::endian::little, "the protocol's raw tensors are little-endian");
    body.append(reinterpret_cast<const char*>(spec.grpc_x.data()), spec.grpc_x.size() * sizeof(float));
  }
  return "POST /v2/models/" + spec.model + "/infer HTTP/1.1\r\n" + host + extra +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

size_t SkipSpace(std::string_view json, size_t p) {
  while (p < json.size() && (json[p] == ' ' || json[p] == '\n' || json[p] == '\r' || json[p] == '\t')) ++p;
  return p;
}

// Where the value of the first `"key":` at or after `from` begins; npos if there is none. A
// string value equal to the key is told from it by the ':' that does not follow.
size_t FindValue(std::string_view json, std::string_view key, size_t from) {
  for (size_t at = json.find(key, from); at != std::string_view::npos; at = json.find(key, at + 1)) {
    const size_t after = at + key.size();
    if (at == 0 || json[at - 1] != '"' || after >= json.size() || json[after] != '"') continue;
    const size_t colon = SkipSpace(json, after + 1);
    if (colon < json.size() && json[colon] == ':') return SkipSpace(json, colon + 1);
  }
  return std::string_view::npos;
}

// The JSON string that begins at `at` (a '"'), unescaped names being all this reads; empty if
// there is none.
std::string_view StringAt(std::string_view json, size_t at) {
  if (at >= json.size() || json[at] != '"') return {};
  const size_t end = json.find('"', at + 1);
  return end == std::string_view::npos ? std::string_view() : json.substr(at + 1, end - at - 1);
}

// Where a v2 answer's output object named `name` goes on after its "name": npos if there is none.
// Its "data" is looked for from there: every server writes "name" first, as the protocol lists it.
size_t FindV2Output(std::string_view json, std::string_view name) {
  for (size_t at = FindValue(json, "name", 0); at != std::string_view::npos; at = FindValue(json, "name", at)) {
    if (StringAt(json, at) == name) return at + name.size() + 2;
  }
  return std::string_view::npos;
}

// Whether a 200 answer holds the expected values, read as the request's API writes them.
bool AnswerMatches(const Shared& shared, std::string_view body, size_t header_length) {
  switch (shared.api) {
    case Api::kTfs:
      return RestBodyMatches(body, shared.output, shared.expect);
    case Api::kV2: {
      const size_t at = FindV2Output(body, shared.output);
      return at != std::string_view::npos && RestBodyMatches(body.substr(at), "data", shared.expect);
    }
    case Api::kV2Binary: {
      // Only the asked-for output came back, binary: its datatype is the header's only one.
      if (header_length == 0 || header_length > body.size()) return false;
      const std::string_view json = body.substr(0, header_length);
      if (FindV2Output(json, shared.output) == std::string_view::npos) return false;
      const std::string_view datatype = StringAt(json, FindValue(json, "datatype", 0));
      return RawTensorMatches(body.substr(header_length), datatype, shared.expect);
    }
  }
  return false;
}

class Connection {
 public:
  explicit Connection(Shared& shared) : shared_(shared), socket_(shared.io), retry_(shared.io) {
    buffer_.reserve(4096);
    body_.reserve(256);
  }

  void Start() { Connect(); }

  // Aborts whatever is outstanding; the handlers then see the level is over and finish.
  void Abort() {
    error_code ignored;
    socket_.close(ignored);
    retry_.cancel();
  }

 private:
  void Connect() {
    sent_ = Clock::now();
    socket_.async_connect(shared_.endpoint, [this](error_code ec) {
      if (ec) return Failed(ec);
      socket_.set_option(tcp::no_delay(true), ec);
      Send();
    });
  }

  // Sends at the pacer's next slot (at once when unpaced), waiting on the retry timer.
  void Send() {
    const Clock::time_point slot = shared_.pacer.Next(Clock::now());
    if (slot <= Clock::now()) return SendNow();
    retry_.expires_at(slot);
    retry_.async_wait([this](error_code ec) {
      if (ec || shared_.tally.Over(Clock::now())) return Finish();
      SendNow();
    });
  }

  void SendNow() {
    sent_ = Clock::now();
    parser_.emplace(&body_);
    asio::async_write(socket_, asio::buffer(shared_.request), [this](error_code ec, size_t) {
      if (ec) return Failed(ec);
      http::async_read(socket_, buffer_, *parser_, [this](error_code ec, size_t) {
        if (ec) return Failed(ec);
        Clock::time_point done = Clock::now();
        const size_t header_length = parser_->header_length();
        bool ok = parser_->status() == 200 && AnswerMatches(shared_, body_, header_length);
        if (!ok) {
          shared_.tally.NoteError([&] {
            std::string what = parser_->status() == 200
                                   ? "unexpected answer: "
                                   : "HTTP " + std::to_string(parser_->status()) + ": ";
            // A binary answer's raw bytes would print as noise: its JSON header says enough.
            return what + body_.substr(0, std::min<size_t>(200, header_length > 0 ? header_length : 200));
          });
        }
        if (!shared_.tally.Record(sent_, done, ok)) return Finish();
        if (parser_->keep_alive()) return Send();
        Reconnect();
      });
    });
  }

  // A failed connect or exchange counts as one error, and the connection is made anew after
  // a pause, so that a refusing server does not turn the loop into a busy spin.
  void Failed(error_code ec) {
    shared_.tally.NoteError([&] {
      // Only the watchdog cancels, so a cancelled exchange is one that hung.
      return ec == asio::error::operation_aborted ? std::string("no answer, abandoned")
                                                  : ec.message();
    });
    if (!shared_.tally.Record(sent_, Clock::now(), false)) return Finish();
    retry_.expires_after(std::chrono::milliseconds(10));
    retry_.async_wait([this](error_code) {
      if (shared_.tally.Over(Clock::now())) return Finish();
      Reconnect();
    });
  }

  void Reconnect() {
    error_code ignored;
    socket_.close(ignored);
    buffer_.clear();
    Connect();
  }

  void Finish() {
    error_code ignored;
    socket_.close(ignored);
    if (--shared_.running == 0) shared_.watchdog.cancel();
  }

  Shared& shared_;
  tcp::socket socket_;
  asio::steady_timer retry_;
  boost::beast::flat_buffer buffer_;
  std::string body_;
  std::optional<ResponseParser> parser_;
  Clock::time_point sent_;
};

std::optional<tcp::endpoint> Resolve(asio::io_context& io, const LevelSpec& spec,
                                     std::string* error) {
  error_code ec;
  tcp::resolver resolver(io);
  auto results = resolver.resolve(spec.host, spec.port, ec);
  if (ec || results.empty()) {
    *error = "cannot resolve " + spec.host + ":" + spec.port + ": " + ec.message();
    return std::nullopt;
  }
  return results.begin()->endpoint();
}

}  // namespace

bool ProbeRest(const LevelSpec& spec, std::string* error) {
  asio::io_context io(1);
  std::optional<tcp::endpoint> endpoint = Resolve(io, spec, error);
  if (!endpoint) return false;
  tcp::socket socket(io);
  asio::steady_timer timer(io, std::chrono::seconds(5));
  error_code result = asio::error::timed_out;
  socket.async_connect(*endpoint, [&](error_code ec) {
    result = ec;
    timer.cancel();
  });
  timer.async_wait([&](error_code ec) {
    if (!ec) socket.close();
  });
  io.run();
  if (result) *error = "cannot connect to " + spec.host + ":" + spec.port + ": " + result.message();
  return !result;
}

bool RunRestLevel(const LevelSpec& spec, Tally* tally, std::string* error) {
  // One thread drives everything, so the io_context needs no locking.
  asio::io_context io(1);
  std::optional<tcp::endpoint> endpoint = Resolve(io, spec, error);
  if (!endpoint) return false;
  Shared shared{io,
                *endpoint,
                FormatRequest(spec),
                spec.api,
                spec.api == Api::kTfs ? spec.rest_output : spec.output,
                spec.expect,
                *tally,
                Pacer(spec.rate, Clock::now()),
                asio::steady_timer(io),
                0};

  std::vector<std::unique_ptr<Connection>> connections;
  for (int i = 0; i < spec.concurrency; ++i) {
    connections.push_back(std::make_unique<Connection>(shared));
  }
  shared.running = spec.concurrency;
  shared.watchdog.expires_at(tally->end() + kGrace);
  shared.watchdog.async_wait([&](error_code ec) {
    if (ec) return;
    for (auto& connection : connections) connection->Abort();
  });
  for (auto& connection : connections) connection->Start();
  io.run();
  return true;
}

bool RestBodyMatches(std::string_view body, std::string_view key, std::span<const float> expect) {
  const std::string quoted = "\"" + std::string(key) + "\"";
  const size_t at = body.find(quoted);
  if (at == std::string_view::npos) return false;
  const char* p = body.data() + at + quoted.size();
  const char* end = body.data() + body.size();
  auto skip_space = [&] {
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) ++p;
  };
  skip_space();
  if (p == end || *p != ':') return false;
  ++p;
  // One number, or arrays of them nested to any depth: read until the value ends.
  size_t next_value = 0;
  int depth = 0;
  do {
    skip_space();
    if (p == end) return false;
    if (*p == '[') {
      ++depth;
      ++p;
    } else if (*p == ']') {
      if (--depth < 0) return false;
      ++p;
    } else if (*p == ',' && depth > 0) {
      ++p;
    } else {
      float value = 0;
      auto [next, ec] = std::from_chars(p, end, value);
      if (ec != std::errc() || next_value >= expect.size() || value != expect[next_value]) return false;
      ++next_value;
      p = next;
    }
  } while (depth > 0);
  return next_value == expect.size();
}

bool RawTensorMatches(std::string_view raw, std::string_view datatype, std::span<const float> expect) {
  static_assert(std::endian::native == std::endian::little, "the protocol's raw tensors are little-endian");
  auto matches = [&]<typename T>(T) {
    if (raw.size() != expect.size() * sizeof(T)) return false;
    for (size_t i = 0; i < expect.size(); ++i) {
      T value;
      std::memcpy(&value, raw.data() + i * sizeof value, sizeof value);
      if (static_cast<float>(value) != expect[i]) return false;
    }
    return true;
  };
  if (datatype == "FP32") return matches(float{});
  if (datatype == "INT64") return matches(int64_t{});
  return false;
}

}  // namespace lockstep::bench
