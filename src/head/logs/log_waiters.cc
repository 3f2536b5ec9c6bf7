#include "head/logs/log_waiters.h"

#include <climits>

namespace ag::head {

uint64_t LogWaiters::add(const api::TaskKey& key, int64_t offset, std::function<void()> ready) {
  const uint64_t id = next_++;
  waiters_[{key, id}] = Waiter{offset, std::move(ready)};
  keys_[id] = key;
  return id;
}

void LogWaiters::cancel(uint64_t id) {
  auto it = keys_.find(id);
  if (it == keys_.end()) return;
  waiters_.erase({it->second, id});
  keys_.erase(it);
}

void LogWaiters::wake(const api::TaskKey& key, int64_t size, bool closed) {
  // A reader past the end must not be woken by bytes that stop short of it.
  std::vector<std::function<void()>> ready;
  for (auto it = waiters_.lower_bound({key, 0}); it != waiters_.end() && it->first.first == key;) {
    if (closed || size > it->second.offset) {
      ready.push_back(std::move(it->second.ready));
      keys_.erase(it->first.second);
      it = waiters_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& fn : ready) fn();
}

std::vector<std::function<void()>> LogWaiters::take_job(const std::string& job_id) {
  std::vector<std::function<void()>> taken;
  const api::TaskKey first{job_id, INT_MIN, INT_MIN};
  for (auto it = waiters_.lower_bound({first, 0}); it != waiters_.end() && it->first.first.job_id == job_id;) {
    taken.push_back(std::move(it->second.ready));
    keys_.erase(it->first.second);
    it = waiters_.erase(it);
  }
  return taken;
}

}  // namespace ag::head
