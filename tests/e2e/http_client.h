// A small blocking HTTP/1.1 client for the end-to-end tests: one keep-alive connection to
// 127.0.0.1, plain or over TLS. Boost.Beast stays inside http_client.cc, compiled once, so that the test files
// (several of them, each built three times by scripts/test) do not all instantiate it.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

namespace lockstep::e2e {

struct HttpResult {
  int status = 0;  // 0: the request failed at the transport
  std::string body;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string error;
  // Over TLS, when the server ended the connection after this response: whether it said so
  // with close_notify (a clean close) rather than just dropping the connection.
  bool tls_closed_cleanly = false;
};

// HTTPS: the server's certificate must chain to `ca_pem` and name `host`; `cert_pem` and
// `key_pem`, when set, are the client's certificate for mutual TLS.
struct TlsClientOptions {
  std::string ca_pem;
  std::string cert_pem;
  std::string key_pem;
  std::string host = "localhost";
};

class HttpClient {
 public:
  explicit HttpClient(int port, std::optional<TlsClientOptions> tls = std::nullopt);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Sends one request on the kept-alive connection (reconnecting if the server closed it).
  HttpResult Request(const std::string& method, const std::string& target, const std::string& body = "",
                     const std::map<std::string, std::string>& headers = {});
  HttpResult Get(const std::string& target) { return Request("GET", target); }
  HttpResult Post(const std::string& target, const std::string& body) { return Request("POST", target, body); }

 private:
  struct Connection;
  int port_;
  std::optional<TlsClientOptions> tls_;
  std::unique_ptr<Connection> connection_;
};

}  // namespace lockstep::e2e
