#include "net/http_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <functional>
#include <limits>
#include <sstream>
#include <optional>
#include <vector>

#include "net/tls.h"
#include "net/tls_client.h"

namespace ag::net {
namespace {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
}  // namespace

Result<Endpoint> parse_endpoint(const std::string& text, uint16_t default_port) {
  std::string rest = text;
  for (const char* scheme : {"http://", "ws://", "https://", "wss://"}) {
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

Result<std::vector<Endpoint>> parse_endpoints(const std::string& text, uint16_t default_port) {
  std::vector<Endpoint> out;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    std::string piece = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    while (!piece.empty() && piece.front() == ' ') piece.erase(0, 1);
    while (!piece.empty() && piece.back() == ' ') piece.pop_back();
    auto one = parse_endpoint(piece, default_port);
    if (!one.ok()) {
      if (piece.empty()) return invalid_argument("'" + text + "' has an empty address; expected HOST:PORT[,HOST:PORT...]");
      return one.error();
    }
    for (const auto& seen : out) {
      if (seen.to_string() == one->to_string()) return invalid_argument("'" + text + "' names " + seen.to_string() + " twice");
    }
    out.push_back(std::move(one.value()));
    if (out.size() > kMaxHeadAddresses) {
      return invalid_argument("'" + text + "' names more than " + std::to_string(kMaxHeadAddresses) + " heads");
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

namespace {

http::request<http::string_body> make_request(const Endpoint& to, const std::string& method, const std::string& target,
                                              const std::string& token) {
  http::request<http::string_body> req{http::string_to_verb(method), target, 11};
  req.set(http::field::host, to.host);
  req.set(http::field::user_agent, "ag-cli");
  if (!token.empty()) req.set(http::field::authorization, "Bearer " + token);
  return req;
}

HttpResponse from_header(const http::response_header<>& header) {
  HttpResponse out;
  out.status = static_cast<int>(header.result_int());
  out.content_type = std::string(header[http::field::content_type]);
  for (const auto& field : header) out.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  return out;
}

// Connects (with TLS: handshakes, verifying the head against the pinned CA), then
// hands the open stream to `body`, which writes the request and reads the answer
// asynchronously, reporting a failure by setting a message. Bounded by timeout_ms as a
// whole. Returns the failure, or "" when the exchange completed.
template <class Body>
std::string exchange(const Endpoint& to, int timeout_ms, Body&& body) {
  asio::io_context io;
  beast::error_code ec;
  tcp::resolver resolver(io);
  auto results = resolver.resolve(to.host, std::to_string(to.port), ec);
  if (ec) return ec.message();
  beast::flat_buffer buffer;
  std::string failure;
  auto connect_failure = [](beast::error_code cec) {
    return cec == beast::error::timeout ? std::string("timed out connecting") : cec.message();
  };
  if (!to.tls()) {
    beast::tcp_stream stream(io);
    stream.expires_after(std::chrono::milliseconds(timeout_ms));
    stream.async_connect(results, [&](beast::error_code cec, const tcp::endpoint&) {
      if (cec) {
        failure = connect_failure(cec);
        return;
      }
      body(stream, buffer, failure);
    });
    io.run();
    stream.socket().shutdown(tcp::socket::shutdown_both, ec);
    return failure;
  }
  auto ctx = detail::client_context(to);
  if (!ctx.ok()) return ctx.error().message;
  detail::TlsClientStream stream(io, *ctx.value());
  detail::prepare_client(stream.native_handle(), to);
  beast::get_lowest_layer(stream).expires_after(std::chrono::milliseconds(timeout_ms));
  beast::get_lowest_layer(stream).async_connect(results, [&](beast::error_code cec, const tcp::endpoint&) {
    if (cec) {
      failure = connect_failure(cec);
      return;
    }
    stream.async_handshake(asio::ssl::stream_base::client, [&](beast::error_code hec) {
      if (hec) {
        failure = hec == beast::error::timeout ? "timed out in the TLS handshake" : detail::handshake_failure(hec.message(), stream.native_handle(), to);
        return;
      }
      body(stream, buffer, failure);
    });
  });
  io.run();
  // Kept only now: TLS 1.3 hands out its resumption ticket after the handshake, with
  // the first answer.
  if (failure.empty()) detail::remember_session(stream.native_handle(), to);
  beast::get_lowest_layer(stream).socket().shutdown(tcp::socket::shutdown_both, ec);
  return failure;
}

std::string read_failure(beast::error_code ec, int timeout_ms) {
  return ec == beast::error::timeout ? "no answer within " + std::to_string(timeout_ms) + " ms" : ec.message();
}

Error unreachable(const Endpoint& to, const std::string& why) {
  return Error{ErrorCode::kUnavailable, "cannot reach head at " + to.to_string() + ": " + why};
}

// Sends the request with `write_request(stream, done)`, reads the answer's header into
// `parser` and hands its body to `deliver(data, size)` (false: stop reading): straight
// from the socket in large reads when its length is known (the parser's small reads
// cost more than the bytes), else through the parser a buffer at a time (chunked
// bodies). Returns the failure, or "".
template <class Write>
std::string exchange_reading(const Endpoint& to, int timeout_ms, http::response_parser<http::buffer_body>& parser,
                             Write&& write_request, const std::function<bool(const char*, size_t)>& deliver) {
  constexpr size_t kChunkBytes = 1 << 20;
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());  // (boost::none trips a comparison bug in Beast 1.74)
  std::vector<char> chunk(kChunkBytes);
  uint64_t left = 0;
  std::function<void()> read_piece, read_raw;
  return exchange(to, timeout_ms, [&](auto& stream, beast::flat_buffer& buffer, std::string& failed) {
    read_piece = [&]() {
      parser.get().body().data = chunk.data();
      parser.get().body().size = chunk.size();
      http::async_read(stream, buffer, parser, [&](beast::error_code rec, size_t) {
        if (rec == http::error::need_buffer) rec = {};
        if (rec) {
          failed = read_failure(rec, timeout_ms);
          return;
        }
        if (!deliver(chunk.data(), chunk.size() - parser.get().body().size)) return;
        if (!parser.is_done()) read_piece();
      });
    };
    read_raw = [&]() {
      if (left == 0) return;
      stream.async_read_some(asio::buffer(chunk.data(), std::min<uint64_t>(chunk.size(), left)),
                             [&](beast::error_code rec, size_t got) {
                               if (rec) {
                                 failed = read_failure(rec, timeout_ms);
                                 return;
                               }
                               left -= got;
                               if (deliver(chunk.data(), got)) read_raw();
                             });
    };
    write_request(stream, [&](beast::error_code wec) {
      if (wec) {
        failed = wec.message();
        return;
      }
      http::async_read_header(stream, buffer, parser, [&](beast::error_code rec, size_t) {
        if (rec) {
          failed = read_failure(rec, timeout_ms);
          return;
        }
        if (parser.is_done()) return;
        if (!parser.content_length() || parser.chunked()) return read_piece();
        left = *parser.content_length();
        size_t buffered = std::min<uint64_t>(left, buffer.size());
        left -= buffered;
        if (buffered && !deliver(static_cast<const char*>(buffer.data().data()), buffered)) return;
        buffer.consume(buffered);
        read_raw();
      });
    });
  });
}

// Sends the request with `write_request(stream, done)` and reads the whole response
// into memory.
template <class Write>
Result<HttpResponse> call_reading_whole(const Endpoint& to, int timeout_ms, Write&& write_request) {
  constexpr uint64_t kMaxBody = 1ull << 31;
  http::response_parser<http::buffer_body> parser;
  std::string body;
  bool too_large = false;
  std::string failure = exchange_reading(to, timeout_ms, parser, write_request, [&](const char* data, size_t got) {
    if (body.empty() && parser.content_length() && *parser.content_length() <= kMaxBody) {
      body.reserve(*parser.content_length());
    }
    if (body.size() + got > kMaxBody) {
      too_large = true;
      return false;
    }
    body.append(data, got);
    return true;
  });
  if (too_large) return unreachable(to, "its answer is larger than " + std::to_string(kMaxBody >> 20) + " MiB");
  if (!failure.empty()) return unreachable(to, failure);
  HttpResponse out = from_header(parser.get().base());
  out.body = std::move(body);
  return out;
}

}  // namespace

Result<HttpResponse> http_call(const Endpoint& to, const std::string& method,
                               const std::string& target, const std::string& body,
                               const std::string& token, int timeout_ms) {
  auto req = make_request(to, method, target, token);
  if (!body.empty() || method == "POST") {
    req.set(http::field::content_type, "application/json");
    req.body() = body;
  }
  req.prepare_payload();
  return call_reading_whole(to, timeout_ms, [&req](auto& stream, auto done) {
    http::async_write(stream, req, [done](beast::error_code ec, size_t) { done(ec); });
  });
}

Result<HttpResponse> http_post(const Endpoint& to, const std::string& target, const std::string& body,
                               const std::vector<std::pair<std::string, std::string>>& headers, int timeout_ms,
                               size_t max_answer_bytes) {
  http::request<http::string_body> req{http::verb::post, target, 11};
  req.set(http::field::host, to.host);
  req.set(http::field::user_agent, "AetherGrid");
  req.set(http::field::content_type, "application/json");
  for (const auto& [name, value] : headers) req.set(name, value);
  req.body() = body;
  req.prepare_payload();
  http::response_parser<http::buffer_body> parser;
  std::string answer;
  std::string failure = exchange_reading(
      to, timeout_ms, parser,
      [&req](auto& stream, auto done) {
        http::async_write(stream, req, [done](beast::error_code ec, size_t) { done(ec); });
      },
      [&](const char* data, size_t got) {
        answer.append(data, std::min(got, max_answer_bytes - std::min(max_answer_bytes, answer.size())));
        return answer.size() < max_answer_bytes;
      });
  if (!failure.empty() && !parser.is_header_done()) {
    return Error{ErrorCode::kUnavailable, "cannot reach " + to.to_string() + ": " + failure};
  }
  HttpResponse out = from_header(parser.get().base());
  out.body = std::move(answer);
  return out;
}

Result<std::string> fetch_pinned_ca(Endpoint to, const std::string& fingerprint, int timeout_ms) {
  auto wanted = normalize_fingerprint(fingerprint);
  if (!wanted.ok()) return wanted.error();
  to.ca_pem.clear();
  to.tls_unverified = true;
  auto res = http_call(to, "GET", "/api/tls/ca", "", "", timeout_ms);
  if (!res.ok()) return res.error();
  if (res->status != 200) {
    return Error{ErrorCode::kUnavailable, "the head at " + to.to_string() + " has no cluster CA to give (HTTP " +
                                              std::to_string(res->status) + "): " + res->body};
  }
  auto got = certificate_fingerprint(res->body);
  if (!got.ok()) return Error{ErrorCode::kUnavailable, "the head at " + to.to_string() + " sent no certificate"};
  if (got.value() != wanted.value()) {
    return Error{ErrorCode::kPermissionDenied, "the head at " + to.to_string() + " has cluster CA " + got.value() +
                                                   ", not the pinned " + wanted.value() +
                                                   ": refusing to talk to it (a different head, or someone in "
                                                   "between)"};
  }
  return res->body;
}

Result<HttpResponse> http_upload(const Endpoint& to, const std::string& method, const std::string& target,
                                 std::string_view body, const std::string& token, int timeout_ms,
                                 const std::function<void(size_t sent)>& progress) {
  constexpr size_t kPieceBytes = 1 << 20;
  auto req = make_request(to, method, target, token);
  req.set(http::field::content_type, "application/octet-stream");
  req.content_length(body.size());
  std::ostringstream text;
  text << req.base();
  std::string header = text.str();
  size_t sent = 0;
  beast::error_code body_error;
  // Both live as long as the exchange (which runs to its end inside call_reading_whole).
  std::function<void()> send_piece;
  std::function<void(beast::error_code)> finish;
  auto res = call_reading_whole(to, timeout_ms, [&](auto& stream, auto done) {
    finish = done;
    send_piece = [&]() {
      if (sent == body.size()) return finish({});
      size_t n = std::min(kPieceBytes, body.size() - sent);
      asio::async_write(stream, asio::buffer(body.data() + sent, n), [&, n](beast::error_code ec, size_t) {
        if (ec) {
          // The head may have answered before taking the whole body (it refused it):
          // read that answer rather than report the reset.
          body_error = ec;
          return finish({});
        }
        sent += n;
        if (progress) progress(sent);
        send_piece();
      });
    };
    asio::async_write(stream, asio::buffer(header), [&](beast::error_code ec, size_t) {
      if (ec) return finish(ec);
      send_piece();
    });
  });
  if (!res.ok() && body_error) return unreachable(to, body_error.message());
  return res;
}

Result<HttpResponse> http_download(const Endpoint& to, const std::string& target, const std::string& token,
                                   int timeout_ms, const std::function<Status(const char*, size_t)>& on_data) {
  constexpr size_t kMaxErrorBody = 64 * 1024;
  auto req = make_request(to, "GET", target, token);
  req.prepare_payload();
  http::response_parser<http::buffer_body> parser;
  std::optional<Error> sink_error;
  std::string error_body;
  auto deliver = [&](const char* data, size_t got) {
    if (parser.get().result_int() == 200) {
      if (Status s = got ? on_data(data, got) : Status{}; !s) {
        sink_error = s.error();
        return false;
      }
    } else if (error_body.size() < kMaxErrorBody) {
      error_body.append(data, std::min(got, kMaxErrorBody - error_body.size()));
    }
    return true;
  };
  std::string failure = exchange_reading(
      to, timeout_ms, parser,
      [&req](auto& stream, auto done) {
        http::async_write(stream, req, [done](beast::error_code ec, size_t) { done(ec); });
      },
      deliver);
  if (sink_error) return *sink_error;
  if (!failure.empty()) return unreachable(to, failure);
  HttpResponse out = from_header(parser.get().base());
  out.body = std::move(error_body);
  return out;
}

}  // namespace ag::net
