#include "net/ws_client.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>

#include <boost/beast/websocket/ssl.hpp>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "net/beast_ws.h"
#include "net/tls_client.h"

namespace ag::net {
namespace {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace websocket = boost::beast::websocket;
using tcp = asio::ip::tcp;

template <class NextLayer>
struct Dial : std::enable_shared_from_this<Dial<NextLayer>> {
  static constexpr bool kTls = !std::is_same_v<NextLayer, beast::tcp_stream>;
  WsDialOptions options;
  std::function<void(Result<std::shared_ptr<WsConnection>>)> done;
  std::shared_ptr<asio::ssl::context> tls;  // kept alive with the stream
  websocket::stream<NextLayer> ws;
  websocket::response_type response;

  Dial(asio::io_context& io, WsDialOptions o, std::function<void(Result<std::shared_ptr<WsConnection>>)> d)
    requires(!kTls)
      : options(std::move(o)), done(std::move(d)), ws(io) {}
  Dial(asio::io_context& io, WsDialOptions o, std::function<void(Result<std::shared_ptr<WsConnection>>)> d,
       std::shared_ptr<asio::ssl::context> ctx)
    requires(kTls)
      : options(std::move(o)), done(std::move(d)), tls(std::move(ctx)), ws(io, *tls) {}

  void fail(ErrorCode code, const std::string& why) {
    done(Error{code, "cannot reach head at " + options.to.to_string() + ": " + why});
  }

  void start() {
    beast::error_code ec;
    auto addr = asio::ip::make_address(options.to.host, ec);
    if (ec) {
      // Resolve names synchronously: dialling happens rarely (start, reconnect).
      tcp::resolver resolver(ws.get_executor());
      auto results = resolver.resolve(options.to.host, std::to_string(options.to.port), ec);
      if (ec || results.empty()) return fail(ErrorCode::kUnavailable, "cannot resolve host: " + ec.message());
      addr = results.begin()->endpoint().address();
    }
    tcp::endpoint to(addr, options.to.port);
    auto& socket = beast::get_lowest_layer(ws).socket();
    socket.open(to.protocol(), ec);
    if (!ec && !options.bind_address.empty()) {
      auto local = asio::ip::make_address(options.bind_address, ec);
      if (!ec) socket.bind(tcp::endpoint(local, 0), ec);
      if (ec) return fail(ErrorCode::kUnavailable, "cannot bind local address " + options.bind_address + ": " + ec.message());
    }
    beast::get_lowest_layer(ws).expires_after(std::chrono::milliseconds(options.timeout_ms));
    beast::get_lowest_layer(ws).async_connect(to, [self = this->shared_from_this()](beast::error_code cec) {
      if (cec) return self->fail(ErrorCode::kUnavailable, cec == beast::error::timeout ? "timed out" : cec.message());
      beast::error_code ignored;
      beast::get_lowest_layer(self->ws).socket().set_option(tcp::no_delay(true), ignored);
      if constexpr (kTls) {
        // The head proves itself before the worker sends its token.
        detail::prepare_client(self->ws.next_layer().native_handle(), self->options.to);
        self->ws.next_layer().async_handshake(asio::ssl::stream_base::client, [self](beast::error_code hec) {
          if (hec) {
            // A head that does not verify against the pinned CA will not start to: final.
            bool unverified = detail::head_unverified(self->ws.next_layer().native_handle());
            return self->fail(unverified ? ErrorCode::kPermissionDenied : ErrorCode::kUnavailable,
                              detail::handshake_failure(hec.message(), self->ws.next_layer().native_handle(), self->options.to));
          }
          detail::remember_session(self->ws.next_layer().native_handle(), self->options.to);
          self->handshake();
        });
      } else {
        self->handshake();
      }
    });
  }

  void handshake() {
    auto headers = options.headers;
    ws.set_option(websocket::stream_base::decorator([headers](websocket::request_type& req) {
      for (const auto& [k, v] : headers) req.set(k, v);
    }));
    std::string host = options.to.to_string();
    ws.async_handshake(response, host, options.target, [self = this->shared_from_this()](beast::error_code ec) {
      if (ec) {
        int status = self->response.result_int();
        if (status && self->options.refusal) return self->done(self->options.refusal(status, self->response.body()));
        if (status == 401) {
          return self->fail(ErrorCode::kUnauthenticated,
                            "the head refused the worker's token (HTTP 401): " + self->response.body());
        }
        if (status == 403) {
          return self->fail(ErrorCode::kPermissionDenied,
                            "the head does not let this token register a node (HTTP 403): " + self->response.body());
        }
        std::string detail = status ? "HTTP " + std::to_string(status) + " " + self->response.body() : ec.message();
        return self->fail(ErrorCode::kUnavailable, "websocket handshake failed: " + detail);
      }
      std::string remote = beast::get_lowest_layer(self->ws).socket().remote_endpoint().address().to_string();
      auto conn = std::make_shared<detail::BeastWs<NextLayer>>(std::move(self->ws), remote);
      self->done(std::shared_ptr<WsConnection>(conn));
    });
  }
};

}  // namespace

void ws_dial(asio::io_context& io, const WsDialOptions& options,
             std::function<void(Result<std::shared_ptr<WsConnection>>)> done) {
  if (!options.to.tls()) return std::make_shared<Dial<beast::tcp_stream>>(io, options, std::move(done))->start();
  auto ctx = detail::client_context(options.to);
  if (!ctx.ok()) return done(ctx.error());
  std::make_shared<Dial<detail::TlsClientStream>>(io, options, std::move(done), ctx.value())->start();
}

}  // namespace ag::net
