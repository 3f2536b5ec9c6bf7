#include "head/logs/log_syncer.h"

#include <unistd.h>

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <climits>

namespace ag::head {

LogSyncer::LogSyncer(Timers* io, std::function<void(const api::TaskKey&)> failed, Fsync fsync)
    : io_(io), failed_(std::move(failed)), fsync_(fsync ? std::move(fsync) : Fsync([](int fd) { return ::fsync(fd); })) {
  if (io_) pool_ = std::make_unique<boost::asio::thread_pool>(1);
}

LogSyncer::~LogSyncer() {
  if (pool_) pool_->join();
}

void LogSyncer::sync(const api::TaskKey& key, int fd) {
  pending_[key].syncs++;
  if (!pool_) {
    const bool ok = fsync_(fd) == 0;
    ::close(fd);
    return synced(key, ok);
  }
  boost::asio::post(*pool_, [this, key, fd] {
    const bool ok = fsync_(fd) == 0;
    ::close(fd);
    io_->post([this, key, ok] { synced(key, ok); });
  });
}

void LogSyncer::synced(const api::TaskKey& key, bool ok) {
  auto it = pending_.find(key);
  if (it == pending_.end()) return;  // its job was deleted meanwhile
  // Bytes the kernel could not write back are gone whatever the page cache showed:
  // the store hears it before anyone is told the log is durable.
  if (!ok && failed_) failed_(key);
  if (--it->second.syncs > 0) return;
  auto callbacks = std::move(it->second.callbacks);
  pending_.erase(it);
  for (auto& fn : callbacks) fn();
}

void LogSyncer::after_synced(const api::TaskKey& key, std::function<void()> fn) {
  auto it = pending_.find(key);
  if (it == pending_.end() || it->second.syncs == 0) return fn();
  it->second.callbacks.push_back(std::move(fn));
}

void LogSyncer::run(std::function<void()> fn) {
  if (!pool_) return fn();
  boost::asio::post(*pool_, std::move(fn));
}

std::vector<std::function<void()>> LogSyncer::take_job(const std::string& job_id) {
  std::vector<std::function<void()>> taken;
  const api::TaskKey first{job_id, INT_MIN, INT_MIN};
  for (auto it = pending_.lower_bound(first); it != pending_.end() && it->first.job_id == job_id;) {
    for (auto& fn : it->second.callbacks) taken.push_back(std::move(fn));
    it = pending_.erase(it);
  }
  return taken;
}

}  // namespace ag::head
