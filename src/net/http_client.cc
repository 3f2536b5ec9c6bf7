#include "net/http_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace ag::net {
namespace {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
}  // namespace

Result<Endpoint> parse_endpoint(const std::string& text, uint16_t default_port) {
  std::string rest = text;
  for (const char* scheme : {"http://", "ws://"}) {
    if (rest.rfind(scheme, 0) == 0) rest = rest.substr(std::string(scheme).size());
  }
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  if (rest.empty()) return invalid_argument("address is empty; expected HOST:PORT, e.g. 127.0.0.1:6379");
  Endpoint ep;
  size_t colon = rest.rfind(':');
  if (colon == std::string::npos) {
    ep.host = rest;
    ep.port = default_port;
    return ep;
  }
  ep.host = rest.substr(0, colon);
  std::string port = rest.substr(colon + 1);
  if (ep.host.empty() || port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string::npos || std::stoi(port) == 0 ||
      std::stoi(port) > 65535) {
    return invalid_argument("'" + text + "' is not a valid address; expected HOST:PORT, e.g. 127.0.0.1:6379");
  }
  ep.port = static_cast<uint16_t>(std::stoi(port));
  return ep;
}

Result<HttpResponse> http_call(const Endpoint& to, const std::string& method,
                               const std::string& target, const std::string& body,
                               const std::string& token, int timeout_ms) {
  asio::io_context io;
  beast::tcp_stream stream(io);
  auto unreachable = [&](const std::string& why) {
    return Error{ErrorCode::kUnavailable, "cannot reach head at " + to.to_string() + ": " + why};
  };
  beast::error_code ec;
  tcp::resolver resolver(io);
  auto results = resolver.resolve(to.host, std::to_string(to.port), ec);
  if (ec) return unreachable(ec.message());

  http::response<http::string_body> res;
  beast::flat_buffer buffer;
  http::request<http::string_body> req{http::string_to_verb(method), target, 11};
  req.set(http::field::host, to.host);
  req.set(http::field::user_agent, "ag-cli");
  if (!token.empty()) req.set(http::field::authorization, "Bearer " + token);
  if (!body.empty() || method == "POST") {
    req.set(http::field::content_type, "application/json");
    req.body() = body;
  }
  req.prepare_payload();
  http::response_parser<http::string_body> parser;
  parser.body_limit(1ull << 31);

  std::string failure;
  stream.expires_after(std::chrono::milliseconds(timeout_ms));
  stream.async_connect(results, [&](beast::error_code cec, const tcp::endpoint&) {
    if (cec) {
      failure = cec == beast::error::timeout ? "timed out connecting" : cec.message();
      return;
    }
    http::async_write(stream, req, [&](beast::error_code wec, size_t) {
      if (wec) {
        failure = wec.message();
        return;
      }
      http::async_read(stream, buffer, parser, [&](beast::error_code rec, size_t) {
        if (rec) failure = rec == beast::error::timeout ? "no answer within " + std::to_string(timeout_ms) + " ms" : rec.message();
      });
    });
  });
  io.run();
  if (!failure.empty()) return unreachable(failure);
  res = parser.release();
  HttpResponse out;
  out.status = static_cast<int>(res.result_int());
  out.body = std::move(res.body());
  out.content_type = std::string(res[http::field::content_type]);
  for (const auto& field : res) out.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  return out;
}

}  // namespace ag::net
