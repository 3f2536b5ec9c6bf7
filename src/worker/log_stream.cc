#include "worker/log_stream.h"

#include <fcntl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <cstring>
#include <deque>
#include <vector>

#include <spdlog/spdlog.h>

#include "api/log_frame.h"
#include "api/log_stream.h"
#include "net/tls_socket.h"

namespace ag::worker {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

constexpr auto kDialTimeout = std::chrono::seconds(5);

// How the stream's bytes reach the socket: as they are, or through TLS.
class Wire {
 public:
  virtual ~Wire() = default;
  // Takes up to `n` bytes of `data` (kGo, bytes > 0), or says what to wait for.
  // `more`: more bytes follow at once.
  virtual net::SocketIo send(const char* data, size_t n, bool more) = 0;
  // Takes up to `n` bytes of file `fd` from *offset, advancing it; kGo with no bytes:
  // the file ends at *offset.
  virtual net::SocketIo send_file(int fd, off_t* offset, size_t n) = 0;
  // Writes what was taken and is still held here: kGo once nothing is.
  virtual net::SocketIo flush() = 0;
  // Reads what the head sent; kClosed once it has closed the connection.
  virtual net::SocketIo receive(char* data, size_t n) = 0;
  // What the last kFailed was.
  virtual std::string error() const = 0;
};

// What a failed call on a plain socket says to wait for, or why it failed.
net::SocketIo::Next after_errno(net::SocketIo::Next wait, std::string* error) {
  if (errno == EAGAIN || errno == EWOULDBLOCK) return wait;
  *error = std::strerror(errno);
  return net::SocketIo::Next::kFailed;
}

// Plain TCP: bytes straight to the socket, files with sendfile(2).
class PlainWire final : public Wire {
 public:
  explicit PlainWire(int sock) : sock_(sock) {}
  net::SocketIo send(const char* data, size_t n, bool more) override {
    for (;;) {
      ssize_t sent = ::send(sock_, data, n, MSG_DONTWAIT | MSG_NOSIGNAL | (more ? MSG_MORE : 0));
      if (sent >= 0) return {static_cast<size_t>(sent), net::SocketIo::Next::kGo};
      if (errno != EINTR) return {0, after_errno(net::SocketIo::Next::kWaitWritable, &error_)};
    }
  }
  net::SocketIo send_file(int fd, off_t* offset, size_t n) override {
    for (;;) {
      ssize_t sent = ::sendfile(sock_, fd, offset, n);
      if (sent >= 0) return {static_cast<size_t>(sent), net::SocketIo::Next::kGo};
      if (errno != EINTR) return {0, after_errno(net::SocketIo::Next::kWaitWritable, &error_)};
    }
  }
  net::SocketIo flush() override { return {}; }
  net::SocketIo receive(char* data, size_t n) override {
    for (;;) {
      ssize_t got = ::recv(sock_, data, n, MSG_DONTWAIT);
      if (got > 0) return {static_cast<size_t>(got), net::SocketIo::Next::kGo};
      if (got == 0) return {0, net::SocketIo::Next::kClosed};
      if (errno != EINTR) return {0, after_errno(net::SocketIo::Next::kWaitReadable, &error_)};
    }
  }
  std::string error() const override { return error_; }

 private:
  int sock_;
  std::string error_;
};

// TLS. Where the kernel encrypts (kTLS), files go out with SSL_sendfile; elsewhere what
// is sent is gathered here into pieces of kHeldBytes (a record's start with the output
// after it, several small messages), each written in full-size TLS records.
class TlsWire final : public Wire {
 public:
  static constexpr size_t kHeldBytes = 256 << 10;

  explicit TlsWire(std::unique_ptr<net::TlsSocket> tls) : tls_(std::move(tls)), held_(kHeldBytes) {}

  net::SocketIo send(const char* data, size_t n, bool /*more: everything waits for a flush*/) override {
    if (end_ == held_.size()) {
      auto out = flush();
      if (out.next != net::SocketIo::Next::kGo) return out;
    }
    size_t take = std::min(n, held_.size() - end_);
    std::memcpy(held_.data() + end_, data, take);
    end_ += take;
    return {take, net::SocketIo::Next::kGo};
  }

  net::SocketIo send_file(int fd, off_t* offset, size_t n) override {
    if (tls_->kernel_sends()) {
      auto out = flush();
      if (out.next != net::SocketIo::Next::kGo) return out;
      out = tls_->send_file(fd, *offset, n);
      *offset += static_cast<off_t>(out.bytes);
      return out;
    }
    if (end_ == held_.size()) {
      auto out = flush();
      if (out.next != net::SocketIo::Next::kGo) return out;
    }
    for (;;) {
      ssize_t got = ::pread(fd, held_.data() + end_, std::min(n, held_.size() - end_), *offset);
      if (got >= 0) {
        *offset += got;
        end_ += static_cast<size_t>(got);
        return {static_cast<size_t>(got), net::SocketIo::Next::kGo};
      }
      if (errno != EINTR) {
        error_ = std::string("cannot read a task's output: ") + std::strerror(errno);
        return {0, net::SocketIo::Next::kFailed};
      }
    }
  }

  net::SocketIo flush() override {
    while (begin_ < end_) {
      auto out = tls_->write(held_.data() + begin_, end_ - begin_);
      if (out.next != net::SocketIo::Next::kGo) {
        error_ = tls_->error();
        return out;
      }
      begin_ += out.bytes;
    }
    begin_ = end_ = 0;
    return {};
  }

  net::SocketIo receive(char* data, size_t n) override {
    auto out = tls_->read(data, n);
    if (out.next == net::SocketIo::Next::kFailed) error_ = tls_->error();
    return out;
  }

  std::string error() const override { return error_; }

 private:
  std::unique_ptr<net::TlsSocket> tls_;
  std::vector<char> held_;
  size_t begin_ = 0;  // held_[begin_, end_) is taken and not yet written
  size_t end_ = 0;
  std::string error_;
};

class WireLogStream final : public LogStream, public std::enable_shared_from_this<WireLogStream> {
 public:
  WireLogStream(tcp::socket socket, std::unique_ptr<Wire> wire) : socket_(std::move(socket)), wire_(std::move(wire)) {}

  // The head sends nothing on the stream (past TLS's own messages): the socket turns
  // readable when the head closes it (a record it would not take, a restart), which is
  // then noticed at once rather than at the next write.
  void watch() {
    socket_.async_wait(tcp::socket::wait_read, [weak = weak_from_this()](const boost::system::error_code& ec) {
      auto self = weak.lock();
      if (!self || self->closed_ || ec == asio::error::operation_aborted) return;
      if (ec) return self->fail(ec.message());
      char scratch[4096];
      for (;;) {
        auto in = self->wire_->receive(scratch, sizeof scratch);
        if (in.next == net::SocketIo::Next::kGo) continue;  // nothing the worker acts on
        if (in.next == net::SocketIo::Next::kWaitReadable || in.next == net::SocketIo::Next::kWaitWritable) {
          return self->watch();
        }
        return self->fail(in.next == net::SocketIo::Next::kClosed ? "closed by the head" : self->wire_->error());
      }
    });
  }
  ~WireLogStream() override {
    for (auto& item : outbox_) close_file(item);
  }

  Status send_file(const api::LogFrameHeader& at, const std::string& path, int64_t length) override {
    if (closed_) return {};
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      ErrorCode code = errno == ENOENT ? ErrorCode::kNotFound : ErrorCode::kInternal;
      return Error{code, "cannot open " + path + ": " + std::strerror(errno)};
    }
    outbox_.push_back(Item{api::log_bytes_record_start(at, static_cast<uint64_t>(length)), 0, fd,
                           static_cast<off_t>(at.offset), length});
    flush();
    return {};
  }

  void send_message(std::string message) override {
    if (closed_) return;
    outbox_.push_back(Item{api::message_record(message)});
    flush();
  }

  bool busy() const override { return !outbox_.empty() || unflushed_; }
  void on_drained(std::function<void()> fn) override { on_drained_ = std::move(fn); }
  void on_failed(std::function<void(const std::string&)> fn) override { on_failed_ = std::move(fn); }

  void close() override {
    if (closed_) return;
    closed_ = true;
    on_drained_ = nullptr;
    on_failed_ = nullptr;
    boost::system::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
    for (auto& item : outbox_) close_file(item);
    outbox_.clear();
  }

 private:
  struct Item {
    std::string bytes;  // a message record, or the start of an output record
    size_t sent = 0;
    int fd = -1;         // the output record's file
    off_t offset = 0;    // its next byte to send
    int64_t file_left = 0;
    bool padding = false;  // the file ended early: zeros for the rest
  };

  static void close_file(Item& item) {
    if (item.fd >= 0) ::close(item.fd);
    item.fd = -1;
  }

  // Writes until everything is out (then asks for more) or the socket is full.
  void flush() {
    if (flushing_) return;  // an on_drained_ call below: the loop goes on
    auto self = shared_from_this();  // whatever the owner does meanwhile
    flushing_ = true;
    while (!closed_ && write_outbox() && on_drained_) {
      on_drained_();
      if (outbox_.empty()) break;
    }
    flushing_ = false;
  }

  // True once everything is written; false when waiting for the socket or failed.
  bool write_outbox() {
    static const char kZeros[16384] = {};
    while (!outbox_.empty()) {
      Item& item = outbox_.front();
      net::SocketIo io;
      if (item.sent < item.bytes.size()) {
        io = wire_->send(item.bytes.data() + item.sent, item.bytes.size() - item.sent, item.file_left > 0);
        item.sent += io.bytes;
      } else if (item.file_left > 0 && !item.padding) {
        io = wire_->send_file(item.fd, &item.offset, static_cast<size_t>(std::min<int64_t>(item.file_left, 16 << 20)));
        item.file_left -= static_cast<int64_t>(io.bytes);
        if (io.bytes == 0 && io.next == net::SocketIo::Next::kGo) {
          // The task cut its own file short after its size was read: the bytes the
          // record announced no longer exist. Zeros stand in for them, so that the
          // stream (and every other task's output on it) goes on.
          spdlog::warn("a task's output file shrank while it was being sent; the missing bytes are sent as zeros");
          item.padding = true;
          continue;
        }
      } else if (item.file_left > 0) {
        io = wire_->send(kZeros, static_cast<size_t>(std::min<int64_t>(item.file_left, sizeof kZeros)), false);
        item.file_left -= static_cast<int64_t>(io.bytes);
      } else {
        close_file(item);
        outbox_.pop_front();
        continue;
      }
      if (io.bytes > 0) continue;
      return go_on_after(io.next);
    }
    unflushed_ = true;
    auto out = wire_->flush();
    if (out.next != net::SocketIo::Next::kGo) return go_on_after(out.next);
    unflushed_ = false;
    return true;
  }

  // After a call that moved nothing: waits for the socket, or fails. Always false.
  bool go_on_after(net::SocketIo::Next next) {
    switch (next) {
      case net::SocketIo::Next::kWaitWritable:
        wait(tcp::socket::wait_write);
        break;
      case net::SocketIo::Next::kWaitReadable:
        wait(tcp::socket::wait_read);
        break;
      case net::SocketIo::Next::kClosed:
        fail("closed by the head");
        break;
      case net::SocketIo::Next::kFailed:
        fail(wire_->error());
        break;
      case net::SocketIo::Next::kGo:
        break;
    }
    return false;
  }

  void wait(tcp::socket::wait_type type) {
    if (waiting_) return;
    waiting_ = true;
    socket_.async_wait(type, [self = shared_from_this()](const boost::system::error_code& ec) {
      self->waiting_ = false;
      if (self->closed_) return;
      if (ec) return self->fail(ec.message());
      self->flush();
    });
  }

  // Closes, and tells the owner from the io thread's queue rather than from inside a
  // call of its own (a send_message in the middle of its work), which it may end by
  // letting go of this stream.
  void fail(const std::string& reason) {
    if (closed_) return;
    auto on_failed = std::move(on_failed_);
    close();
    if (on_failed) asio::post(socket_.get_executor(), [on_failed = std::move(on_failed), reason] { on_failed(reason); });
  }

  tcp::socket socket_;
  std::unique_ptr<Wire> wire_;
  std::deque<Item> outbox_;
  bool unflushed_ = false;  // the wire may still hold bytes taken from the outbox
  bool flushing_ = false;
  bool waiting_ = false;
  bool closed_ = false;
  std::function<void()> on_drained_;
  std::function<void(const std::string&)> on_failed_;
};

// Connects, shakes hands (TLS), asks for the upgrade and reads the head's answer, all
// within kDialTimeout.
struct Dial : std::enable_shared_from_this<Dial> {
  Dial(asio::io_context& io, net::Endpoint h, LogStreamDone d)
      : head(std::move(h)), done(std::move(d)), socket(io), deadline(io) {}

  net::Endpoint head;
  LogStreamDone done;
  tcp::socket socket;
  asio::steady_timer deadline;
  bool finished = false;
  std::unique_ptr<net::TlsSocket> tls;  // until the handshake is done
  net::TlsSocket* session = nullptr;     // then in `wire`
  std::unique_ptr<Wire> wire;
  std::string request;
  size_t request_sent = 0;
  std::string received;
  http::response_parser<http::string_body> parser;

  void fail(ErrorCode code, const std::string& why) {
    if (finished) return;
    finished = true;
    deadline.cancel();
    boost::system::error_code ignored;
    socket.close(ignored);
    done(Error{code, "cannot open the log stream to the head at " + head.to_string() + ": " + why});
  }

  // Runs `step` again once the socket is ready as `next` asks, or fails.
  void then(net::SocketIo::Next next, void (Dial::*step)(), const std::string& error) {
    if (next == net::SocketIo::Next::kWaitReadable || next == net::SocketIo::Next::kWaitWritable) {
      auto type = next == net::SocketIo::Next::kWaitReadable ? tcp::socket::wait_read : tcp::socket::wait_write;
      socket.async_wait(type, [self = shared_from_this(), step](boost::system::error_code ec) {
        if (self->finished) return;
        if (ec) return self->fail(ErrorCode::kUnavailable, ec.message());
        ((*self).*step)();
      });
      return;
    }
    fail(ErrorCode::kUnavailable, next == net::SocketIo::Next::kClosed ? "the head closed the connection" : error);
  }

  void start(const std::string& bind_address, const std::string& credential) {
    boost::system::error_code ec;
    auto addr = asio::ip::make_address(head.host, ec);
    if (ec) {
      tcp::resolver resolver(socket.get_executor());
      auto results = resolver.resolve(head.host, std::to_string(head.port), ec);
      if (ec || results.empty()) return fail(ErrorCode::kUnavailable, "cannot resolve host: " + ec.message());
      addr = results.begin()->endpoint().address();
    }
    tcp::endpoint to(addr, head.port);
    socket.open(to.protocol(), ec);
    if (!ec && !bind_address.empty()) {
      auto local = asio::ip::make_address(bind_address, ec);
      if (!ec) socket.bind(tcp::endpoint(local, 0), ec);
    }
    if (ec) return fail(ErrorCode::kUnavailable, ec.message());
    request = "GET " + std::string(api::kWorkerLogsPath) + " HTTP/1.1\r\nHost: " + head.to_string() +
              "\r\nAuthorization: Bearer " + credential + "\r\nConnection: Upgrade\r\nUpgrade: " +
              api::kLogStreamProtocol + "\r\n\r\n";
    parser.body_limit(64 * 1024);
    parser.eager(true);
    deadline.expires_after(kDialTimeout);
    deadline.async_wait([self = shared_from_this()](boost::system::error_code tec) {
      if (!tec) self->fail(ErrorCode::kUnavailable, "timed out");
    });
    socket.async_connect(to, [self = shared_from_this()](boost::system::error_code cec) {
      if (self->finished) return;
      if (cec) return self->fail(ErrorCode::kUnavailable, cec.message());
      boost::system::error_code ignored;
      self->socket.set_option(tcp::no_delay(true), ignored);
      self->socket.non_blocking(true, ignored);
      if (!self->head.tls()) {
        self->wire = std::make_unique<PlainWire>(self->socket.native_handle());
        return self->send_request();
      }
      auto tls = net::TlsSocket::client(self->socket.native_handle(), self->head);
      if (!tls.ok()) return self->fail(tls.error().code, tls.error().message);
      self->tls = std::move(tls.value());
      self->shake_hands();
    });
  }

  void shake_hands() {
    auto next = tls->handshake();
    if (next == net::SocketIo::Next::kFailed) {
      // A head that does not verify against the pinned CA will not start to: final.
      return fail(tls->verified() ? ErrorCode::kUnavailable : ErrorCode::kPermissionDenied, tls->error());
    }
    if (next != net::SocketIo::Next::kGo) return then(next, &Dial::shake_hands, tls->error());
    if (tls->kernel_sends()) {
      spdlog::info("log stream to the head: {}, encrypted by the kernel (kTLS); output goes out with SSL_sendfile",
                   tls->cipher());
    } else {
      spdlog::info("log stream to the head: {}, encrypted in the worker: no kTLS, {}", tls->cipher(),
                   tls->kernel_tls_unavailable());
    }
    session = tls.get();
    wire = std::make_unique<TlsWire>(std::move(tls));
    send_request();
  }

  void send_request() {
    while (request_sent < request.size()) {
      auto out = wire->send(request.data() + request_sent, request.size() - request_sent, false);
      if (out.bytes == 0) return then(out.next, &Dial::send_request, wire->error());
      request_sent += out.bytes;
    }
    auto out = wire->flush();
    if (out.next != net::SocketIo::Next::kGo) return then(out.next, &Dial::send_request, wire->error());
    read_response();
  }

  void read_response() {
    char piece[4096];
    for (;;) {
      auto in = wire->receive(piece, sizeof piece);
      if (in.next == net::SocketIo::Next::kClosed && parser.is_header_done() && !parser.is_done()) {
        beast::error_code ec;
        parser.put_eof(ec);  // a body that runs to the connection's end
        if (!ec) return on_response();
      }
      if (in.bytes == 0) return then(in.next, &Dial::read_response, wire->error());
      received.append(piece, in.bytes);
      while (!received.empty() && !parser.is_done()) {
        beast::error_code ec;
        size_t used = parser.put(asio::buffer(received), ec);
        received.erase(0, used);
        if (ec == http::error::need_more) break;
        if (ec) return fail(ErrorCode::kUnavailable, "the head's answer does not parse: " + ec.message());
      }
      if (parser.is_done()) return on_response();
    }
  }

  void on_response() {
    const auto& res = parser.get();
    int status = res.result_int();
    if (status == 101 && beast::iequals(res[http::field::upgrade], api::kLogStreamProtocol)) {
      if (!received.empty()) return fail(ErrorCode::kInternal, "the head sent bytes after its 101");
      if (session) session->remember_session();  // its ticket came before the answer
      finished = true;
      deadline.cancel();
      auto log_stream = std::make_shared<WireLogStream>(std::move(socket), std::move(wire));
      log_stream->watch();
      done(std::shared_ptr<LogStream>(log_stream));
      return;
    }
    ErrorCode code = status == 401   ? ErrorCode::kUnauthenticated
                     : status == 403 ? ErrorCode::kPermissionDenied
                     : status == 404 ? ErrorCode::kNotFound
                     : status == 409 ? ErrorCode::kConflict
                                     : ErrorCode::kUnavailable;
    fail(code, "HTTP " + std::to_string(status) + " " + res.body());
  }
};

}  // namespace

void dial_log_stream(asio::io_context& io, const net::Endpoint& head, const std::string& bind_address,
                     const std::string& credential, LogStreamDone done) {
  std::make_shared<Dial>(io, head, std::move(done))->start(bind_address, credential);
}

}  // namespace ag::worker
