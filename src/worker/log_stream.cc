#include "worker/log_stream.h"

#include <fcntl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <cstring>
#include <deque>

#include <spdlog/spdlog.h>

#include "api/log_stream.h"

namespace ag::worker {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

constexpr auto kDialTimeout = std::chrono::seconds(5);

class SocketLogStream final : public LogStream, public std::enable_shared_from_this<SocketLogStream> {
 public:
  explicit SocketLogStream(tcp::socket socket) : socket_(std::move(socket)) {
    boost::system::error_code ec;
    socket_.non_blocking(true, ec);
  }

  // The head sends nothing on the stream: the socket turns readable only when the head
  // closes it (a record it would not take, a restart), which is then noticed at once
  // rather than at the next write.
  void watch() {
    socket_.async_wait(tcp::socket::wait_read, [weak = weak_from_this()](const boost::system::error_code& ec) {
      auto self = weak.lock();
      if (!self || self->closed_ || ec == asio::error::operation_aborted) return;
      self->fail(ec ? ec.message() : "closed by the head");
    });
  }
  ~SocketLogStream() override {
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

  bool busy() const override { return !outbox_.empty(); }
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

  // True once the outbox is empty; false when waiting for room or failed.
  bool write_outbox() {
    const int sock = socket_.native_handle();
    while (!outbox_.empty()) {
      Item& item = outbox_.front();
      ssize_t n = 0;
      if (item.sent < item.bytes.size()) {
        int more = item.file_left > 0 ? MSG_MORE : 0;
        n = ::send(sock, item.bytes.data() + item.sent, item.bytes.size() - item.sent,
                   MSG_DONTWAIT | MSG_NOSIGNAL | more);
        if (n > 0) {
          item.sent += static_cast<size_t>(n);
          continue;
        }
      } else if (item.file_left > 0) {
        n = ::sendfile(sock, item.fd, &item.offset, static_cast<size_t>(std::min<int64_t>(item.file_left, 16 << 20)));
        if (n > 0) {
          item.file_left -= n;
          continue;
        }
        if (n == 0) {
          // The task cut its own file short after its size was read: the bytes the
          // record announced no longer exist. Zeros stand in for them, so that the
          // stream (and every other task's output on it) goes on.
          if (!item.padding) spdlog::warn("a task's output file shrank while it was being sent; the missing bytes are sent as zeros");
          item.padding = true;
          static const char kZeros[16384] = {};
          n = ::send(sock, kZeros, static_cast<size_t>(std::min<int64_t>(item.file_left, sizeof kZeros)),
                     MSG_DONTWAIT | MSG_NOSIGNAL);
          if (n > 0) {
            item.file_left -= n;
            continue;
          }
        }
      } else {
        close_file(item);
        outbox_.pop_front();
        continue;
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        wait_writable();
        return false;
      }
      fail(std::strerror(errno));
      return false;
    }
    return true;
  }

  void wait_writable() {
    if (waiting_) return;
    waiting_ = true;
    socket_.async_wait(tcp::socket::wait_write, [self = shared_from_this()](const boost::system::error_code& ec) {
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
  std::deque<Item> outbox_;
  bool flushing_ = false;
  bool waiting_ = false;
  bool closed_ = false;
  std::function<void()> on_drained_;
  std::function<void(const std::string&)> on_failed_;
};

struct Dial : std::enable_shared_from_this<Dial> {
  Dial(asio::io_context& io, net::Endpoint h, LogStreamDone d) : head(std::move(h)), done(std::move(d)), stream(io) {}

  net::Endpoint head;
  LogStreamDone done;
  beast::tcp_stream stream;
  beast::flat_buffer buffer;
  http::request<http::empty_body> request;
  http::response_parser<http::string_body> parser;

  void fail(ErrorCode code, const std::string& why) {
    done(Error{code, "cannot open the log stream to the head at " + head.to_string() + ": " + why});
  }

  void start(const std::string& bind_address, const std::string& credential) {
    boost::system::error_code ec;
    auto addr = asio::ip::make_address(head.host, ec);
    if (ec) {
      tcp::resolver resolver(stream.get_executor());
      auto results = resolver.resolve(head.host, std::to_string(head.port), ec);
      if (ec || results.empty()) return fail(ErrorCode::kUnavailable, "cannot resolve host: " + ec.message());
      addr = results.begin()->endpoint().address();
    }
    tcp::endpoint to(addr, head.port);
    stream.socket().open(to.protocol(), ec);
    if (!ec && !bind_address.empty()) {
      auto local = asio::ip::make_address(bind_address, ec);
      if (!ec) stream.socket().bind(tcp::endpoint(local, 0), ec);
    }
    if (ec) return fail(ErrorCode::kUnavailable, ec.message());
    request = http::request<http::empty_body>(http::verb::get, api::kWorkerLogsPath, 11);
    request.set(http::field::host, head.to_string());
    request.set(http::field::authorization, "Bearer " + credential);
    request.set(http::field::connection, "Upgrade");
    request.set(http::field::upgrade, api::kLogStreamProtocol);
    parser.body_limit(64 * 1024);
    stream.expires_after(kDialTimeout);
    stream.async_connect(to, [self = shared_from_this()](boost::system::error_code cec) {
      if (cec) return self->fail(ErrorCode::kUnavailable, cec.message());
      boost::system::error_code ignored;
      self->stream.socket().set_option(tcp::no_delay(true), ignored);
      http::async_write(self->stream, self->request, [self](boost::system::error_code wec, size_t) {
        if (wec) return self->fail(ErrorCode::kUnavailable, wec.message());
        http::async_read(self->stream, self->buffer, self->parser, [self](boost::system::error_code rec, size_t) {
          self->on_response(rec);
        });
      });
    });
  }

  void on_response(boost::system::error_code ec) {
    if (ec) return fail(ErrorCode::kUnavailable, ec.message());
    const auto& res = parser.get();
    int status = res.result_int();
    if (status == 101 && beast::iequals(res[http::field::upgrade], api::kLogStreamProtocol)) {
      stream.expires_never();
      if (buffer.size() > 0) return fail(ErrorCode::kInternal, "the head sent bytes after its 101");
      auto log_stream = std::make_shared<SocketLogStream>(stream.release_socket());
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
  if (head.tls()) {
    return done(Error{ErrorCode::kNotFound, "the log stream is plain TCP; over TLS output goes in log frames"});
  }
  std::make_shared<Dial>(io, head, std::move(done))->start(bind_address, credential);
}

}  // namespace ag::worker
