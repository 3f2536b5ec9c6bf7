// GateIndex: the pending jobs waiting outside the queue for a gate (a hold, a begin
// time, dependencies, an array's limit; head/scheduler/gates.h decides), indexed by
// what could open one: the jobs each waits on (a reverse index), and begin times with
// one timer for the first. A pending job is in exactly one of the queue or this index,
// so a thousand held jobs cost a scheduling pass nothing. The job controller gates and
// ungates jobs; the index tells it when begin times come (on_due). Io thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/timers.h"

namespace ag::head {

class GateIndex {
 public:
  // `on_due`: the gated jobs whose begin time came, each still gated.
  using OnDue = std::function<void(const std::vector<std::string>& job_ids)>;
  GateIndex(const Clock& clock, Timers& timers, OnDue on_due)
      : clock_(clock), timers_(timers), on_due_(std::move(on_due)) {}
  ~GateIndex();
  GateIndex(const GateIndex&) = delete;
  GateIndex& operator=(const GateIndex&) = delete;

  // The job waits on `dependencies` (every one, ended or not: an ended one is kept
  // while the job waits, as its outcome lets the job start once released), and until
  // `wake_at_ms` (0: no time).
  void gate(const std::string& job_id, const std::vector<std::string>& dependencies, int64_t wake_at_ms);
  // The job left (queued, or finished); `begin_ms`: its begin time, if it had one.
  void ungate(const std::string& job_id, const std::vector<std::string>& dependencies, int64_t begin_ms);
  bool gated(const std::string& job_id) const { return gated_.count(job_id) > 0; }
  // The gated jobs waiting on `job_id` (which then must not be deleted).
  std::set<std::string> dependents(const std::string& job_id) const;

 private:
  void arm();

  const Clock& clock_;
  Timers& timers_;
  OnDue on_due_;
  std::set<std::string> gated_;
  std::map<std::string, std::set<std::string>> dependents_;  // job id -> gated jobs waiting on it
  std::set<std::pair<int64_t, std::string>> begins_;        // (time, job id)
  Timers::Id timer_ = 0;
  int64_t timer_at_ms_ = 0;
  // A cancel cannot stop a timer's handler already queued: it checks this first.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ag::head
