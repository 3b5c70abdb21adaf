#include "tests/e2e/http_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>

namespace lockstep::e2e {

namespace beast = boost::beast;
namespace http = beast::http;

struct HttpClient::Connection {
  explicit Connection(int port) : stream(ioc) {
    stream.connect(boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"),
                                                  static_cast<unsigned short>(port)));
  }
  boost::asio::io_context ioc;
  beast::tcp_stream stream;
  beast::flat_buffer buffer;
};

HttpClient::HttpClient(int port) : port_(port) {}
HttpClient::~HttpClient() = default;

HttpResult HttpClient::Request(const std::string& method, const std::string& target, const std::string& body,
                               const std::map<std::string, std::string>& headers) {
  HttpResult result;
  try {
    if (!connection_) connection_ = std::make_unique<Connection>(port_);
    http::request<http::string_body> req(http::string_to_verb(method), target, 11);
    req.set(http::field::host, "127.0.0.1");
    req.set(http::field::content_type, "application/json");
    for (const auto& [k, v] : headers) req.set(k, v);
    req.keep_alive(true);
    req.body() = body;
    if (method != "GET" || !body.empty()) req.prepare_payload();
    http::write(connection_->stream, req);
    http::response_parser<http::string_body> parser;
    parser.body_limit(size_t{1} << 30);
    http::read(connection_->stream, connection_->buffer, parser);
    auto res = parser.release();
    result.status = res.result_int();
    result.body = res.body();
    for (const auto& field : res) {
      std::string name(field.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      result.headers[name] = std::string(field.value());
    }
    if (!res.keep_alive()) connection_.reset();
  } catch (const std::exception& e) {
    result.status = 0;
    result.error = e.what();
    connection_.reset();
  }
  return result;
}

}  // namespace lockstep::e2e
