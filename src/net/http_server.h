// HttpServer: an asynchronous HTTP/1.1 server (keep-alive) that can also upgrade a
// request to a WebSocket. Runs on the io_context it is given; every handler is called
// on that context's thread.
//
//   accept -> read header -> plan_body? -> read body (bounded; into memory or a sink)
//          -> upgrade? on_websocket : on_request(respond)
//
// A response whose body_file is set is sent from that file in pieces.
//
// With enable_tls() each connection is told apart by its first bytes: a TLS handshake
// gets TLS with the given certificate; plain HTTP is served only to peers on this
// machine (loopback) unless plain is allowed for everyone, and otherwise answered
// with one 400 saying to use TLS.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <cstdint>
#include <memory>
#include <optional>

#include "common/result.h"
#include "net/http_types.h"
#include "net/ws_connection.h"

namespace ag::net {

struct TlsIdentity;

// The bytes of a connection upgraded to a protocol of the application's own, after the
// server's 101: plain TCP, which the owner may read straight from socket() (recv,
// splice), or TLS, read with read_some.
class RawStream {
 public:
  virtual ~RawStream() = default;
  // The TCP socket underneath: to wait until it is readable, and (plain()) to read.
  virtual boost::asio::ip::tcp::socket& socket() = 0;
  virtual bool plain() const = 0;
  // Reads what has arrived, without blocking: the bytes read (> 0), or 0 with `ec`:
  // would_block once everything that arrived is read (wait for socket() to turn
  // readable), eof at the end, or another error.
  virtual size_t read_some(char* data, size_t size, boost::system::error_code& ec) = 0;
  virtual void close() = 0;
};

// A connection upgraded to a protocol of the application's own, with what the client
// sent past its request.
struct RawUpgrade {
  std::unique_ptr<RawStream> stream;
  std::string leftover;
  HttpRequest request;
  std::shared_ptr<void> held;  // the connection's admission: keep it while the stream lives
};

struct ServerHandlers {
  // Every plain request. The handler may respond later (long polls).
  std::function<void(HttpRequest, Respond)> on_request;
  // A WebSocket upgrade request: return a response to refuse it (e.g. 401), or nullopt
  // to accept, after which on_websocket gets the open connection.
  std::function<std::optional<HttpResponse>(const HttpRequest&)> check_upgrade;
  std::function<void(std::shared_ptr<WsConnection>, const HttpRequest&)> on_websocket;
  // A request whose Upgrade header names `raw_protocol` is checked with check_upgrade
  // too; once accepted, the server writes the 101 and on_raw_upgrade gets the stream
  // (plain or TLS, as the connection came).
  std::string raw_protocol;
  std::function<void(RawUpgrade)> on_raw_upgrade;
  // Largest body accepted for a request, decided from its method and target once the
  // header is read (package uploads may be larger than API calls). Optional.
  std::function<size_t(const std::string& method, const std::string& target)> body_limit;
  // Decides, from the request's header alone (empty body), where its body goes:
  // into a sink as it arrives (large uploads), nowhere before a refusal (a wrong
  // token on an upload), or into HttpRequest::body (neither set). Optional.
  std::function<BodyPlan(const HttpRequest& header)> plan_body;
};

class HttpServer {
 public:
  HttpServer(boost::asio::io_context& io, ServerHandlers handlers, size_t max_body_bytes);
  ~HttpServer();

  // Speaks TLS with `identity` (net/tls.h) from now on; `plain_for_loopback_only`:
  // whether plain HTTP is refused to other machines. Errors: kInvalidArgument when the
  // certificate or key cannot be used.
  Status enable_tls(const TlsIdentity& identity, bool plain_for_loopback_only);

  // Binds and starts accepting. Errors: kUnavailable when the address is in use or
  // cannot be bound, with the address and port in the message.
  Status listen(const std::string& address, uint16_t port);
  void stop();

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace ag::net
