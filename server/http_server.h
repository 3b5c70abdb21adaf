// The REST transport: an HTTP/1.1 server on Boost.Beast with keep-alive and pipelining, a
// pool of I/O threads (--rest_api_num_threads) that also run the requests, a cap on request
// bodies (413 beyond it), and a timeout on every read and write (--rest_api_timeout_in_ms),
// so a slow or idle client holds a connection for at most that long.
//
// With TLS (HttpServerOptions::tls) every connection starts with a TLS handshake, bounded by
// the same timeout, and with client_verify a client without a certificate signed by custom_ca
// is refused in the handshake. TLS 1.2 and later only.
//
// Every response is JSON. It carries X-Request-Id when the client sent a usable one (echoed)
// or when it is an error (a fresh id, also in the log line about it); inference responses
// carry X-Model-Version.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "runtime/status.h"
#include "server/rest_api.h"
#include "server/tls_config.h"

namespace lockstep {

struct HttpServerOptions {
  std::string address = "0.0.0.0";
  int port = 0;  // 0: an ephemeral port (see HttpServer::port())
  int num_threads = 4;
  std::chrono::milliseconds timeout{30000};
  size_t max_body_bytes = size_t{64} << 20;
  // Access-Control-Allow-* headers on every response, as --rest_api_enable_cors_support, and
  // OPTIONS (a browser's preflight) answered 204.
  bool enable_cors = false;
  // Open connections at most; one more is closed as soon as it is accepted. 0: no cap.
  size_t max_connections = 0;
  // Serve HTTPS with these; none: plain HTTP.
  std::optional<TlsCredentials> tls;
};

class HttpServer {
 public:
  // Binds, listens and starts the threads; the server answers from then on.
  static StatusOr<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options, const RestApi& api);
  ~HttpServer();  // Stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const;
  // Stops accepting, closes the connections that wait for a request, lets the requests being
  // read or run finish (each answered with Connection: close), and waits for every connection
  // to close, at most `timeout`; then Stop(). Returns how many connections were still open
  // (and are cut) at the deadline.
  int Drain(std::chrono::milliseconds timeout);
  // Stops accepting, closes connections and joins the threads (idempotent).
  void Stop();

  struct Impl;
  explicit HttpServer(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace lockstep
