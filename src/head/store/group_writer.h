// GroupWriter: the writer thread of a durable KvStore. Batches queued while one
// transaction commits go into the next one together (a burst of submissions pays one
// fsync, not one each); when a group fails, each of its batches is tried again on its
// own, so that one bad batch fails alone. The backend supplies `commit`, which applies
// batches in one transaction on this thread (the only one that uses its connection).
// Every `done` runs on this thread, once. Thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "common/result.h"
#include "head/store/kv_store.h"

namespace ag::store {

class GroupWriter {
 public:
  // Applies every batch in one transaction, or none of them (the error).
  using Commit = std::function<Status(const std::vector<const std::vector<Mutation>*>& batches)>;

  explicit GroupWriter(Commit commit);
  // Writes what is queued, then stops.
  ~GroupWriter();
  GroupWriter(const GroupWriter&) = delete;
  GroupWriter& operator=(const GroupWriter&) = delete;

  void write(std::vector<Mutation> batch, std::function<void(Status)> done);
  // Blocks until every write queued so far is done.
  void flush();
  // Transactions committed so far.
  uint64_t commits() const;
  // How long they took.
  CommitTimes commit_times() const;

 private:
  struct Pending {
    std::vector<Mutation> batch;
    std::function<void(Status)> done;
  };
  void run();

  Commit commit_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable drained_cv_;
  std::deque<Pending> queue_;
  bool writing_ = false;
  bool stopping_ = false;
  uint64_t commit_count_ = 0;
  CommitTimes times_;  // guarded by mu_
  std::thread thread_;  // last: started once the rest exists
};

}  // namespace ag::store
