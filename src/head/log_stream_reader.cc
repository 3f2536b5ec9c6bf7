#include "head/log_stream_reader.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
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

LogStreamReader::LogStreamReader(boost::asio::ip::tcp::socket socket, std::string leftover,
                                 std::shared_ptr<void> held, std::vector<char>& piece_buffer,
                                 std::shared_ptr<SplicePipe> pipe)
    : socket_(std::move(socket)),
      leftover_(std::move(leftover)),
      held_(std::move(held)),
      piece_(piece_buffer),
      pipe_(std::move(pipe)) {
  boost::system::error_code ec;
  auto endpoint = socket_.remote_endpoint(ec);
  remote_ = ec ? "?" : endpoint.address().to_string();
  socket_.non_blocking(true, ec);
}

void LogStreamReader::start(Handlers handlers) {
  handlers_ = std::move(handlers);
  std::string leftover = std::move(leftover_);
  if (!leftover.empty() && !consume(leftover.data(), leftover.size())) return;
  wait();
}

void LogStreamReader::wait() {
  socket_.async_wait(boost::asio::ip::tcp::socket::wait_read,
                     [self = shared_from_this()](const boost::system::error_code& ec) {
                       if (self->closed_) return;
                       if (ec) return self->fail(ec.message());
                       self->on_readable();
                     });
}

void LogStreamReader::on_readable() {
  size_t taken = 0;
  const int sock = socket_.native_handle();
  while (!closed_ && taken < kTurnBytes) {
    ssize_t n = 0;
    if (splicing()) {
      size_t want = static_cast<size_t>(std::min<uint64_t>(payload_left_, pipe_->capacity()));
      n = ::splice(sock, nullptr, pipe_->write_fd(), nullptr, want, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
      if (n > 0) {
        taken += static_cast<size_t>(n);
        if (!take_spliced(static_cast<size_t>(n))) return;
        continue;
      }
    } else {
      // With a pipe, only up to the next output (which the pipe then takes).
      size_t want = piece_.size();
      const bool piped = pipe_ && pipe_->ok();
      if (piped && stage_ == Stage::kHeader) want = api::kLogRecordHeaderBytes - small_.size();
      if (piped && stage_ == Stage::kMeta) want = record_.meta_bytes - small_.size();
      n = ::recv(sock, piece_.data(), want, MSG_DONTWAIT);
      if (n > 0) {
        taken += static_cast<size_t>(n);
        if (!consume(piece_.data(), static_cast<size_t>(n))) return;
        continue;
      }
    }
    if (n == 0) return fail(stage_ == Stage::kHeader && small_.empty() ? "closed by the worker"
                                                                      : "closed by the worker in the middle of a record");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    return fail(std::strerror(errno));
  }
  if (!closed_) wait();
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
  boost::system::error_code ec;
  socket_.shutdown(boost::asio::ip::tcp::socket::shutdown_both, ec);
  socket_.close(ec);
  held_.reset();
}

void LogStreamReader::fail(const std::string& reason) {
  if (closed_) return;
  close();
  if (auto on_close = std::move(handlers_.on_close)) on_close(reason);
}

}  // namespace ag::head
