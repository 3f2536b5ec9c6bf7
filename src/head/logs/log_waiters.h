// LogWaiters: readers waiting for a task's log to grow past an offset (long polls of
// `GET /api/jobs/{id}/logs` and `/lines`, `ag logs -f`). The LogStore wakes them as
// bytes arrive or the log closes: only those whose offset the log has passed, or every
// one once it is closed. Io thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "api/protocol.h"

namespace ag::head {

class LogWaiters {
 public:
  // `ready` runs once `key`'s log is longer than `offset` or closed. Returns an id for
  // cancel (never 0).
  uint64_t add(const api::TaskKey& key, int64_t offset, std::function<void()> ready);
  void cancel(uint64_t id);
  // The log is `size` bytes long now (and `closed`): wakes those it passed.
  void wake(const api::TaskKey& key, int64_t size, bool closed);
  // Every waiter on the job's logs, taken out (their `ready` to be called: the job is
  // gone).
  std::vector<std::function<void()>> take_job(const std::string& job_id);
  size_t count() const { return waiters_.size(); }

 private:
  struct Waiter {
    int64_t offset;
    std::function<void()> ready;
  };
  std::map<std::pair<api::TaskKey, uint64_t>, Waiter> waiters_;  // by log, then id
  std::map<uint64_t, api::TaskKey> keys_;                        // id -> its log
  uint64_t next_ = 1;
};

}  // namespace ag::head
