// JobWriter: the only code that turns job changes into store mutations.
//
//   changed(job)  --> marked; one write at a time, at most every interval (which grows
//                     with what encoding the last one cost), carries every marked job
//                     whole and its new events; a failed write is kept and tried again
//                     (changed_unhurried: with the next write, within an interval)
//   remove(job)   --> its record and events deleted in the next write, after every
//                     earlier write of it; once durable the job goes from memory
//   after_durable --> runs once everything changed before it is stored
//   write_now     --> one job at once (a placement that must be durable before its
//                     tasks are launched), beside the batches
//   write_then    --> another record (policy, a stop's draft) in store order
//
// It reads the jobs it writes through Source when it writes them, so it always writes
// a job as it stands. Io thread only.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "common/timers.h"
#include "head/jobs/job.h"
#include "head/jobs/job_flush.h"
#include "head/store/kv_store.h"

namespace ag::head {

class JobWriter {
 public:
  struct Source {
    // The job as it stands (null once gone), and its events.
    std::function<const Job*(const std::string& job_id)> job;
    std::function<const std::vector<JobEvent>*(const std::string& job_id)> events;
    // A deletion is durable: the job goes from memory (before whoever waits is told).
    std::function<void(const std::string& job_id)> deleted;
    // The cluster stream's newest event, and: every event up to this one is stored
    // (each event added is its job's change, marked changed at once; optional).
    std::function<int64_t()> events_appended;
    std::function<void(int64_t seq)> events_stored;
  };

  JobWriter(const Clock& clock, Timers& timers, store::KvStore& store, Source source);
  // Writes what is still marked (telling nobody) and waits for the store.
  ~JobWriter();
  JobWriter(const JobWriter&) = delete;
  JobWriter& operator=(const JobWriter&) = delete;

  // The job changed; its events from `first_new_event` on are new.
  void changed(const std::string& job_id, size_t first_new_event);
  // The same, for a change nothing waits on and that is stored in substance already (a
  // job just written by its submit, marked again for its events' places in the stream):
  // it goes with the next write, at the latest an interval from now, so that a
  // submit's job is not written twice in a row while its tasks start.
  void changed_unhurried(const std::string& job_id, size_t first_new_event);
  // `fn` runs once every change made so far is stored (a failed write is retried and
  // `fn` waits for it).
  void after_durable(std::function<void()> fn);
  // Deletes the job with the next write (started now); `done` gets the outcome.
  void remove(const std::string& job_id, std::function<void(Status)> done);
  // Whether the job's deletion waits for the next write or is being written.
  bool removing(const std::string& job_id) const { return deletions_.count(job_id) > 0 || deleting_.count(job_id) > 0; }
  // The job is gone from memory: nothing of it is written any more.
  void forget(const std::string& job_id) { state_.unsaved.erase(job_id); }
  // Writes `batch` on its own; once durable runs `then` and done({}), else done(error).
  void write_then(std::vector<store::Mutation> batch, std::function<void()> then, std::function<void(Status)> done);
  // The records of `job` and its `events` (from the first): for a write that must be
  // durable before the job exists in memory (a submit) or changes (a stop's draft).
  static std::vector<store::Mutation> records(const Job& job, const std::vector<JobEvent>& events);
  // Writes the jobs as they stand at once, in one write; `stored(ok)` after (the jobs
  // stay marked, so the next batch writes them again with their events, whatever
  // happens to this write).
  void write_now(const std::vector<const Job*>& jobs, std::function<void(bool ok)> stored);
  void write_now(const Job& job, std::function<void(bool ok)> stored) { write_now({&job}, std::move(stored)); }

 private:
  void schedule(int64_t delay_ms);
  int64_t until_next_ms() const;
  void flush();

  const Clock& clock_;
  Timers& timers_;
  store::KvStore& store_;
  Source source_;
  FlushState state_;
  // Jobs to delete in the next write, with whoever waits for each.
  std::map<std::string, std::vector<std::function<void(Status)>>> deletions_;
  std::set<std::string> deleting_;  // deletions in the write in flight
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ag::head
