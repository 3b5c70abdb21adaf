#include "tests/e2e/http_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cctype>
#include <variant>

namespace lockstep::e2e {

namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = boost::asio::ssl;

namespace {

boost::asio::ip::tcp::endpoint Loopback(int port) {
  return {boost::asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)};
}

}  // namespace

struct HttpClient::Connection {
  Connection(int port, const std::optional<TlsClientOptions>& tls) : context(ssl::context::tls_client) {
    if (!tls) {
      stream.emplace<beast::tcp_stream>(ioc).connect(Loopback(port));
      return;
    }
    context.add_certificate_authority(boost::asio::buffer(tls->ca_pem));
    context.set_verify_mode(ssl::verify_peer);
    if (!tls->cert_pem.empty()) {
      context.use_certificate_chain(boost::asio::buffer(tls->cert_pem));
      context.use_private_key(boost::asio::buffer(tls->key_pem), ssl::context::pem);
    }
    auto& secure = stream.emplace<beast::ssl_stream<beast::tcp_stream>>(ioc, context);
    secure.set_verify_callback(ssl::host_name_verification(tls->host));
    beast::get_lowest_layer(secure).connect(Loopback(port));
    secure.handshake(ssl::stream_base::client);
  }
  boost::asio::io_context ioc;
  ssl::context context;
  std::variant<std::monostate, beast::tcp_stream, beast::ssl_stream<beast::tcp_stream>> stream;
  beast::flat_buffer buffer;
};

HttpClient::HttpClient(int port, std::optional<TlsClientOptions> tls) : port_(port), tls_(std::move(tls)) {}
HttpClient::~HttpClient() = default;

HttpResult HttpClient::Request(const std::string& method, const std::string& target, const std::string& body,
                               const std::map<std::string, std::string>& headers) {
  HttpResult result;
  try {
    if (!connection_) connection_ = std::make_unique<Connection>(port_, tls_);
    http::request<http::string_body> req(http::string_to_verb(method), target, 11);
    req.set(http::field::host, "127.0.0.1");
    req.set(http::field::content_type, "application/json");
    req.keep_alive(true);
    for (const auto& [k, v] : headers) req.set(k, v);  // after: "Connection: close" wins
    req.body() = body;
    if (method != "GET" || !body.empty()) req.prepare_payload();
    http::response_parser<http::string_body> parser;
    parser.body_limit(size_t{1} << 30);
    std::visit(
        [&](auto& stream) {
          if constexpr (!std::is_same_v<std::decay_t<decltype(stream)>, std::monostate>) {
            http::write(stream, req);
            http::read(stream, connection_->buffer, parser);
          }
        },
        connection_->stream);
    auto res = parser.release();
    result.status = res.result_int();
    result.body = res.body();
    for (const auto& field : res) {
      std::string name(field.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      result.headers[name] = std::string(field.value());
    }
    if (!res.keep_alive()) {
      if (auto* secure = std::get_if<beast::ssl_stream<beast::tcp_stream>>(&connection_->stream)) {
        // Ours, then the server's close_notify; an error if the server dropped the connection.
        beast::error_code ec;
        secure->shutdown(ec);
        result.tls_closed_cleanly = !ec;
      }
      connection_.reset();
    }
  } catch (const std::exception& e) {
    result.status = 0;
    result.error = e.what();
    connection_.reset();
  }
  return result;
}

}  // namespace lockstep::e2e
