#include "server/http_server.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <openssl/ssl.h>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <list>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "server/open_inference/rest_infer.h"
#include "server/request_id.h"
#include "server/rest_json.h"

namespace lockstep {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
using tcp = net::ip::tcp;

namespace {

constexpr uint32_t kMaxHeaderBytes = 16 * 1024;

std::string_view View(beast::string_view s) { return {s.data(), s.size()}; }

}  // namespace

namespace {

// What the server asks of a connection, whatever its stream: the sweeper's and Drain's calls.
class OpenConnection {
 public:
  virtual ~OpenConnection() = default;
  // Closes the connection if it waits for a request of which nothing has arrived (on its
  // strand). One being read or run finishes, and closes after its answer.
  virtual void CloseIfIdle() = 0;
  // Closes the connection if its deadline passed (on its strand, where the deadline may have
  // been renewed meanwhile).
  virtual void ExpireIfDue(int64_t now) = 0;
};

// TLS 1.2 or later with the server's key and certificate chain; with client_verify, a client
// certificate signed by custom_ca is required. ParseSslConfig has checked the PEM texts.
StatusOr<std::unique_ptr<ssl::context>> MakeTlsContext(const TlsCredentials& tls) {
  auto context = std::make_unique<ssl::context>(ssl::context::tls_server);
  context->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                       ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 | ssl::context::single_dh_use);
  beast::error_code ec;
  context->use_certificate_chain(net::buffer(tls.server_cert), ec);
  if (!ec) context->use_private_key(net::buffer(tls.server_key), ssl::context::pem, ec);
  if (!ec && !tls.custom_ca.empty()) context->add_certificate_authority(net::buffer(tls.custom_ca), ec);
  if (!ec && tls.client_verify) context->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert, ec);
  if (ec) return InvalidArgument("cannot set up TLS for REST: " + ec.message());
  // A client that renegotiates over and over would spend the server's CPU on handshakes.
  // OpenSSL 3 refuses it by default; said here so that no other build or default changes it.
  SSL_CTX_set_options(context->native_handle(), SSL_OP_NO_RENEGOTIATION);
  // OpenSSL refuses to resume a session when client certificates are verified and this is
  // unset, so every reconnect of a client that resumes (curl, proxies) would fail.
  static constexpr unsigned char kSessionContext[] = "lockstep-rest";
  SSL_CTX_set_session_id_context(context->native_handle(), kSessionContext, sizeof(kSessionContext) - 1);
  return context;
}

}  // namespace

struct HttpServer::Impl {
  Impl(const HttpServerOptions& opts, const RestApi& rest_api)
      : options(opts),
        api(rest_api),
        sweep_period(std::clamp<std::chrono::milliseconds>(opts.timeout / 4, std::chrono::milliseconds(10),
                                                            std::chrono::milliseconds(250))),
        ioc(opts.num_threads),
        acceptor(net::make_strand(ioc)),
        sweep_timer(ioc),
        accept_retry_timer(acceptor.get_executor()) {
  }

  void Accept();
  // On the acceptor's strand: no more connections.
  void CloseAcceptor() {
    beast::error_code ignored;
    acceptor.close(ignored);
    accept_retry_timer.cancel();
  }
  void Sweep();
  size_t OpenConnections() {
    std::lock_guard<std::mutex> lock(connections_mu);
    return connections.size();
  }

  const HttpServerOptions options;
  const RestApi& api;
  const std::chrono::milliseconds sweep_period;
  // Every open connection, for the sweeper. Declared before the io_context: connections that
  // die with the io_context's pending handlers unregister themselves here.
  std::mutex connections_mu;
  std::list<std::weak_ptr<OpenConnection>> connections;
  std::unique_ptr<ssl::context> tls;  // null: plain HTTP
  net::io_context ioc;
  tcp::acceptor acceptor;
  net::steady_timer sweep_timer;
  net::steady_timer accept_retry_timer;  // after a failed accept (out of file descriptors)
  std::vector<std::shared_ptr<OpenConnection>> sweeping;  // the sweeper's, reused
  int bound_port = 0;
  std::vector<std::thread> threads;
  std::once_flag stop_once;
  // Set by Drain: no new connections, each request answered is the connection's last.
  std::atomic<bool> draining{false};
  std::atomic<bool> refusing{false};  // the last connection accepted was over the cap
  bool accept_failing = false;         // the last accept failed; on the acceptor's strand
};

namespace {

constexpr std::chrono::milliseconds kAcceptRetry{50};

int64_t NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// One client connection: read a request, answer it, repeat while keep-alive holds. Requests
// on one connection are answered in order, so pipelined requests just queue in the buffer.
// `Stream` is a tcp::socket (HTTP) or an ssl::stream over one (HTTPS).
//
// Timeouts: each read and write arms a deadline (one atomic store); the server's sweeper
// closes connections whose deadline has passed. A timer per operation, as beast::tcp_stream
// keeps, costs two extra handler runs per request, a third of a small request's time.
template <typename Stream>
class Connection final : public OpenConnection, public std::enable_shared_from_this<Connection<Stream>> {
  static constexpr bool kTls = !std::is_same_v<Stream, tcp::socket>;

 public:
  // `stream_args` construct the Stream: a socket, or a socket and the TLS context.
  template <typename... StreamArgs>
  explicit Connection(HttpServer::Impl& server, StreamArgs&&... stream_args)
      : stream_(std::forward<StreamArgs>(stream_args)...), server_(server) {}
  ~Connection() override {
    std::lock_guard<std::mutex> lock(server_.connections_mu);
    server_.connections.erase(registration_);
  }

  void Start() {
    // As gRPC names peers ("ipv4:127.0.0.1:5000", "ipv6:[::1]:5000"), for AdminAccess.
    beast::error_code ec;
    const tcp::endpoint remote = socket().remote_endpoint(ec);
    if (!ec) {
      const std::string address = remote.address().to_string();
      peer_ = remote.address().is_v4() ? "ipv4:" + address : "ipv6:[" + address + "]";
      peer_ += ":" + std::to_string(remote.port());
    }
    {
      std::lock_guard<std::mutex> lock(server_.connections_mu);
      registration_ = server_.connections.insert(server_.connections.end(), this->weak_from_this());
    }
    net::dispatch(stream_.get_executor(), [self = this->shared_from_this()] {
      if constexpr (kTls) {
        self->Handshake();
      } else {
        self->ReadHeader();
      }
    });
  }

  void CloseIfIdle() override {
    net::post(stream_.get_executor(), [self = this->shared_from_this()] {
      beast::error_code ec;
      const bool nothing_arrived = self->awaiting_header_ && self->buffer_.size() == 0 &&
                                   self->socket().available(ec) == 0 && !self->TlsPending();
      // Nor is a TLS handshake (no request has come yet), or a close that waits for the
      // client's close_notify.
      if (nothing_arrived || self->handshaking_ || self->closing_) self->socket().cancel(ec);
    });
  }

  void ExpireIfDue(int64_t now) override {
    const int64_t deadline = deadline_ns_.load(std::memory_order_relaxed);
    if (deadline == 0 || deadline > now) return;
    net::post(stream_.get_executor(), [self = this->shared_from_this()] {
      const int64_t due = self->deadline_ns_.load(std::memory_order_relaxed);
      if (due != 0 && due <= NowNanos()) {
        self->timed_out_ = true;
        beast::error_code ignored;
        self->socket().cancel(ignored);
      }
    });
  }

 private:
  void Arm() {
    deadline_ns_.store(NowNanos() + std::chrono::nanoseconds(server_.options.timeout).count(),
                       std::memory_order_relaxed);
  }
  void Disarm() { deadline_ns_.store(0, std::memory_order_relaxed); }

  tcp::socket& socket() { return beast::get_lowest_layer(stream_); }

  // Whether the TLS layer holds bytes the HTTP parser has not seen: decrypted, or a record
  // still arriving.
  bool TlsPending() {
    if constexpr (kTls) {
      SSL* session = stream_.native_handle();
      return SSL_has_pending(session) || BIO_pending(SSL_get_rbio(session)) > 0;
    } else {
      return false;
    }
  }

  // The TLS handshake, bounded by the timeout like a read. A client that fails it (plain HTTP
  // on the HTTPS port, no or an untrusted client certificate) is closed without an answer:
  // there is no channel to answer on.
  void Handshake() {
    Arm();
    handshaking_ = true;
    stream_.async_handshake(ssl::stream_base::server, [self = this->shared_from_this()](beast::error_code ec) {
      self->handshaking_ = false;
      if (ec) {
        spdlog::debug("event=tls_handshake_failed error=\"{}\"", ec.message());
        return self->CloseSocket();
      }
      self->tls_up_ = true;
      self->ReadHeader();
    });
  }

  void ReadHeader() {
    parser_.emplace();
    parser_->header_limit(kMaxHeaderBytes);
    parser_->body_limit(server_.options.max_body_bytes);
    Arm();
    awaiting_header_ = true;
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = this->shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
  }

  void OnHeader(beast::error_code ec) {
    awaiting_header_ = false;
    if (ec) return OnReadError(ec);
    // curl and others wait for "100 Continue" before sending a large body.
    const auto& request = parser_->get();
    if (beast::iequals(request[http::field::expect], "100-continue")) {
      continue_.emplace(http::status::continue_, request.version());
      Arm();
      http::async_write(stream_, *continue_, [self = this->shared_from_this()](beast::error_code ec, size_t) {
        if (ec) return self->OnReadError(ec);
        self->ReadBody();
      });
      return;
    }
    // A small request usually arrives whole: parse its body from the buffer, no I/O needed.
    while (!parser_->is_done() && buffer_.size() > 0) {
      const size_t used = parser_->put(buffer_.data(), ec);
      buffer_.consume(used);
      if (ec == http::error::need_more) break;
      if (ec) return OnReadError(ec);
      if (used == 0) break;
    }
    if (parser_->is_done()) return Handle();
    ReadBody();
  }

  void ReadBody() {
    Arm();
    http::async_read(stream_, buffer_, *parser_,
                     [self = this->shared_from_this()](beast::error_code ec, size_t) { self->OnBody(ec); });
  }

  void OnBody(beast::error_code ec) {
    if (ec) return OnReadError(ec);
    Handle();
  }

  void OnReadError(beast::error_code ec) {
    Disarm();
    if (ec == http::error::body_limit) {
      return ReplyError(413, "request body is larger than the limit of " +
                                 std::to_string(server_.options.max_body_bytes) + " bytes");
    }
    if (ec == http::error::header_limit) return ReplyError(431, "request header is too large");
    // Closed, reset or timed out: nobody to answer. A malformed request gets a 400 first.
    if (timed_out_ || ec == http::error::end_of_stream || ec == net::error::eof ||
        ec == net::error::connection_reset || ec == net::error::operation_aborted ||
        ec == http::error::partial_message || ec == ssl::error::stream_truncated) {
      return CloseSocket();
    }
    if (ec.category() == http::make_error_code(http::error::bad_version).category()) {
      return ReplyError(400, "Malformed HTTP request: " + ec.message());
    }
    CloseSocket();
  }

  void Handle() {
    Disarm();
    const auto& request = parser_->get();
    const std::string_view client_id = View(request["X-Request-Id"]);
    // The client's id is echoed; a failed request without one gets a fresh id (it is in the
    // log line about it). A successful one needs none, and making one costs a tenth of a
    // small request's time.
    call_.request_id.clear();
    if (IsUsableRequestId(client_id)) call_.request_id.assign(client_id);
    call_.response.body.swap(body_);  // reuse the last response's buffer
    if (request.method() == http::verb::options && server_.options.enable_cors) {
      // A browser's CORS preflight: the headers below are the answer.
      call_.response.http_status = 204;
      call_.response.model_version = -1;
      call_.response.inference_header_length = 0;
      call_.response.body.clear();
      return Respond();
    }
    // The request may be answered on this thread, before Start returns, or on a batch thread;
    // whichever of the two comes second responds. Meanwhile the call holds the connection.
    waiting_ = this->shared_from_this();
    answer_.store(kStarting, std::memory_order_relaxed);
    // A request not run within the REST timeout would find its connection gone.
    RestRequest rest;
    rest.method = View(request.method_string());
    rest.target = View(request.target());
    rest.body = request.body();
    rest.routing_key = View(request[kRoutingKeyHeader]);
    rest.deadline = std::chrono::steady_clock::now() + server_.options.timeout;
    rest.inference_header_length = View(request[open_inference::kHeaderLengthHeader]);
    rest.authorization = View(request[http::field::authorization]);
    rest.origin = View(request[http::field::origin]);
    rest.peer = peer_;
    server_.api.Start(rest, &call_);
    if (answer_.exchange(kStarted, std::memory_order_acq_rel) == kAnswered) {
      waiting_.reset();  // the handler running this holds the connection too
      Respond();
    }
  }

  // RestCall::OnAnswered.
  void OnAnswered() {
    if (answer_.exchange(kAnswered, std::memory_order_acq_rel) != kStarted) return;  // Handle responds
    // Answered on a batch thread: the response is written on the connection's own strand.
    net::post(stream_.get_executor(), [self = std::move(waiting_)] { self->Respond(); });
  }

  void Respond() {
    const auto& request = parser_->get();
    const RestResponse& rest = call_.response;
    response_.clear();
    response_.result(rest.http_status);
    response_.version(request.version());
    const bool keep_alive = request.keep_alive() && !server_.draining.load(std::memory_order_relaxed);
    response_.keep_alive(keep_alive);
    if (rest.http_status != 204) {
      response_.set(http::field::content_type, beast::string_view(rest.content_type.data(), rest.content_type.size()));
    }
    if (!call_.request_id.empty()) response_.set("X-Request-Id", call_.request_id);
    if (rest.model_version >= 0) response_.set("X-Model-Version", std::to_string(rest.model_version));
    if (rest.inference_header_length > 0) {
      response_.set(open_inference::kHeaderLengthHeader, std::to_string(rest.inference_header_length));
    }
    // Every 503 is a moment's absence (a drain, a model between versions): say when to retry.
    if (rest.http_status == 503) response_.set(http::field::retry_after, "1");
    SetCors();
    response_.body().swap(call_.response.body);
    response_.prepare_payload();
    Write(!keep_alive);
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
    // The v2 binary extension's header and ours may be sent, and read back, from a page.
    response_.set(http::field::access_control_allow_headers,
                  "Content-Type, Inference-Header-Content-Length, X-Request-Id, X-Routing-Key");
    response_.set(http::field::access_control_expose_headers,
                  "Inference-Header-Content-Length, X-Request-Id, X-Model-Version");
  }

  void Write(bool close) {
    Arm();
    http::async_write(stream_, response_, [self = this->shared_from_this(), close](beast::error_code ec, size_t) {
      self->Disarm();
      self->body_.swap(self->response_.body());
      self->body_.clear();
      if (ec) return self->CloseSocket();
      if (close) return self->CloseAfterAnswer();
      self->ReadHeader();
    });
  }

  // The answer sent was the last: TLS first says so (close_notify) and waits, within the
  // timeout, for the client's; then the socket closes.
  void CloseAfterAnswer() {
    if constexpr (kTls) {
      if (tls_up_) {
        tls_up_ = false;
        closing_ = true;
        Arm();
        stream_.async_shutdown([self = this->shared_from_this()](beast::error_code) { self->CloseSocket(); });
        return;
      }
    }
    CloseSocket();
  }

  void CloseSocket() {
    Disarm();
    closing_ = false;
    beast::error_code ignored;
    socket().shutdown(tcp::socket::shutdown_send, ignored);
    socket().close(ignored);
  }

  Stream stream_;
  HttpServer::Impl& server_;
  std::list<std::weak_ptr<OpenConnection>>::iterator registration_;
  std::atomic<int64_t> deadline_ns_{0};  // steady-clock nanoseconds; 0: no I/O pending
  bool timed_out_ = false;
  bool tls_up_ = false;           // the handshake is done and no close_notify was sent
  bool handshaking_ = false;      // the TLS handshake is under way
  bool closing_ = false;          // waiting for the client's close_notify
  bool awaiting_header_ = false;  // a read of the next request's header is pending
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::optional<http::response<http::empty_body>> continue_;
  http::response<http::string_body> response_;
  std::string body_;  // kept between requests so a keep-alive connection reuses its capacity
  std::string peer_;  // the client's address, as gRPC names peers

  // The connection's one request in flight.
  class Call final : public RestCall {
   public:
    explicit Call(Connection& connection) : connection_(connection) {}

   private:
    void OnAnswered() override { connection_.OnAnswered(); }
    Connection& connection_;
  };
  Call call_{*this};
  enum AnswerPhase { kStarting, kStarted, kAnswered };
  std::atomic<int> answer_{kStarting};
  std::shared_ptr<Connection> waiting_;  // the connection, while its request is out
};

}  // namespace

void HttpServer::Impl::Accept() {
  acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
    if (!ec && options.max_connections > 0 && OpenConnections() >= options.max_connections) {
      // Over the cap: closed at once, so that idle or slow clients cannot exhaust the
      // server's file descriptors and memory. Logged once per burst.
      if (!refusing.exchange(true)) {
        spdlog::warn("event=http_connections_full limit={} action=\"closing new connections\"", options.max_connections);
      }
      beast::error_code ignored;
      socket.shutdown(tcp::socket::shutdown_both, ignored);
      socket.close(ignored);
    } else if (!ec) {
      refusing.store(false);
      accept_failing = false;
      beast::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      if (tls) {
        std::make_shared<Connection<ssl::stream<tcp::socket>>>(*this, std::move(socket), *tls)->Start();
      } else {
        std::make_shared<Connection<tcp::socket>>(*this, std::move(socket))->Start();
      }
    } else {
      // Out of file descriptors (or memory): the connection stays queued, so accepting again
      // at once fails at once, in a loop that would burn a core and flood the log. Retry
      // after a pause, in which closing connections give their descriptors back.
      if (!accept_failing) {
        spdlog::warn("event=http_accept_failed error=\"{}\" action=\"retrying every {} ms\"", ec.message(),
                     kAcceptRetry.count());
      }
      accept_failing = true;
      accept_retry_timer.expires_after(kAcceptRetry);
      accept_retry_timer.async_wait([this](beast::error_code wait_ec) {
        if (!wait_ec) Accept();
      });
      return;
    }
    Accept();
  });
}

void HttpServer::Impl::Sweep() {
  sweep_timer.expires_after(sweep_period);
  sweep_timer.async_wait([this](beast::error_code ec) {
    if (ec) return;
    const int64_t now = NowNanos();
    {
      std::lock_guard<std::mutex> lock(connections_mu);
      for (const std::weak_ptr<OpenConnection>& weak : connections) {
        if (std::shared_ptr<OpenConnection> connection = weak.lock()) sweeping.push_back(std::move(connection));
      }
    }
    // Outside the lock: dropping the last reference runs a destructor that takes it.
    for (const std::shared_ptr<OpenConnection>& connection : sweeping) connection->ExpireIfDue(now);
    sweeping.clear();
    Sweep();
  });
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() { Stop(); }

StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options, const RestApi& api) {
  if (options.num_threads < 1) return InvalidArgument("the REST server needs at least one thread");
  auto impl = std::make_unique<Impl>(options, api);
  if (options.tls) {
    LS_ASSIGN_OR_RETURN(impl->tls, MakeTlsContext(*options.tls));
  }
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
  impl->Sweep();
  Impl* raw = impl.get();
  for (int i = 0; i < options.num_threads; ++i) impl->threads.emplace_back([raw] { raw->ioc.run(); });
  return std::make_unique<HttpServer>(std::move(impl));
}

int HttpServer::port() const { return impl_->bound_port; }

int HttpServer::Drain(std::chrono::milliseconds timeout) {
  impl_->draining.store(true);
  net::post(impl_->acceptor.get_executor(), [this] { impl_->CloseAcceptor(); });
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int left = 0;
  for (;;) {
    std::vector<std::shared_ptr<OpenConnection>> open;
    {
      std::lock_guard<std::mutex> lock(impl_->connections_mu);
      for (const std::weak_ptr<OpenConnection>& weak : impl_->connections) {
        if (std::shared_ptr<OpenConnection> connection = weak.lock()) open.push_back(std::move(connection));
      }
    }
    left = static_cast<int>(open.size());
    if (open.empty() || std::chrono::steady_clock::now() >= deadline) break;
    // Again each round: a connection that was busy may be idle now.
    for (const std::shared_ptr<OpenConnection>& connection : open) connection->CloseIfIdle();
    open.clear();  // outside the lock: the last reference may go here
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  Stop();
  return left;
}

void HttpServer::Stop() {
  std::call_once(impl_->stop_once, [this] {
    net::post(impl_->acceptor.get_executor(), [this] { impl_->CloseAcceptor(); });
    impl_->ioc.stop();
    for (std::thread& t : impl_->threads) t.join();
  });
}

}  // namespace lockstep
