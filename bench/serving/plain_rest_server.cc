// bench_plain_rest_server: the REST peer that model-server is measured against. A minimal
// Boost.Beast HTTP/1.1 keep-alive server doing the JSON and arithmetic work of a half_plus_two
// predict (parse {"instances": [...]}, y = 0.5 * x + 2, format with FormatFloat) and nothing
// else: no routing, model store or graph. Its throughput is the ceiling model-server's is
// compared to.
//
//   bench_plain_rest_server --port=0 --threads=2      # prints "listening on PORT"
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <csignal>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "bench/serving/flags.h"
#include "runtime/tensor_json.h"

namespace lockstep::bench {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using boost::system::error_code;
using tcp = asio::ip::tcp;

std::string ErrorBody(std::string_view message) {
  return nlohmann::json{{"error", message}}.dump();
}

// The half_plus_two answer to a row-form predict body, or an error and 400.
std::string Predict(std::string_view body, http::status* status) {
  *status = http::status::bad_request;
  nlohmann::json doc = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return ErrorBody("body is not a JSON object");
  auto instances = doc.find("instances");
  if (instances == doc.end() || !instances->is_array()) return ErrorBody("no instances list");
  std::string out = R"({"predictions": [)";
  for (size_t i = 0; i < instances->size(); ++i) {
    const nlohmann::json& x = (*instances)[i];
    if (!x.is_number()) return ErrorBody("instances must be numbers");
    if (i > 0) out += ", ";
    out += FormatFloat(0.5f * x.get<float>() + 2.0f);
  }
  out += "]}";
  *status = http::status::ok;
  return out;
}

class Session : public std::enable_shared_from_this<Session> {
 public:
  explicit Session(tcp::socket socket) : socket_(std::move(socket)) {}

  void Read() {
    request_ = {};
    http::async_read(socket_, buffer_, request_,
                     [self = shared_from_this()](error_code ec, size_t) { self->OnRead(ec); });
  }

 private:
  void OnRead(error_code ec) {
    if (ec) return;  // end of stream or a broken connection: the session ends here
    response_ = {};
    response_.version(request_.version());
    response_.keep_alive(request_.keep_alive());
    response_.set(http::field::content_type, "application/json");
    if (request_.method() == http::verb::post) {
      http::status status;
      response_.body() = Predict(request_.body(), &status);
      response_.result(status);
    } else {
      response_.result(http::status::method_not_allowed);
      response_.body() = ErrorBody("only POST is served");
    }
    response_.prepare_payload();
    http::async_write(socket_, response_,
                      [self = shared_from_this()](error_code ec, size_t) { self->OnWrite(ec); });
  }

  void OnWrite(error_code ec) {
    if (ec) return;
    if (response_.keep_alive()) return Read();
    socket_.shutdown(tcp::socket::shutdown_send, ec);
  }

  tcp::socket socket_;
  boost::beast::flat_buffer buffer_;
  http::request<http::string_body> request_;
  http::response<http::string_body> response_;
};

void Accept(tcp::acceptor& acceptor, asio::io_context& io) {
  // A strand per connection, the usual multi-threaded Beast design: the peer pays the
  // synchronisation any real server on several threads pays.
  acceptor.async_accept(asio::make_strand(io), [&acceptor, &io](error_code ec, tcp::socket socket) {
    if (!acceptor.is_open()) return;
    if (!ec) {
      socket.set_option(tcp::no_delay(true), ec);
      std::make_shared<Session>(std::move(socket))->Read();
    }
    Accept(acceptor, io);
  });
}

int Main(int argc, char** argv) {
  std::optional<Flags> flags = Flags::Parse(argc, argv, {"port", "threads"});
  std::optional<int> port = flags ? flags->Number<int>("port", 0) : std::nullopt;
  std::optional<int> threads = flags ? flags->Number<int>("threads", 1) : std::nullopt;
  if (!port || !threads || *port < 0 || *port > 65535 || *threads < 1) {
    std::fputs("usage: bench_plain_rest_server --port=N (0: any free port) --threads=T\n", stderr);
    return 2;
  }
  asio::io_context io(*threads);
  tcp::acceptor acceptor(io);
  error_code ec;
  tcp::endpoint endpoint(asio::ip::address_v4::loopback(), static_cast<uint16_t>(*port));
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    std::fprintf(stderr, "bench_plain_rest_server: cannot listen on port %d: %s\n", *port,
                 ec.message().c_str());
    return 1;
  }
  std::printf("listening on %u\n", static_cast<unsigned>(acceptor.local_endpoint().port()));
  std::fflush(stdout);

  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&io](error_code, int) { io.stop(); });
  Accept(acceptor, io);
  std::vector<std::thread> workers;
  for (int i = 1; i < *threads; ++i) workers.emplace_back([&io] { io.run(); });
  io.run();
  for (std::thread& worker : workers) worker.join();
  return 0;
}

}  // namespace
}  // namespace lockstep::bench

int main(int argc, char** argv) { return lockstep::bench::Main(argc, argv); }
