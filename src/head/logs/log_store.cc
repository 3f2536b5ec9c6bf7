#include "head/logs/log_store.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace ag::head {
namespace {

// Beside "<attempt>.<task>.log": when its bytes arrived, and where its kept part begins.
std::string dropped_path(const std::string& log_path) { return log_path.substr(0, log_path.size() - 4) + ".dropped"; }

// The number a .dropped note holds; 0 when there is none.
int64_t read_dropped(const std::string& note) {
  int fd = ::open(note.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char text[32] = {0};
  const ssize_t n = ::read(fd, text, sizeof text - 1);
  ::close(fd);
  return n > 0 ? std::strtoll(text, nullptr, 10) : 0;
}

Status gap(const api::TaskKey& key, int64_t size, int64_t offset) {
  return Error{ErrorCode::kConflict, "log of " + key.job_id + " task " + std::to_string(key.task_index) +
                                         " has a gap: have " + std::to_string(size) + " bytes, got offset " +
                                         std::to_string(offset)};
}

Error write_failed(const std::string& path, int err) {
  ErrorCode code = err == ENOSPC || err == EDQUOT ? ErrorCode::kResourceExhausted : ErrorCode::kInternal;
  return Error{code, "cannot write log file " + path + ": " + std::strerror(err)};
}

// Frees the oldest part of a log `size` bytes long (whole blocks, keeping three
// quarters of `cap`), its bytes before `dropped` gone already. Returns where the kept
// part now begins, or -1 when the file system cannot free blocks.
int64_t drop_oldest(int fd, int64_t size, int64_t dropped, int64_t cap) {
  const int64_t keep = cap - cap / 4;
  const int64_t until = (size - keep) / 4096 * 4096;
  if (until <= dropped) return dropped;
  if (::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, dropped, until - dropped) != 0) return -1;
  return until;
}

}  // namespace

LogStore::LogStore(std::string root_dir, size_t max_open_files, Timers* io, const Clock* clock,
                   LogSyncer::Fsync fsync)
    : root_(std::move(root_dir)),
      max_open_files_(std::max<size_t>(1, max_open_files)),
      clock_(clock ? clock : &system_clock_),
      syncer_(std::make_unique<LogSyncer>(io, [this](const api::TaskKey& key) { lost(key); }, std::move(fsync))) {
  // A folder that cannot be made fails each append with the path and the reason.
  std::error_code ec;
  std::filesystem::create_directories(root_, ec);
}

LogStore::~LogStore() {
  syncer_.reset();  // the work under way finishes first
  for (auto& [key, log] : logs_) {
    log.times.save(times_path(key));
    if (log.fd >= 0) ::close(log.fd);
  }
}

std::string LogStore::path(const api::TaskKey& key) const {
  return root_ + "/" + key.job_id + "/" + std::to_string(key.attempt) + "." +
         std::to_string(key.task_index) + ".log";
}

std::string LogStore::times_path(const api::TaskKey& key) const {
  const std::string log = path(key);
  return log.substr(0, log.size() - 4) + ".times";
}

LogStore::OpenLog& LogStore::open(const api::TaskKey& key) {
  auto [it, inserted] = logs_.try_emplace(key);
  OpenLog& log = it->second;
  if (inserted) {
    // Most tasks' logs are new here (or never written: a quiet task's end opens it);
    // a .dropped note exists only beside a log that is.
    const std::string file = path(key);
    struct stat st{};
    if (::stat(file.c_str(), &st) == 0) {
      log.size = st.st_size;
      log.dropped = read_dropped(dropped_path(file));
    }
  }
  return log;
}

Status LogStore::append(const api::TaskKey& key, int64_t offset, std::string_view data) {
  OpenLog& log = open(key);
  if (offset + static_cast<int64_t>(data.size()) <= log.size) return {};  // already have it
  if (offset > log.size) return gap(key, log.size, offset);
  data.remove_prefix(static_cast<size_t>(log.size - offset));
  auto fd = writable(key, log);
  if (!fd.ok()) return fd.error();
  size_t written = 0;
  Status status;
  while (written < data.size()) {
    ssize_t n = ::pwrite(fd.value(), data.data() + written, data.size() - written,
                         static_cast<off_t>(log.size) + static_cast<off_t>(written));
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      status = write_failed(path(key), err);
      close_file(log);  // the next try opens the file afresh
      break;
    }
    written += static_cast<size_t>(n);
  }
  wrote(key, log, static_cast<int64_t>(written));
  return status;
}

Status LogStore::append_from(const api::TaskKey& key, int64_t offset, int from_fd, size_t bytes) {
  OpenLog& log = open(key);
  if (offset + static_cast<int64_t>(bytes) <= log.size) return {};  // already have it
  if (offset > log.size) return gap(key, log.size, offset);
  // A resend's first part is here already: read past it.
  for (int64_t skip = log.size - offset; skip > 0;) {
    char scratch[16384];
    ssize_t n = ::read(from_fd, scratch, static_cast<size_t>(std::min<int64_t>(skip, sizeof scratch)));
    if (n <= 0 && errno != EINTR) return internal_error(std::string("cannot read log bytes: ") + std::strerror(errno));
    if (n > 0) skip -= n;
  }
  const size_t want = bytes - static_cast<size_t>(log.size - offset);
  auto fd = writable(key, log);
  if (!fd.ok()) return fd.error();
  size_t written = 0;
  Status status;
  while (written < want) {
    loff_t at = log.size + static_cast<loff_t>(written);
    ssize_t n = ::splice(from_fd, nullptr, fd.value(), &at, want - written, SPLICE_F_MOVE);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      status = n == 0 ? internal_error("log bytes ended early") : write_failed(path(key), err);
      if (n < 0) close_file(log);  // the next try opens the file afresh
      break;
    }
    written += static_cast<size_t>(n);
  }
  wrote(key, log, static_cast<int64_t>(written));
  return status;
}

void LogStore::wrote(const api::TaskKey& key, OpenLog& log, int64_t written) {
  if (written > 0 && log.times.note(log.size, clock_->now_ms())) log.times.save(times_path(key));
  log.size += written;
  bytes_ingested_ += written;
  if (max_log_bytes_ > 0 && log.fd >= 0 && log.size - log.dropped > max_log_bytes_ && !log.cap_failed) {
    const int64_t dropped = drop_oldest(log.fd, log.size, log.dropped, max_log_bytes_);
    if (dropped < 0) {
      log.cap_failed = true;
      spdlog::warn("log of {} task {} is over its cap but its oldest part cannot be dropped here ({}); it keeps "
                   "growing", key.job_id, key.task_index, std::strerror(errno));
    } else if (dropped > log.dropped) {
      log.dropped = dropped;
      std::ofstream out(dropped_path(path(key)), std::ios::trunc);
      out << log.dropped << "\n";
    }
  }
  if (written > 0) waiters_.wake(key, log.size, log.closed);
}

Result<int> LogStore::writable(const api::TaskKey& key, OpenLog& log) {
  if (log.fd >= 0) {
    open_order_.splice(open_order_.end(), open_order_, log.lru);
    return log.fd;
  }
  while (open_order_.size() >= max_open_files_) close_file(logs_.at(open_order_.front()));
  std::error_code ec;
  std::filesystem::create_directories(root_ + "/" + key.job_id, ec);
  // Written at the log's size (pwrite, splice): splice(2) refuses a file opened to append.
  log.fd = ::open(path(key).c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0640);
  if (log.fd < 0) return internal_error("cannot open log file " + path(key) + ": " + std::strerror(errno));
  log.lru = open_order_.insert(open_order_.end(), key);
  return log.fd;
}

void LogStore::close_file(OpenLog& log) {
  if (log.fd < 0) return;
  ::close(log.fd);
  log.fd = -1;
  open_order_.erase(log.lru);
}

void LogStore::close(const api::TaskKey& key) {
  OpenLog& log = open(key);
  log.closed = true;
  log.times.save(times_path(key));
  int fd = -1;
  if (log.fd >= 0) {
    fd = log.fd;  // the sync closes it
    log.fd = -1;
    open_order_.erase(log.lru);
  } else if (log.size > 0) {
    // Closed earlier to keep within max_open_files: made durable all the same.
    fd = ::open(path(key).c_str(), O_WRONLY | O_CLOEXEC);
  }
  waiters_.wake(key, log.size, true);
  if (fd >= 0) syncer_->sync(key, fd);
}

int64_t LogStore::size(const api::TaskKey& key) { return open(key).size; }

void LogStore::lost(const api::TaskKey& key) {
  auto it = logs_.find(key);
  if (it == logs_.end()) return;
  OpenLog& log = it->second;
  spdlog::error("log of {} task {}: its bytes could not be made durable (is the head's disk full?); it is taken "
                "again from its worker",
                key.job_id, key.task_index);
  // Emptied, file and all: its worker still has every byte (its exit is not acknowledged
  // before the log is durable) and sends them again from the start.
  close_file(log);
  if (::truncate(path(key).c_str(), 0) != 0 && errno != ENOENT) {
    spdlog::error("cannot empty {}: {}", path(key), std::strerror(errno));
  }
  std::error_code ec;
  std::filesystem::remove(dropped_path(path(key)), ec);
  std::filesystem::remove(times_path(key), ec);
  log.size = 0;
  log.dropped = 0;
  log.times = TimeNoteWriter{};
}

void LogStore::remove_job(const std::string& job_id) {
  const api::TaskKey first{job_id, INT_MIN, INT_MIN};
  for (auto it = logs_.lower_bound(first); it != logs_.end() && it->first.job_id == job_id;) {
    close_file(it->second);
    it = logs_.erase(it);
  }
  std::vector<std::function<void()>> callbacks = syncer_->take_job(job_id);
  for (auto& fn : waiters_.take_job(job_id)) callbacks.push_back(std::move(fn));
  syncer_->run([dir = root_ + "/" + job_id] {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  });
  for (auto& fn : callbacks) fn();
}

bool LogStore::closed(const api::TaskKey& key) const {
  auto it = logs_.find(key);
  return it != logs_.end() && it->second.closed;
}

Result<std::string> LogStore::read(const api::TaskKey& key, int64_t offset, int64_t max_bytes) {
  int64_t end = size(key);
  if (offset >= end) return std::string();
  int64_t n = std::min(max_bytes, end - offset);
  int fd = ::open(path(key).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return internal_error("cannot read log file " + path(key) + ": " + std::strerror(errno));
  std::string out(static_cast<size_t>(n), '\0');
  ssize_t got = ::pread(fd, out.data(), out.size(), offset);
  ::close(fd);
  if (got < 0) return internal_error("cannot read log file " + path(key) + ": " + std::strerror(errno));
  out.resize(static_cast<size_t>(got));
  return out;
}

std::string LogStore::tail(const api::TaskKey& key, int64_t max_bytes, int max_lines) {
  const int64_t end = size(key);
  const int64_t from = std::max<int64_t>(dropped(key), end - max_bytes);
  auto data = read(key, from, end - from);
  if (!data.ok()) return "";
  std::string text = std::move(data.value());
  // A line cut off at the front says less than it seems to: from the next one on.
  if (from > 0) {
    size_t nl = text.find('\n');
    if (nl != std::string::npos && nl + 1 < text.size()) text.erase(0, nl + 1);
  }
  size_t last = text.size();
  if (last > 0 && text[last - 1] == '\n') --last;  // the final newline ends the last line
  int seen = 0;
  for (size_t i = last; i-- > 0;) {
    if (text[i] == '\n' && ++seen == max_lines) {
      text.erase(0, i + 1);
      break;
    }
  }
  return text;
}

std::string LogStore::drop_marker(const api::TaskKey& key) {
  const int64_t dropped = open(key).dropped;
  return "[... " + std::to_string(dropped) + " bytes of this task's output were dropped: its log passed the head's cap of " +
         std::to_string(max_log_bytes_ >> 20) + " MiB (ag start-head --max-task-log-mb); the newest part is kept ...]";
}

uint64_t LogStore::wait(const api::TaskKey& key, int64_t offset, std::function<void()> ready) {
  if (size(key) > offset || closed(key)) {
    ready();
    return 0;
  }
  return waiters_.add(key, offset, std::move(ready));
}

}  // namespace ag::head
