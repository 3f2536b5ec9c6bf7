#include "head/log_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

namespace ag::head {

struct LogStore::Syncer {
  boost::asio::thread_pool pool{1};
};

LogStore::LogStore(std::string root_dir, size_t max_open_files, Timers* io)
    : root_(std::move(root_dir)), max_open_files_(std::max<size_t>(1, max_open_files)), io_(io) {
  // A folder that cannot be made fails each append with the path and the reason.
  std::error_code ec;
  std::filesystem::create_directories(root_, ec);
  if (io_) syncer_ = std::make_unique<Syncer>();
}

LogStore::~LogStore() {
  // Syncs under way finish (their ends, posted to an io thread that no longer runs,
  // are dropped with it).
  if (syncer_) syncer_->pool.join();
  for (auto& [_, log] : logs_) {
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
  }
  return log;
}

Status LogStore::append(const api::TaskKey& key, int64_t offset, std::string_view data) {
  OpenLog& log = open(key);
  if (offset + static_cast<int64_t>(data.size()) <= log.size) return {};  // already have it
  if (offset > log.size) {
    return Error{ErrorCode::kConflict, "log of " + key.job_id + " task " + std::to_string(key.task_index) +
                                           " has a gap: have " + std::to_string(log.size) + " bytes, got offset " +
                                           std::to_string(offset)};
  }
  data.remove_prefix(static_cast<size_t>(log.size - offset));
  auto fd = writable(key, log);
  if (!fd.ok()) return fd.error();
  size_t written = 0;
  Status status;
  while (written < data.size()) {
    ssize_t n = ::write(fd.value(), data.data() + written, data.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      ErrorCode code = errno == ENOSPC || errno == EDQUOT ? ErrorCode::kResourceExhausted : ErrorCode::kInternal;
      status = Error{code, "cannot write log file " + path_for(key) + ": " + std::strerror(errno)};
      // Closed, so that the next try opens the file afresh and appends at its end.
      close_file(log);
      break;
    }
    written += static_cast<size_t>(n);
  }
  log.size += static_cast<int64_t>(written);
  bytes_ingested_ += static_cast<int64_t>(written);
  if (written > 0) wake(key);
  return status;
}

Result<int> LogStore::writable(const api::TaskKey& key, OpenLog& log) {
  if (log.fd >= 0) {
    open_order_.splice(open_order_.end(), open_order_, log.lru);
    return log.fd;
  }
  while (open_order_.size() >= max_open_files_) close_file(logs_.at(open_order_.front()));
  std::error_code ec;
  std::filesystem::create_directories(root_ + "/" + key.job_id, ec);
  log.fd = ::open(path_for(key).c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
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
  OpenLog& log = logs_[key];
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
  const int64_t from = std::max<int64_t>(0, end - max_bytes);
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

uint64_t LogStore::wait(const api::TaskKey& key, int64_t offset, std::function<void()> ready) {
  if (size(key) > offset || closed(key)) {
    ready();
    return 0;
  }
  uint64_t id = next_waiter_++;
  waiters_[id] = Waiter{key, offset, std::move(ready)};
  return id;
}

void LogStore::cancel_wait(uint64_t id) { waiters_.erase(id); }

void LogStore::wake(const api::TaskKey& key) {
  // Only those whose offset the log has now passed (or every one, once it is closed):
  // a reader past the end must not be woken by bytes that stop short of it.
  const int64_t now = size(key);
  const bool done = closed(key);
  std::vector<std::function<void()>> ready;
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (it->second.key == key && (done || now > it->second.offset)) {
      ready.push_back(std::move(it->second.ready));
      it = waiters_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& fn : ready) fn();
}

}  // namespace ag::head
