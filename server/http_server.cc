#include "server/http_server.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "server/rest_json.h"

namespace lockstep {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

constexpr uint32_t kMaxHeaderBytes = 16 * 1024;
constexpr size_t kMaxClientRequestIdLength = 64;

std::string_view View(beast::string_view s) { return {s.data(), s.size()}; }

// A client's X-Request-Id is echoed and logged only if it is short and printable.
bool SaneRequestId(std::string_view id) {
  if (id.empty() || id.size() > kMaxClientRequestIdLength) return false;
  for (char c : id) {
    if (c <= ' ' || c > '~' || c == '"') return false;
  }
  return true;
}

}  // namespace

struct HttpServer::Impl {
  Impl(const HttpServerOptions& opts, const RestApi& rest_api)
      : options(opts), api(rest_api), ioc(opts.num_threads), acceptor(net::make_strand(ioc)) {
    std::random_device random;
    id_prefix = fmt::format("{:08x}", random());
  }

  std::string NextRequestId() { return fmt::format("{}-{:x}", id_prefix, next_id.fetch_add(1)); }
  void Accept();

  const HttpServerOptions options;
  const RestApi& api;
  net::io_context ioc;
  tcp::acceptor acceptor;
  int bound_port = 0;
  std::vector<std::thread> threads;
  std::once_flag stop_once;
  std::string id_prefix;
  std::atomic<uint64_t> next_id{1};
};

namespace {

// One client connection: read a request, answer it, repeat while keep-alive holds. Requests
// on one connection are answered in order, so pipelined requests just queue in the buffer.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, HttpServer::Impl& server) : stream_(std::move(socket)), server_(server) {}

  void Start() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->ReadHeader(); });
  }

 private:
  void ReadHeader() {
    parser_.emplace();
    parser_->header_limit(kMaxHeaderBytes);
    parser_->body_limit(server_.options.max_body_bytes);
    stream_.expires_after(server_.options.timeout);
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
  }

  void OnHeader(beast::error_code ec) {
    if (ec) return OnReadError(ec);
    // curl and others wait for "100 Continue" before sending a large body.
    const auto& request = parser_->get();
    if (beast::iequals(request[http::field::expect], "100-continue")) {
      continue_.emplace(http::status::continue_, request.version());
      stream_.expires_after(server_.options.timeout);
      http::async_write(stream_, *continue_, [self = shared_from_this()](beast::error_code ec, size_t) {
        if (ec) return self->Close();
        self->ReadBody();
      });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    stream_.expires_after(server_.options.timeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->OnBody(ec); });
  }

  void OnBody(beast::error_code ec) {
    if (ec) return OnReadError(ec);
    Handle();
  }

  void OnReadError(beast::error_code ec) {
    if (ec == http::error::body_limit) {
      return ReplyError(413, "request body is larger than the limit of " +
                                 std::to_string(server_.options.max_body_bytes) + " bytes");
    }
    if (ec == http::error::header_limit) return ReplyError(431, "request header is too large");
    // Closed, reset or timed out: nobody to answer. A malformed request gets a 400 first.
    if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == net::error::eof ||
        ec == net::error::connection_reset || ec == net::error::operation_aborted ||
        ec == http::error::partial_message) {
      return Close();
    }
    if (ec.category() == http::make_error_code(http::error::bad_version).category()) {
      return ReplyError(400, "Malformed HTTP request: " + ec.message());
    }
    Close();
  }

  void Handle() {
    const auto& request = parser_->get();
    const std::string_view client_id = View(request["X-Request-Id"]);
    request_id_ = SaneRequestId(client_id) ? std::string(client_id) : server_.NextRequestId();

    rest_.body.swap(body_);  // reuse the last response's buffer
    server_.api.Handle(View(request.method_string()), View(request.target()), request.body(), request_id_, &rest_);

    response_.clear();
    response_.result(rest_.http_status);
    response_.version(request.version());
    response_.keep_alive(request.keep_alive());
    response_.set(http::field::content_type, "application/json");
    response_.set("X-Request-Id", request_id_);
    if (rest_.model_version >= 0) response_.set("X-Model-Version", std::to_string(rest_.model_version));
    SetCors();
    response_.body().swap(rest_.body);
    response_.prepare_payload();
    Write(!request.keep_alive());
  }

  // Answers an error the transport found (no request to hand on) and closes the connection.
  void ReplyError(int status, const std::string& message) {
    spdlog::debug("event=http_rejected status={} error=\"{}\"", status, message);
    response_.clear();
    response_.result(status);
    response_.version(11);
    response_.keep_alive(false);
    response_.set(http::field::content_type, "application/json");
    SetCors();
    response_.body() = ErrorJson(message);
    response_.prepare_payload();
    Write(/*close=*/true);
  }

  void SetCors() {
    if (!server_.options.enable_cors) return;
    response_.set(http::field::access_control_allow_origin, "*");
    response_.set(http::field::access_control_allow_methods, "POST, GET");
    response_.set(http::field::access_control_allow_headers, "Content-Type");
  }

  void Write(bool close) {
    stream_.expires_after(server_.options.timeout);
    http::async_write(stream_, response_, [self = shared_from_this(), close](beast::error_code ec, size_t) {
      self->body_.swap(self->response_.body());
      self->body_.clear();
      if (ec || close) return self->Close();
      self->ReadHeader();
    });
  }

  void Close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.socket().close(ignored);
  }

  beast::tcp_stream stream_;
  HttpServer::Impl& server_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::optional<http::response<http::empty_body>> continue_;
  http::response<http::string_body> response_;
  RestResponse rest_;
  std::string body_;  // kept between requests so a keep-alive connection reuses its capacity
  std::string request_id_;
};

}  // namespace

void HttpServer::Impl::Accept() {
  acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
    if (!ec) {
      beast::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      std::make_shared<Connection>(std::move(socket), *this)->Start();
    } else {
      spdlog::warn("event=http_accept_failed error=\"{}\"", ec.message());
    }
    Accept();
  });
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() { Stop(); }

StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options, const RestApi& api) {
  if (options.num_threads < 1) return InvalidArgument("the REST server needs at least one thread");
  auto impl = std::make_unique<Impl>(options, api);
  beast::error_code ec;
  const net::ip::address address = net::ip::make_address(options.address, ec);
  if (ec) return InvalidArgument("bad REST listen address '" + options.address + "': " + ec.message());
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(options.port));
  impl->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl->acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(endpoint, ec);
  if (!ec) impl->acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return Status(StatusCode::kUnavailable, "cannot listen for REST on " + options.address + ":" +
                                                std::to_string(options.port) + ": " + ec.message());
  }
  impl->bound_port = impl->acceptor.local_endpoint().port();
  impl->Accept();
  Impl* raw = impl.get();
  for (int i = 0; i < options.num_threads; ++i) impl->threads.emplace_back([raw] { raw->ioc.run(); });
  return std::make_unique<HttpServer>(std::move(impl));
}

int HttpServer::port() const { return impl_->bound_port; }

void HttpServer::Stop() {
  std::call_once(impl_->stop_once, [this] {
    net::post(impl_->acceptor.get_executor(), [this] {
      beast::error_code ignored;
      impl_->acceptor.close(ignored);
    });
    impl_->ioc.stop();
    for (std::thread& t : impl_->threads) t.join();
  });
}

}  // namespace lockstep
