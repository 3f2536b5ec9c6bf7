#include "head/logs/log_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <spdlog/spdlog.h>

namespace ag::head {
namespace {

// Beside "<attempt>.<task>.log": when its bytes arrived, and where its kept part begins.
std::string dropped_path(const std::string& log_path) { return log_path.substr(0, log_path.size() - 4) + ".dropped"; }

}  // namespace

std::string LogStore::times_path(const api::TaskKey& key) const {
  const std::string log = path_for(key);
  return log.substr(0, log.size() - 4) + ".times";
}

const std::vector<LogStore::TimeNote>& LogStore::unsaved_times(const api::TaskKey& key) { return open(key).unsaved_times; }

struct LogStore::Syncer {
  boost::asio::thread_pool pool{1};
};

LogStore::LogStore(std::string root_dir, size_t max_open_files, Timers* io, const Clock* clock)
    : root_(std::move(root_dir)),
      max_open_files_(std::max<size_t>(1, max_open_files)),
      io_(io),
      clock_(clock ? clock : &system_clock_) {
  // A folder that cannot be made fails each append with the path and the reason.
  std::error_code ec;
  std::filesystem::create_directories(root_, ec);
  if (io_) syncer_ = std::make_unique<Syncer>();
}

LogStore::~LogStore() {
  // Syncs under way finish (their ends, posted to an io thread that no longer runs,
  // are dropped with it).
  if (syncer_) syncer_->pool.join();
  for (auto& [key, log] : logs_) {
    save_times(key, log);
    if (log.fd >= 0) ::close(log.fd);
  }
}

std::string LogStore::path_for(const api::TaskKey& key) const {
  return root_ + "/" + key.job_id + "/" + std::to_string(key.attempt) + "." +
         std::to_string(key.task_index) + ".log";
}

LogStore::OpenLog& LogStore::open(const api::TaskKey& key) {
  auto [it, inserted] = logs_.try_emplace(key);
  OpenLog& log = it->second;
  if (inserted) {
    struct stat st{};
    if (::stat(path_for(key).c_str(), &st) == 0) log.size = st.st_size;
    std::ifstream in(dropped_path(path_for(key)));
    in >> log.dropped;
  }
  return log;
}

Status LogStore::append(const api::TaskKey& key, int64_t offset, std::string_view data) {
  OpenLog& log = open(key);
  if (offset + static_cast<int64_t>(data.size()) <= log.size) return {};  // already have it
  if (offset > log.size) return gap(key, log, offset);
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
      status = write_failed(key, log);
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
  if (offset > log.size) return gap(key, log, offset);
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
      status = n == 0 ? internal_error("log bytes ended early") : write_failed(key, log);
      break;
    }
    written += static_cast<size_t>(n);
  }
  wrote(key, log, static_cast<int64_t>(written));
  return status;
}

Status LogStore::gap(const api::TaskKey& key, const OpenLog& log, int64_t offset) const {
  return Error{ErrorCode::kConflict, "log of " + key.job_id + " task " + std::to_string(key.task_index) +
                                         " has a gap: have " + std::to_string(log.size) + " bytes, got offset " +
                                         std::to_string(offset)};
}

Error LogStore::write_failed(const api::TaskKey& key, OpenLog& log) {
  ErrorCode code = errno == ENOSPC || errno == EDQUOT ? ErrorCode::kResourceExhausted : ErrorCode::kInternal;
  Error error{code, "cannot write log file " + path_for(key) + ": " + std::strerror(errno)};
  // Closed, so that the next try opens the file afresh.
  close_file(log);
  return error;
}

void LogStore::wrote(const api::TaskKey& key, OpenLog& log, int64_t written) {
  if (written > 0) note_time(key, log, log.size);
  log.size += written;
  bytes_ingested_ += written;
  if (max_log_bytes_ > 0 && log.fd >= 0 && log.size - log.dropped > max_log_bytes_) drop_oldest(key, log, log.fd);
  if (written > 0) wake(key);
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
  log.fd = ::open(path_for(key).c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0640);
  if (log.fd < 0) return internal_error("cannot open log file " + path_for(key) + ": " + std::strerror(errno));
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
  save_times(key, log);
  int fd = -1;
  if (log.fd >= 0) {
    fd = log.fd;  // the sync closes it
    log.fd = -1;
    open_order_.erase(log.lru);
  } else if (log.size > 0) {
    // Closed earlier to keep within max_open_files: made durable all the same.
    fd = ::open(path_for(key).c_str(), O_WRONLY | O_CLOEXEC);
  }
  wake(key);
  if (fd >= 0) sync(key, fd);
}

void LogStore::sync(const api::TaskKey& key, int fd) {
  logs_[key].syncs_pending++;
  if (!syncer_) {
    ::fsync(fd);
    ::close(fd);
    return synced(key);
  }
  boost::asio::post(syncer_->pool, [this, key, fd] {
    ::fsync(fd);
    ::close(fd);
    io_->post([this, key] { synced(key); });
  });
}

void LogStore::synced(const api::TaskKey& key) {
  auto it = logs_.find(key);
  if (it == logs_.end()) return;  // its job was deleted meanwhile
  OpenLog& log = it->second;
  if (--log.syncs_pending > 0) return;
  auto callbacks = std::move(log.synced);
  log.synced.clear();
  for (auto& fn : callbacks) fn();
}

void LogStore::after_synced(const api::TaskKey& key, std::function<void()> fn) {
  auto it = logs_.find(key);
  if (it == logs_.end() || it->second.syncs_pending == 0) return fn();
  it->second.synced.push_back(std::move(fn));
}

int64_t LogStore::size(const api::TaskKey& key) { return open(key).size; }

void LogStore::remove_job(const std::string& job_id) {
  const api::TaskKey first{job_id, INT_MIN, INT_MIN};
  std::vector<std::function<void()>> callbacks;
  for (auto it = logs_.lower_bound(first); it != logs_.end() && it->first.job_id == job_id;) {
    close_file(it->second);
    for (auto& fn : it->second.synced) callbacks.push_back(std::move(fn));
    it = logs_.erase(it);
  }
  for (auto it = waiters_.lower_bound({first, 0}); it != waiters_.end() && it->first.first.job_id == job_id;) {
    callbacks.push_back(std::move(it->second.ready));
    waiter_keys_.erase(it->first.second);
    it = waiters_.erase(it);
  }
  auto remove = [dir = root_ + "/" + job_id] {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  };
  if (syncer_) {
    boost::asio::post(syncer_->pool, remove);
  } else {
    remove();
  }
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
  int fd = ::open(path_for(key).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return internal_error("cannot read log file " + path_for(key) + ": " + std::strerror(errno));
  std::string out(static_cast<size_t>(n), '\0');
  ssize_t got = ::pread(fd, out.data(), out.size(), offset);
  ::close(fd);
  if (got < 0) return internal_error("cannot read log file " + path_for(key) + ": " + std::strerror(errno));
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

namespace {

constexpr size_t kTimesBatch = 32;

}  // namespace

void LogStore::drop_oldest(const api::TaskKey& key, OpenLog& log, int fd) {
  if (log.cap_failed) return;
  const int64_t keep = max_log_bytes_ - max_log_bytes_ / 4;
  const int64_t until = (log.size - keep) / 4096 * 4096;  // whole blocks
  if (until <= log.dropped) return;
  if (::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, log.dropped, until - log.dropped) != 0) {
    log.cap_failed = true;
    spdlog::warn("log of {} task {} is over its cap but its oldest part cannot be dropped here ({}); it keeps growing",
                 key.job_id, key.task_index, std::strerror(errno));
    return;
  }
  log.dropped = until;
  std::ofstream out(dropped_path(path_for(key)), std::ios::trunc);
  out << log.dropped << "\n";
}

std::string LogStore::drop_marker(const api::TaskKey& key) {
  const int64_t dropped = open(key).dropped;
  return "[... " + std::to_string(dropped) + " bytes of this task's output were dropped: its log passed the head's cap of " +
         std::to_string(max_log_bytes_ >> 20) + " MiB (ag start-head --max-task-log-mb); the newest part is kept ...]";
}

void LogStore::note_time(const api::TaskKey& key, OpenLog& log, int64_t offset) {
  const int64_t now = clock_->now_ms();
  if (log.last_time_ms != INT64_MIN && now - log.last_time_ms < kLineTimeGranularityMs) return;
  log.last_time_ms = now;
  log.unsaved_times.emplace_back(offset, now);
  if (log.unsaved_times.size() >= kTimesBatch) save_times(key, log);
}

void LogStore::save_times(const api::TaskKey& key, OpenLog& log) {
  if (log.unsaved_times.empty()) return;
  // Lost only in a crash, and then the lines concerned show the time noted before them.
  int fd = ::open(times_path(key).c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (fd < 0) return;
  std::vector<int64_t> flat;
  for (const auto& [offset, ms] : log.unsaved_times) {
    flat.push_back(offset);
    flat.push_back(ms);
  }
  const auto bytes = static_cast<ssize_t>(flat.size() * sizeof(int64_t));
  if (::write(fd, flat.data(), static_cast<size_t>(bytes)) == bytes) log.unsaved_times.clear();
  ::close(fd);
}

uint64_t LogStore::wait(const api::TaskKey& key, int64_t offset, std::function<void()> ready) {
  if (size(key) > offset || closed(key)) {
    ready();
    return 0;
  }
  uint64_t id = next_waiter_++;
  waiters_[{key, id}] = Waiter{key, offset, std::move(ready)};
  waiter_keys_[id] = key;
  return id;
}

void LogStore::cancel_wait(uint64_t id) {
  auto it = waiter_keys_.find(id);
  if (it == waiter_keys_.end()) return;
  waiters_.erase({it->second, id});
  waiter_keys_.erase(it);
}

void LogStore::wake(const api::TaskKey& key) {
  // Only those whose offset the log has now passed (or every one, once it is closed):
  // a reader past the end must not be woken by bytes that stop short of it.
  const int64_t now = size(key);
  const bool done = closed(key);
  std::vector<std::function<void()>> ready;
  for (auto it = waiters_.lower_bound({key, 0}); it != waiters_.end() && it->first.first == key;) {
    if (done || now > it->second.offset) {
      ready.push_back(std::move(it->second.ready));
      waiter_keys_.erase(it->first.second);
      it = waiters_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& fn : ready) fn();
}

}  // namespace ag::head
