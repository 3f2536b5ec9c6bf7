#include "net/http_server.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/core/detect_ssl.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <spdlog/spdlog.h>
#include <fcntl.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <deque>
#include <fstream>
#include <limits>
#include <sstream>

#include "common/descriptors.h"

#include "net/admission.h"
#include "net/beast_ws.h"
#include "net/raw_streams.h"
#include "net/tls.h"

namespace ag::net {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace websocket = boost::beast::websocket;
using tcp = asio::ip::tcp;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

constexpr auto kIdleTimeout = std::chrono::seconds(120);

// The lowest port anyone may listen on (Linux's default 1024).
std::string unprivileged_port_start() {
  std::string port = "1024";
  std::ifstream("/proc/sys/net/ipv4/ip_unprivileged_port_start") >> port;
  return port;
}
// A connection must deliver a whole request header (or its TLS handshake) this soon
// after it opens or after its previous answer: a client that trickles bytes, or an idle
// keep-alive connection, does not hold a descriptor for long.
constexpr auto kHeaderTimeout = std::chrono::seconds(15);

// The request's method, target and headers; the body is left to the caller.
HttpRequest header_of(const http::request<http::string_body>& req, const std::string& remote) {
  HttpRequest out;
  out.method = std::string(req.method_string());
  out.target = std::string(req.target());
  out.remote_address = remote;
  for (const auto& field : req) {
    std::string name(field.name_string());
    for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    out.headers[name] = std::string(field.value());
  }
  return out;
}

// Takes a refused upload's body and drops it, so that the client, still sending,
// reads the refusal instead of a reset connection.
class DiscardSink final : public BodySink {
 public:
  Status write(const char*, size_t) override { return {}; }
};

constexpr size_t kBodyChunkBytes = 1 << 20;
// Most of a refused (unauthenticated) body the server reads and drops.
constexpr uint64_t kMaxRefusalDrainBytes = 8 << 20;

template <class Body>
void set_common_fields(http::response<Body>& out, const HttpResponse& res, bool keep_alive) {
  out.set(http::field::server, "aethergrid");
  out.set(http::field::content_type, res.content_type);
  out.set(http::field::cache_control, "no-store");
  for (const auto& [k, v] : res.headers) out.set(k, v);
  out.keep_alive(keep_alive);
}

http::response<http::string_body> to_beast(const HttpResponse& res, unsigned version, bool keep_alive) {
  http::response<http::string_body> out{static_cast<http::status>(res.status), version};
  set_common_fields(out, res, keep_alive);
  out.body() = res.body;
  out.prepare_payload();
  return out;
}

// A streamed response (server-sent events) on a connection taken over from its HTTP
// session. Writes go out one at a time from a queue; a pending read notices the client
// closing. The connection is never reused for another request.
template <class Stream>
class StreamedResponse final : public HttpStream, public std::enable_shared_from_this<StreamedResponse<Stream>> {
 public:
  // More than this queued unwritten behind the message being written means the reader
  // stalled: drop it (the browser's EventSource reconnects and reloads what it shows).
  // A stream thus holds at most this plus one message, however slow its reader.
  static constexpr size_t kMaxQueuedBytes = 1 << 20;

  explicit StreamedResponse(Stream stream) : stream_(std::move(stream)) {}

  void start(std::string header) {
    beast::get_lowest_layer(stream_).expires_never();
    read_for_close();
    write(std::move(header));
  }

  bool write(std::string data) override {
    if (closed_) return false;
    if (!outbox_.empty() && queued_bytes_ - outbox_.front().size() + data.size() > kMaxQueuedBytes) {
      close();
      return false;
    }
    queued_bytes_ += data.size();
    outbox_.push_back(std::move(data));
    if (!writing_) write_next();
    return true;
  }

  void close() override {
    if (closed_) return;
    closed_ = true;
    beast::error_code ec;
    beast::get_lowest_layer(stream_).socket().shutdown(tcp::socket::shutdown_both, ec);
    beast::get_lowest_layer(stream_).socket().close(ec);
    // Callbacks run later so that a subscriber list may drop this stream from inside them.
    auto callbacks = std::move(on_close_);
    asio::post(stream_.get_executor(), [callbacks = std::move(callbacks)]() {
      for (const auto& cb : callbacks) cb();
    });
  }

  bool is_open() const override { return !closed_; }
  // Keeps `thing` (the connection's admission) as long as this stream lives.
  void hold(std::shared_ptr<void> thing) { held_ = std::move(thing); }

  void on_close(std::function<void()> closed) override {
    if (closed_) {
      asio::post(stream_.get_executor(), std::move(closed));
      return;
    }
    on_close_.push_back(std::move(closed));
  }

 private:
  void write_next() {
    if (closed_ || outbox_.empty()) {
      writing_ = false;
      return;
    }
    writing_ = true;
    asio::async_write(stream_, asio::buffer(outbox_.front()),
                      [self = this->shared_from_this()](beast::error_code ec, size_t) {
                        if (ec) return self->close();
                        self->queued_bytes_ -= self->outbox_.front().size();
                        self->outbox_.pop_front();
                        self->write_next();
                      });
  }

  // The client sends nothing after its request; any read completion is its close.
  void read_for_close() {
    stream_.async_read_some(asio::buffer(read_buffer_), [self = this->shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->close();
      self->read_for_close();
    });
  }

  Stream stream_;
  std::deque<std::string> outbox_;
  size_t queued_bytes_ = 0;
  bool writing_ = false;
  bool closed_ = false;
  std::array<char, 512> read_buffer_{};
  std::vector<std::function<void()>> on_close_;
  std::shared_ptr<void> held_;
};

std::string stream_header(const HttpResponse& res, unsigned version) {
  http::response<http::empty_body> out{static_cast<http::status>(res.status), version};
  out.set(http::field::server, "aethergrid");
  out.set(http::field::content_type, res.content_type);
  out.set(http::field::cache_control, "no-store");
  for (const auto& [k, v] : res.headers) out.set(k, v);
  out.keep_alive(false);
  std::ostringstream text;
  text << out.base();
  return text.str();
}

}  // namespace


struct HttpServer::Impl : std::enable_shared_from_this<HttpServer::Impl> {
  asio::io_context& io;
  ServerHandlers handlers;
  size_t max_body_bytes;
  std::vector<std::unique_ptr<tcp::acceptor>> acceptors;
  bool stopped = false;
  std::unique_ptr<asio::ssl::context> tls;  // null: plain HTTP only
  std::chrono::steady_clock::time_point last_accept_warning{};
  std::chrono::steady_clock::time_point last_refusal_warning{};
  bool plain_for_loopback_only = true;

  Impl(asio::io_context& io_, ServerHandlers h, size_t max_body)
      : io(io_), handlers(std::move(h)), max_body_bytes(max_body) {}

  void accept(tcp::acceptor* acceptor) {
    acceptor->async_accept([self = shared_from_this(), acceptor](beast::error_code ec, tcp::socket socket) {
      if (self->stopped) return;
      if (!ec) {
        socket.set_option(tcp::no_delay(true), ec);
        self->start_connection(std::move(socket));
      } else if (ec == asio::error::no_descriptors || ec == asio::error::no_buffer_space ||
                 ec == asio::error::no_memory) {
        // Out of descriptors: the pending connection stays queued, so accepting again
        // at once would spin. Wait for connections to close.
        if (std::chrono::steady_clock::now() - self->last_accept_warning > std::chrono::seconds(10)) {
          self->last_accept_warning = std::chrono::steady_clock::now();
          spdlog::warn("cannot accept connections: {} (retrying every 100 ms)", ec.message());
        }
        auto timer = std::make_shared<asio::steady_timer>(self->io, std::chrono::milliseconds(100));
        timer->async_wait([self, acceptor, timer](beast::error_code) {
          if (!self->stopped) self->accept(acceptor);
        });
        return;
      }
      self->accept(acceptor);
    });
  }

  // Without TLS: plain HTTP. With it: the first bytes tell a TLS handshake (answered
  // with TLS) from plain HTTP, which is served only to peers on this machine: on
  // loopback, or from the very address they reached (a browser on the head's machine
  // opening http://NODE_IP:PORT).
  void start_connection(tcp::socket socket) {
    beast::error_code ec;
    auto ep = socket.remote_endpoint(ec);
    std::string remote = ec ? "" : ep.address().to_string();
    beast::error_code local_ec;
    auto local = socket.local_endpoint(local_ec);
    const bool this_machine = is_loopback_host(remote) || (!ec && !local_ec && local.address() == ep.address());
    std::shared_ptr<void> slot = detail::Admission::instance().admit(remote);
    if (!slot) {
      if (std::chrono::steady_clock::now() - last_refusal_warning > std::chrono::seconds(10)) {
        last_refusal_warning = std::chrono::steady_clock::now();
        spdlog::warn("refused a connection from {}: too many open connections (from it, or in all)", remote);
      }
      socket.close(ec);
      return;
    }
    if (!tls) {
      std::make_shared<Session<beast::tcp_stream>>(shared_from_this(), beast::tcp_stream(std::move(socket)),
                                                   beast::flat_buffer(), remote, std::move(slot))
          ->read();
      return;
    }
    struct Detect {
      beast::tcp_stream stream;
      beast::flat_buffer buffer;
      std::shared_ptr<void> slot;
    };
    auto detect = std::make_shared<Detect>(Detect{beast::tcp_stream(std::move(socket)), {}, std::move(slot)});
    detect->stream.expires_after(kHeaderTimeout);
    beast::async_detect_ssl(detect->stream, detect->buffer,
                            [self = shared_from_this(), detect, remote, this_machine](beast::error_code dec,
                                                                                      bool is_tls) {
                              if (dec) return;
                              if (is_tls) {
                                return self->start_tls(std::move(detect->stream), std::move(detect->buffer), remote,
                                                       detect->slot);
                              }
                              if (!self->plain_for_loopback_only || this_machine) {
                                std::make_shared<Session<beast::tcp_stream>>(self, std::move(detect->stream),
                                                                             std::move(detect->buffer), remote,
                                                                             std::move(detect->slot))
                                    ->read();
                                return;
                              }
                              self->refuse_plain(std::move(detect->stream), remote, std::move(detect->slot));
                            });
  }

  void start_tls(beast::tcp_stream stream, beast::flat_buffer buffer, const std::string& remote,
                 const std::shared_ptr<void>& slot) {
    auto tls_stream = std::make_shared<TlsStream>(std::move(stream), *tls);
    beast::get_lowest_layer(*tls_stream).expires_after(kHeaderTimeout);
    tls_stream->async_handshake(asio::ssl::stream_base::server, buffer.data(),
                                [self = shared_from_this(), tls_stream, remote, slot](beast::error_code ec, size_t used) {
                                  if (ec) {
                                    spdlog::debug("TLS handshake from {} failed: {}", remote, ec.message());
                                    return;
                                  }
                                  (void)used;
                                  std::make_shared<Session<TlsStream>>(self, std::move(*tls_stream),
                                                                       beast::flat_buffer(), remote, slot)
                                      ->read();
                                });
  }

  // Plain HTTP from another machine, where this head speaks TLS: one answer saying so.
  void refuse_plain(beast::tcp_stream stream, const std::string& remote, std::shared_ptr<void> slot) {
    spdlog::warn("refused plain HTTP from {}: this head takes TLS from other machines", remote);
    auto held = std::make_shared<beast::tcp_stream>(std::move(stream));
    auto text = std::make_shared<std::string>(
        "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: ");
    std::string body =
        R"({"error":"this head takes plain HTTP only from its own machine; connect with TLS (https://), )"
        R"(verifying the cluster CA whose fingerprint ag start-head prints"})";
    *text += std::to_string(body.size()) + "\r\n\r\n" + body;
    asio::async_write(*held, asio::buffer(*text), [held, text, slot = std::move(slot)](beast::error_code, size_t) {
      beast::error_code ignored;
      held->socket().shutdown(tcp::socket::shutdown_both, ignored);
      held->socket().close(ignored);
    });
  }

  // One HTTP connection; reads requests one after the other (keep-alive).
  template <class Stream>
  struct Session : std::enable_shared_from_this<Session<Stream>> {
    std::shared_ptr<Impl> server;
    Stream stream;
    beast::flat_buffer buffer;
    std::optional<http::request_parser<http::string_body>> parser;
    std::string remote;
    bool responding = false;

    // `read_so_far`: bytes already read from the connection (while telling TLS from
    // plain HTTP).
    Session(std::shared_ptr<Impl> s, Stream st, beast::flat_buffer read_so_far, std::string peer,
            std::shared_ptr<void> admitted)
        : server(std::move(s)),
          stream(std::move(st)),
          buffer(std::move(read_so_far)),
          remote(std::move(peer)),
          slot(std::move(admitted)) {}

    std::shared_ptr<void> slot;  // this connection's place (detail::Admission), handed on with it

    beast::tcp_stream& lowest() { return beast::get_lowest_layer(stream); }

    void read() {
      parser.emplace();
      // The parser compares Content-Length with its limit while reading the header;
      // the limit depends on the route, so it is set (and checked) once the header is in.
      limit = server->max_body_bytes;
      parser->body_limit(std::numeric_limits<std::uint64_t>::max());
      parser->header_limit(64 * 1024);
      lowest().expires_after(kHeaderTimeout);
      http::async_read_header(stream, buffer, *parser, [self = this->shared_from_this()](beast::error_code ec, size_t) {
        if (ec) return self->on_read(ec);
        self->read_body();
      });
    }

    void read_body() {
      const auto& header = parser->get();
      if (server->handlers.body_limit) {
        limit = server->handlers.body_limit(std::string(header.method_string()), std::string(header.target()));
      }
      if (parser->content_length() && *parser->content_length() > limit) return on_read(http::error::body_limit);
      parser->body_limit(limit);
      if (server->handlers.plan_body && !websocket::is_upgrade(header)) {
        HttpRequest request = header_of(header, remote);
        if (parse_target(request.target, &request.path, &request.query)) {
          BodyPlan plan = server->handlers.plan_body(request);
          if (plan.refusal) {
            // A small body is read and dropped so that the client reads the answer;
            // a large one is not worth taking from a client that may not send it.
            if (!parser->content_length() || *parser->content_length() > kMaxRefusalDrainBytes) {
              return write(*plan.refusal, header.version(), false);
            }
            refusal = std::move(plan.refusal);
            plan.sink = std::make_shared<DiscardSink>();
          }
          if (plan.sink) {
            request.body_sink = std::move(plan.sink);
            streamed_request = std::move(request);
            streamed_version = header.version();
            streamed_keep_alive = header.keep_alive();
            body_taken = 0;
            sink_failed = false;
            chunk.resize(kBodyChunkBytes);
            // With a Content-Length the body is read straight from the socket in large
            // pieces; the parser's small reads cost more than the bytes (chunked
            // bodies still go through it).
            if (parser->content_length() && !parser->chunked()) {
              body_left = *parser->content_length();
              size_t buffered = std::min<uint64_t>(body_left, buffer.size());
              if (buffered) {
                bool more = take_piece(static_cast<const char*>(buffer.data().data()), buffered);
                buffer.consume(buffered);
                body_left -= buffered;
                if (!more) return streamed_body_read(false);
              }
              return read_raw_body_piece();
            }
            body_parser.emplace(std::move(*parser));
            body_parser->body_limit(limit);
            return read_body_piece();
          }
        }
      }
      // Read into memory: counted against what the peer may hold at once (a chunked
      // body of unknown size counts as the route's limit).
      const size_t body_bytes = parser->chunked() ? limit : parser->content_length().value_or(0);
      if (body_bytes > 0) {
        body_hold = detail::Admission::instance().hold_body(remote, body_bytes);
        if (!body_hold) {
          spdlog::warn("refused a request from {}: its request bodies in memory would pass {} MiB", remote,
                       detail::Admission::kMaxBodyBytesPerPeer >> 20);
          return write({503, "application/json",
                        R"({"error":"too many large requests from your address are being read at once; retry )"
                        R"(once earlier ones are answered"})"},
                       header.version(), false);
        }
      }
      http::async_read(stream, buffer, *parser,
                       [self = this->shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
    }

    // Reads the next piece of a streamed body into `chunk` and hands it to the sink.
    void read_body_piece() {
      auto& body = body_parser->get().body();
      body.data = chunk.data();
      body.size = chunk.size();
      body.more = true;
      lowest().expires_after(kIdleTimeout);
      http::async_read(stream, buffer, *body_parser, [self = this->shared_from_this()](beast::error_code ec, size_t) {
        if (ec == http::error::need_buffer) ec = {};
        if (ec) return self->on_read_error(ec);
        size_t got = self->chunk.size() - self->body_parser->get().body().size;
        if (got && !self->take_piece(self->chunk.data(), got)) return self->streamed_body_read(false);
        if (self->body_parser->is_done()) return self->streamed_body_read(true);
        self->read_body_piece();
      });
    }

    void read_raw_body_piece() {
      if (body_left == 0) return streamed_body_read(true);
      lowest().expires_after(kIdleTimeout);
      stream.async_read_some(asio::buffer(chunk.data(), std::min<uint64_t>(chunk.size(), body_left)),
                             [self = this->shared_from_this()](beast::error_code ec, size_t got) {
                               if (ec) return self->close();
                               self->body_left -= got;
                               if (!self->take_piece(self->chunk.data(), got)) return self->streamed_body_read(false);
                               self->read_raw_body_piece();
                             });
    }

    // Hands a piece to the sink. Once the sink failed (its error reaches the handler)
    // the rest is read and dropped, so that the client, still sending, reads the
    // answer rather than a reset. False: stop reading (a refused body past its cap).
    bool take_piece(const char* data, size_t size) {
      body_taken += size;
      if (refusal && body_taken > kMaxRefusalDrainBytes) return false;
      if (!sink_failed) sink_failed = !streamed_request->body_sink->write(data, size);
      return true;
    }

    void streamed_body_read(bool whole) {
      unsigned version = streamed_version;
      // A body left unread cannot be skipped: the connection ends.
      bool keep_alive = whole && streamed_keep_alive;
      HttpRequest request = std::move(*streamed_request);
      streamed_request.reset();
      body_parser.reset();
      chunk = {};
      if (refusal) {
        HttpResponse res = std::move(*refusal);
        refusal.reset();
        return write(res, version, keep_alive);
      }
      dispatch(std::move(request), version, keep_alive);
    }

    size_t limit = 0;
    // A request whose body streams into a sink: its parser, the piece being read and
    // the request to dispatch once the body is in (or the refusal to send).
    std::optional<http::request_parser<http::buffer_body>> body_parser;
    uint64_t body_left = 0;  // of a Content-Length body read straight from the socket
    uint64_t body_taken = 0;
    bool sink_failed = false;
    unsigned streamed_version = 11;
    bool streamed_keep_alive = false;
    std::vector<char> chunk;
    std::optional<HttpRequest> streamed_request;
    std::optional<HttpResponse> refusal;

    void on_read_error(beast::error_code ec) {
      if (ec == http::error::end_of_stream || ec == beast::error::timeout) return close();
      if (ec == http::error::body_limit) {
        HttpResponse res{413, "application/json",
                         R"({"error":"request body is larger than the head's limit of )" +
                             std::to_string(limit) + R"( bytes"})"};
        return write(res, 11, false);
      }
      HttpResponse res{400, "application/json", R"({"error":"malformed HTTP request: )" + ec.message() + R"("})"};
      write(res, 11, false);
    }

    void on_read(beast::error_code ec) {
      if (ec) return on_read_error(ec);
      auto req = parser->release();
      HttpRequest request = header_of(req, remote);
      request.body = std::move(req.body());
      if (!parse_target(request.target, &request.path, &request.query)) {
        return write({400, "application/json", R"({"error":"malformed URL encoding in the request target"})"},
                     req.version(), req.keep_alive());
      }
      if (!server->handlers.raw_protocol.empty() && beast::iequals(req[http::field::upgrade], server->handlers.raw_protocol)) {
        return raw_upgrade(req.version(), request);
      }
      if (websocket::is_upgrade(req)) return upgrade(std::move(req), request);
      dispatch(std::move(request), req.version(), req.keep_alive());
    }

    // (Moved into the handler below; the check misreads that inside a template.)
    void dispatch(HttpRequest request, unsigned version, bool keep_alive) {  // NOLINT(performance-unnecessary-value-param)
      body_hold.reset();  // the body is the handler's now (parsed at once, then dropped)
      std::weak_ptr<Session> weak = this->weak_from_this();
      auto responded = std::make_shared<bool>(false);
      lowest().expires_never();  // long polls may hold the request open
      server->handlers.on_request(std::move(request), [weak, version, keep_alive, responded](const HttpResponse& res) {
        if (*responded) return;
        *responded = true;
        if (auto self = weak.lock()) self->write(res, version, keep_alive);
      });
      // Keep the session alive until the handler responds.
      pending_self = this->shared_from_this();
    }

    std::shared_ptr<Session> pending_self;
    std::shared_ptr<void> body_hold;  // this request's body's share of its peer's budget

    void upgrade(http::request<http::string_body> req, const HttpRequest& request) {
      if (server->handlers.check_upgrade) {
        if (auto refusal = server->handlers.check_upgrade(request)) {
          return write(*refusal, req.version(), false);
        }
      }
      lowest().expires_never();
      auto ws = std::make_shared<websocket::stream<Stream>>(std::move(stream));
      ws->set_option(websocket::stream_base::decorator([](websocket::response_type& res) {
        res.set(http::field::server, "aethergrid");
      }));
      auto srv = server;
      std::string peer = remote;
      auto req_ptr = std::make_shared<http::request<http::string_body>>(std::move(req));
      ws->async_accept(*req_ptr, [ws, srv, peer, request, req_ptr, held = slot](beast::error_code ec) {
        if (ec) {
          spdlog::warn("websocket handshake from {} failed: {}", peer, ec.message());
          return;
        }
        auto conn = std::make_shared<detail::BeastWs<Stream>>(std::move(*ws), peer);
        conn->hold(held);
        srv->handlers.on_websocket(conn, request);
      });
    }

    void raw_upgrade(unsigned version, const HttpRequest& request) {
      if (server->handlers.check_upgrade) {
        if (auto refusal = server->handlers.check_upgrade(request)) return write(*refusal, version, false);
      }
      lowest().expires_never();
      auto text = std::make_shared<std::string>("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " +
                                                server->handlers.raw_protocol + "\r\nServer: aethergrid\r\n\r\n");
      asio::async_write(stream, asio::buffer(*text),
                        [self = this->shared_from_this(), text, request](beast::error_code ec, size_t) {
                          if (ec) return self->close();
                          std::unique_ptr<RawStream> raw;
                          if constexpr (std::is_same_v<Stream, beast::tcp_stream>) {
                            raw = detail::plain_raw_stream(self->stream.release_socket());
                          } else {
                            raw = detail::tls_raw_stream(std::move(self->stream));
                          }
                          RawUpgrade up{std::move(raw), beast::buffers_to_string(self->buffer.data()), request,
                                        self->slot};
                          self->server->handlers.on_raw_upgrade(std::move(up));
                        });
    }

    void write(const HttpResponse& res, unsigned version, bool keep_alive) {
      if (res.on_stream) return start_stream(res, version);
      if (!res.body_file.empty()) return write_file(res, version, keep_alive);
      send(std::make_shared<http::response<http::string_body>>(to_beast(res, version, keep_alive)));
    }

    // The header, then the file straight from the page cache with sendfile(2).
    void write_file(const HttpResponse& res, unsigned version, bool keep_alive) {
      int fd = ::open(res.body_file.c_str(), O_RDONLY | O_CLOEXEC);
      struct stat st {};
      if (fd < 0 || ::fstat(fd, &st) != 0) {
        std::string why = std::strerror(errno);
        if (fd >= 0) ::close(fd);
        return write({500, "application/json", R"({"error":"cannot read the file to send: )" + why + R"("})"}, version,
                     keep_alive);
      }
      auto file = std::make_shared<FileSend>(stream.get_executor());
      file->fd = fd;
      // The asked range, within what the file holds now (a log may still grow).
      file->offset = static_cast<off_t>(std::clamp<int64_t>(res.body_file_offset, 0, st.st_size));
      file->size = res.body_file_length < 0
                       ? st.st_size
                       : static_cast<off_t>(std::min<int64_t>(st.st_size, file->offset + res.body_file_length));
      file->keep_alive = keep_alive;
      http::response<http::empty_body> header{static_cast<http::status>(res.status), version};
      set_common_fields(header, res, keep_alive);
      header.content_length(static_cast<uint64_t>(file->size - file->offset));
      std::ostringstream text;
      text << header.base();
      file->header = text.str();
      lowest().expires_after(kIdleTimeout);
      asio::async_write(stream, asio::buffer(file->header), [self = this->shared_from_this(), file](beast::error_code ec, size_t) {
        if (ec) return self->close();
        self->send_file_piece(file);
      });
    }

    struct FileSend {
      explicit FileSend(const asio::any_io_executor& executor) : stalled(executor) {}
      int fd = -1;
      off_t offset = 0;
      off_t size = 0;
      bool keep_alive = false;
      std::string header;
      std::vector<char> piece;  // TLS: the piece being written
      asio::steady_timer stalled;  // a client that stops reading is dropped
      ~FileSend() {
        if (fd >= 0) ::close(fd);
      }
    };

    void send_file_piece(const std::shared_ptr<FileSend>& file) {
      if constexpr (!std::is_same_v<Stream, beast::tcp_stream>) {
        return send_file_piece_encrypted(file);
      } else {
        send_file_piece_plain(file);
      }
    }

    // Over TLS the bytes must pass through the cipher: read a piece, write it, repeat.
    void send_file_piece_encrypted(const std::shared_ptr<FileSend>& file) {
      if (file->offset >= file->size) {
        pending_self.reset();
        if (!file->keep_alive) return close();
        return read();
      }
      file->piece.resize(static_cast<size_t>(std::min<off_t>(file->size - file->offset, 256 << 10)));
      ssize_t n = ::pread(file->fd, file->piece.data(), file->piece.size(), file->offset);
      if (n <= 0) return close();  // the file shrank
      file->offset += n;
      lowest().expires_after(kIdleTimeout);
      asio::async_write(stream, asio::buffer(file->piece.data(), static_cast<size_t>(n)),
                        [self = this->shared_from_this(), file](beast::error_code ec, size_t) {
                          if (ec) return self->close();
                          self->send_file_piece_encrypted(file);
                        });
    }

    void send_file_piece_plain(const std::shared_ptr<FileSend>& file) {
      auto& socket = lowest().socket();
      beast::error_code ec;
      socket.native_non_blocking(true, ec);
      while (file->offset < file->size) {
        ssize_t n = ::sendfile(socket.native_handle(), file->fd, &file->offset,
                               static_cast<size_t>(std::min<off_t>(file->size - file->offset, 16 << 20)));
        if (n > 0) continue;
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) {
          // The client's socket buffer is full: go on once it drains, or drop a client
          // that has read nothing for the idle timeout.
          file->stalled.expires_after(kIdleTimeout);
          file->stalled.async_wait([self = this->shared_from_this()](beast::error_code tec) {
            if (!tec) self->close();
          });
          socket.async_wait(tcp::socket::wait_write, [self = this->shared_from_this(), file](beast::error_code wec) {
            file->stalled.cancel();
            if (wec) return self->close();
            self->send_file_piece_plain(file);
          });
          return;
        }
        return close();  // the file shrank or the client went away
      }
      pending_self.reset();
      if (!file->keep_alive) return close();
      read();
    }

    template <class Message>
    void send(std::shared_ptr<Message> msg) {
      lowest().expires_after(kIdleTimeout);
      http::async_write(stream, *msg, [self = this->shared_from_this(), msg](beast::error_code ec, size_t) {
        self->pending_self.reset();
        if (ec || !msg->keep_alive()) return self->close();
        self->read();
      });
    }

    // Hands the connection to a streamed response; this session ends here.
    void start_stream(const HttpResponse& res, unsigned version) {
      auto streamed = std::make_shared<StreamedResponse<Stream>>(std::move(stream));
      streamed->hold(slot);
      pending_self.reset();
      streamed->start(stream_header(res, version));
      res.on_stream(streamed);
    }

    void close() {
      beast::error_code ec;
      lowest().socket().shutdown(tcp::socket::shutdown_send, ec);
      lowest().socket().close(ec);
      pending_self.reset();
    }
  };
};

HttpServer::HttpServer(asio::io_context& io, ServerHandlers handlers, size_t max_body_bytes)
    : impl_(std::make_shared<Impl>(io, std::move(handlers), max_body_bytes)) {}

HttpServer::~HttpServer() { stop(); }

Status HttpServer::enable_tls(const TlsIdentity& identity, bool plain_for_loopback_only) {
  auto ctx = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
  ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                   asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1 |
                   asio::ssl::context::single_dh_use);
  beast::error_code ec;
  ctx->use_certificate_chain(asio::buffer(identity.cert_chain_pem), ec);
  if (!ec) ctx->use_private_key(asio::buffer(identity.key_pem), asio::ssl::context::pem, ec);
  if (ec) return invalid_argument("cannot use the TLS certificate and key: " + ec.message());
  // Resumed sessions skip the key exchange: clients that reconnect often (the CLI, the
  // SDK) pay for one full handshake, not one each.
  SSL_CTX_set_session_cache_mode(ctx->native_handle(), SSL_SESS_CACHE_SERVER);
  impl_->tls = std::move(ctx);
  impl_->plain_for_loopback_only = plain_for_loopback_only;
  return {};
}

Status HttpServer::listen(const std::string& address, uint16_t port) {
  beast::error_code ec;
  auto ip = asio::ip::make_address(address, ec);
  if (ec) {
    return invalid_argument("'" + address + "' is not an IP address; give one of this machine's addresses, or 0.0.0.0 for every interface");
  }
  tcp::endpoint endpoint(ip, port);
  auto acceptor = std::make_unique<tcp::acceptor>(impl_->io);
  acceptor->open(endpoint.protocol(), ec);
  if (!ec) acceptor->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor->bind(endpoint, ec);
  if (!ec) acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    std::string hint;
    if (ec == asio::error::address_in_use) {
      hint = " (another process is listening there; is a head already running? stop it with `ag stop` or pick another port)";
    } else if (ec == boost::system::errc::address_not_available) {
      hint = " (it is not an address of this machine; `ip -brief address` lists them, and 0.0.0.0 means every interface)";
    } else if (ec == boost::system::errc::permission_denied) {
      hint = " (ports below " + unprivileged_port_start() +
             " need root or CAP_NET_BIND_SERVICE; pick a higher port, or lower net.ipv4.ip_unprivileged_port_start)";
    } else if (ec.category() == boost::system::system_category()) {
      hint = descriptor_limit_hint(ec.value());
    }
    return Error{ErrorCode::kUnavailable,
                 "cannot listen on " + address + ":" + std::to_string(port) + ": " + ec.message() + hint};
  }
  impl_->accept(acceptor.get());
  impl_->acceptors.push_back(std::move(acceptor));
  return {};
}

void HttpServer::stop() {
  if (!impl_ || impl_->stopped) return;
  impl_->stopped = true;
  for (auto& a : impl_->acceptors) {
    beast::error_code ec;
    a->close(ec);
  }
}

}  // namespace ag::net
