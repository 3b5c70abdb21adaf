// The load generator's REST driver: `concurrency` keep-alive connections on one io_context run
// by the calling thread, each with one request outstanding (closed loop). The request bytes
// are formatted once and reused, and responses go through a Beast parser that keeps only the
// status and the body in a buffer that is reused too, so a request costs no heap allocation of
// ours: the client should leave the CPU to the server it measures.
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/read.hpp>
#include <charconv>
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

// Keeps the status code and the body of one response. Headers are dropped unread: the base
// parser already tracks what matters (keep-alive, framing).
class ResponseParser final : public http::basic_parser<false> {
 public:
  explicit ResponseParser(std::string* body) : body_(body) {
    body_->clear();
    body_limit(1 << 20);
  }
  int status() const { return status_; }

 private:
  void on_request_impl(http::verb, string_view, string_view, int, error_code&) override {}
  void on_response_impl(int code, string_view, int, error_code&) override { status_ = code; }
  void on_field_impl(http::field, string_view, string_view, error_code&) override {}
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
};

struct Shared {
  asio::io_context& io;
  tcp::endpoint endpoint;
  std::string request;  // the whole HTTP request, headers and body
  std::string_view rest_output;
  std::span<const float> expect;
  Tally& tally;
  Pacer pacer;
  asio::steady_timer watchdog;
  int running = 0;
};

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
        bool ok = parser_->status() == 200 && RestBodyMatches(body_, shared_.rest_output, shared_.expect);
        if (!ok) {
          shared_.tally.NoteError([&] {
            std::string what = parser_->status() == 200
                                   ? "unexpected answer: "
                                   : "HTTP " + std::to_string(parser_->status()) + ": ";
            return what + body_.substr(0, 200);
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

std::string FormatRequest(const LevelSpec& spec) {
  return "POST /v1/models/" + spec.model + ":predict HTTP/1.1\r\nHost: " + spec.host + ":" +
         spec.port + "\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(spec.rest_body.size()) + "\r\n\r\n" + spec.rest_body;
}

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
  Shared shared{io,     *endpoint, FormatRequest(spec),   spec.rest_output, spec.expect,
                *tally, Pacer(spec.rate, Clock::now()), asio::steady_timer(io), 0};

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

}  // namespace lockstep::bench
