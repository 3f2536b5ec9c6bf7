// UsageLedger: fair share as the head keeps it (head/scheduler/fair_share.h decides the
// order from it). It owns each user's decayed usage and, for every job that holds a
// gang now, its owner, what the gang costs per second and when it was last charged.
// Every kUsageTickMs it charges all of them and stores the usage in the meta table, so
// that a restart keeps it. The job controller tells it when a job starts or stops holding
// a gang (charge); the ledger knows jobs only by id, owner and what their gang holds.
// Io thread only.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "common/timers.h"
#include "common/resources.h"
#include "head/scheduler/fair_share.h"
#include "head/store/kv_store.h"

namespace ag::head {

// A job's gang as the ledger charges it: whose it is and what all its tasks hold.
struct Gang {
  std::string job_id;
  std::string owner;
  Resources holds;
};

class UsageLedger {
 public:
  static constexpr int64_t kUsageTickMs = 30'000;

  UsageLedger(const Clock& clock, Timers& timers, store::KvStore& store, int64_t half_life_ms);
  ~UsageLedger();
  UsageLedger(const UsageLedger&) = delete;
  UsageLedger& operator=(const UsageLedger&) = delete;

  // Reads the stored usage (a record that does not parse is skipped) and starts the
  // tick. Errors: the store's.
  Status recover();

  // Charges the gang's owner since the last charge, at what the gang costs now; the
  // first call starts the charging (from now), and with `ended` it is the last.
  void charge(const Gang& gang, bool ended);

  // Each owner's usage decayed to now with what running jobs used since last charged,
  // divided by the owner's weight (`weights`: those other than 1), for the queue's order.
  std::function<double(const std::string&)> usage_now(const std::map<std::string, double>& weights) const;

  // Each user's usage, part and factor, most used first.
  std::vector<sched::ShareLine> report(const std::map<std::string, double>& weights) const;

 private:
  struct Charging {
    std::string owner;
    double rate = 0;  // what the job's gang costs per second
    int64_t since_ms = 0;
  };
  // An owner's jobs being charged, summed: what they cost together per second, and the
  // sum of each one's rate times when it was last charged (ms after base_ms_). What
  // they used since is then rate * (now - base_ms_) - rate_ms, without a walk of every
  // job (a pass asks at every event, with thousands of jobs running).
  struct Running {
    double rate = 0;
    double rate_ms = 0;
    int jobs = 0;
  };
  std::map<std::string, sched::UsageRecord> with_running() const;
  // Adds a job's charging to (or, with -1, takes it from) its owner's sums.
  void count(const Charging& charging, int sign);
  void tick();

  const Clock& clock_;
  Timers& timers_;
  store::KvStore& store_;
  int64_t half_life_ms_;
  std::map<std::string, sched::UsageRecord> usage_;  // by user
  std::map<std::string, Charging> charging_;         // by job id
  std::map<std::string, Running> running_;           // by owner, of charging_
  int64_t base_ms_ = 0;                              // moved to the last tick (sums stay small)
  Timers::Id timer_ = 0;
  // A cancel cannot stop a timer's handler already queued: it checks this first.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ag::head
