#include "head/logs/log_stream_reader.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/error.hpp>
#include <cerrno>
#include <cstring>

namespace ag::head {
namespace {

// At most this much is read from one stream before the others (and requests) get a
// turn.
constexpr size_t kTurnBytes = 1 << 20;

constexpr int kPipeBytes = 1 << 20;

}  // namespace

SplicePipe::SplicePipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return;
  read_fd_ = fds[0];
  write_fd_ = fds[1];
  int size = ::fcntl(write_fd_, F_SETPIPE_SZ, kPipeBytes);
  if (size < 0) size = ::fcntl(write_fd_, F_GETPIPE_SZ);
  capacity_ = size > 0 ? static_cast<size_t>(size) : 4096;
}

SplicePipe::~SplicePipe() { close_fds(); }

void SplicePipe::close_fds() {
  if (read_fd_ >= 0) ::close(read_fd_);
  if (write_fd_ >= 0) ::close(write_fd_);
  read_fd_ = write_fd_ = -1;
}

bool SplicePipe::empty_out() {
  for (;;) {
    int left = 0;
    if (::ioctl(read_fd_, FIONREAD, &left) != 0) break;
    if (left == 0) return true;
    char scratch[16384];
    ssize_t n = ::read(read_fd_, scratch, std::min<size_t>(sizeof scratch, static_cast<size_t>(left)));
    if (n <= 0 && errno != EINTR) break;
  }
  // Bytes left behind would land in the next log spliced through it.
  close_fds();
  return false;
}

LogStreamReader::LogStreamReader(std::unique_ptr<net::RawStream> stream, std::string leftover,
                                 std::shared_ptr<void> held, std::vector<char>& piece_buffer,
                                 std::shared_ptr<SplicePipe> pipe)
    : stream_(std::move(stream)),
      leftover_(std::move(leftover)),
      held_(std::move(held)),
      piece_(piece_buffer),
      pipe_(stream_->plain() ? std::move(pipe) : nullptr) {
  boost::system::error_code ec;
  auto endpoint = stream_->socket().remote_endpoint(ec);
  remote_ = ec ? "?" : endpoint.address().to_string();
  stream_->socket().non_blocking(true, ec);
}

void LogStreamReader::start(Handlers handlers) {
  handlers_ = std::move(handlers);
  std::string leftover = std::move(leftover_);
  if (!leftover.empty() && !consume(leftover.data(), leftover.size())) return;
  // A TLS session may already hold bytes that came with the request.
  if (stream_->plain()) {
    wait();
  } else {
    on_readable();
  }
}

void LogStreamReader::wait() {
  stream_->socket().async_wait(boost::asio::ip::tcp::socket::wait_read,
                               [self = shared_from_this()](const boost::system::error_code& ec) {
                                 if (self->closed_) return;
                                 if (ec) return self->fail(ec.message());
                                 self->on_readable();
                               });
}

size_t LogStreamReader::read_once(boost::system::error_code& ec) {
  ec.clear();
  if (!stream_->plain()) {
    // A TLS read gives at most one record (16 KiB): gathered into one piece, so that
    // the handler (a write to the task's log) runs once for many of them.
    size_t n = 0;
    while (n < piece_.size()) {
      size_t got = stream_->read_some(piece_.data() + n, piece_.size() - n, ec);
      if (ec) break;
      n += got;
    }
    if (n > 0) ec.clear();  // an error, or the end, comes again on the next read
    return n;
  }
  const int sock = stream_->socket().native_handle();
  for (;;) {
    ssize_t n = 0;
    if (splicing()) {
      size_t want = static_cast<size_t>(std::min<uint64_t>(payload_left_, pipe_->capacity()));
      n = ::splice(sock, nullptr, pipe_->write_fd(), nullptr, want, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    } else {
      // With a pipe, only up to the next output (which the pipe then takes).
      size_t want = piece_.size();
      const bool piped = pipe_ && pipe_->ok();
      if (piped && stage_ == Stage::kHeader) want = api::kLogRecordHeaderBytes - small_.size();
      if (piped && stage_ == Stage::kMeta) want = record_.meta_bytes - small_.size();
      n = ::recv(sock, piece_.data(), want, MSG_DONTWAIT);
    }
    if (n > 0) return static_cast<size_t>(n);
    if (n == 0) {
      ec = boost::asio::error::eof;
      return 0;
    }
    if (errno == EINTR) continue;
    ec = boost::system::error_code(errno, boost::system::system_category());
    return 0;
  }
}

void LogStreamReader::on_readable() {
  size_t taken = 0;
  while (!closed_ && taken < kTurnBytes) {
    const bool spliced = splicing();
    boost::system::error_code ec;
    size_t n = read_once(ec);
    if (n > 0) {
      taken += n;
      if (!(spliced ? take_spliced(n) : consume(piece_.data(), n))) return;
      continue;
    }
    if (ec == boost::asio::error::would_block || ec == boost::asio::error::try_again) return wait();
    if (ec == boost::asio::error::eof || ec == boost::asio::ssl::error::stream_truncated) {
      return fail(stage_ == Stage::kHeader && small_.empty() ? "closed by the worker"
                                                            : "closed by the worker in the middle of a record");
    }
    return fail(ec.message());
  }
  // The turn is over with bytes perhaps still waiting, in the socket or in a TLS
  // session (where no readiness would tell of them): go on after what else is queued.
  if (!closed_) boost::asio::post(stream_->socket().get_executor(), [self = shared_from_this()] {
    if (!self->closed_) self->on_readable();
  });
}

bool LogStreamReader::consume(const char* data, size_t n) {
  while (n > 0 && !closed_) {
    size_t take = 0;
    switch (stage_) {
      case Stage::kHeader: {
        take = std::min(n, api::kLogRecordHeaderBytes - small_.size());
        small_.append(data, take);
        if (small_.size() == api::kLogRecordHeaderBytes) {
          auto header = api::decode_log_record_header(small_);
          if (!header.ok()) {
            fail(header.error().message);
            return false;
          }
          record_ = header.value();
          payload_left_ = record_.payload_bytes;
          small_.clear();
          stage_ = record_.meta_bytes > 0 ? Stage::kMeta : Stage::kPayload;
          if (stage_ == Stage::kPayload && payload_left_ == 0 && !finish_record()) return false;
        }
        break;
      }
      case Stage::kMeta: {
        take = std::min(n, record_.meta_bytes - small_.size());
        small_.append(data, take);
        if (small_.size() == record_.meta_bytes) {
          auto at = api::decode_log_bytes_meta(small_);
          if (!at.ok()) {
            fail("bad log record: " + at.error().message);
            return false;
          }
          at_ = at.value();
          small_.clear();
          stage_ = Stage::kPayload;
          if (payload_left_ == 0 && !finish_record()) return false;
        }
        break;
      }
      case Stage::kPayload: {
        take = static_cast<size_t>(std::min<uint64_t>(n, payload_left_));
        if (record_.kind == api::LogRecordKind::kLogBytes) {
          if (!skipping_ && !follow(handlers_.on_bytes(at_, std::string_view(data, take)))) return false;
          at_.offset += static_cast<int64_t>(take);
        } else {
          small_.append(data, take);
        }
        payload_left_ -= take;
        if (payload_left_ == 0 && !finish_record()) return false;
        break;
      }
    }
    data += take;
    n -= take;
  }
  return !closed_;
}

bool LogStreamReader::splicing() const {
  return pipe_ && pipe_->ok() && handlers_.on_spliced && stage_ == Stage::kPayload &&
         record_.kind == api::LogRecordKind::kLogBytes && payload_left_ > 0;
}

bool LogStreamReader::follow(Verdict verdict) {
  switch (verdict) {
    case Verdict::kTake:
      return !closed_;
    case Verdict::kSkipRecord:
      skipping_ = true;
      return !closed_;
    case Verdict::kClose:
      close();
      return false;
  }
  return !closed_;
}

bool LogStreamReader::take_spliced(size_t n) {
  Verdict verdict = skipping_ ? Verdict::kSkipRecord : handlers_.on_spliced(at_, pipe_->read_fd(), n);
  if (!pipe_->empty_out()) {
    fail("cannot empty the splice pipe");
    return false;
  }
  if (!follow(verdict)) return false;
  at_.offset += static_cast<int64_t>(n);
  payload_left_ -= n;
  return payload_left_ > 0 || finish_record();
}

bool LogStreamReader::finish_record() {
  stage_ = Stage::kHeader;
  skipping_ = false;
  if (record_.kind != api::LogRecordKind::kMessage) return !closed_;
  std::string message = std::move(small_);
  small_.clear();
  return follow(handlers_.on_message(message));
}

void LogStreamReader::close() {
  if (closed_) return;
  closed_ = true;
  stream_->close();
  held_.reset();
}

void LogStreamReader::fail(const std::string& reason) {
  if (closed_) return;
  close();
  if (auto on_close = std::move(handlers_.on_close)) on_close(reason);
}

}  // namespace ag::head
