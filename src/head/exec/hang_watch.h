// HangWatch: finds running jobs that have stopped making progress. A job with a hang
// timeout (its own `hang_timeout`, else the head's --hang-timeout; off by default) is
// hung once, for that long, no task of its current attempt has written output and its
// processes together have used under 1% of a CPU (the workers' usage reports,
// nodes/job_usage.h). Then an event names its ranks, every rank's stacks are taken
// into the job's events (StackTaker), and a job with `on_hang: fail` has its attempt
// ended for "no progress for D" (retried if it allows). A hang is reported once; again
// only after the job made progress and stopped anew. Allocations and interactive jobs,
// idle by design, are not watched. Checked every second; io thread only.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "common/clock.h"
#include "common/timers.h"
#include "head/exec/stack_taker.h"
#include "head/jobs/job_layer.h"
#include "head/logs/log_store.h"
#include "head/nodes/job_usage.h"

namespace ag::head {

class HangWatch {
 public:
  struct Deps {
    const Clock& clock;
    Timers& timers;
    JobLayer& jobs;
    LogStore& logs;
    const JobUsage& usage;
    StackTaker& stacks;
  };
  static constexpr int64_t kCheckMs = 1000;
  static constexpr double kIdleCpuPercent = 1.0;  // of one core, the job's processes together

  HangWatch(Deps deps, std::optional<double> default_timeout_s) : deps_(deps), default_timeout_s_(default_timeout_s) {}
  ~HangWatch();
  HangWatch(const HangWatch&) = delete;
  HangWatch& operator=(const HangWatch&) = delete;

  // Checks every kCheckMs from now on.
  void start();
  // One check of every running job (tests call it between clock moves).
  void check();

  // "90s", "5m", "1h30m".
  static std::string format_duration(double seconds);

 private:
  struct Watched {
    int attempt = -1;
    int64_t output_bytes = -1;
    int64_t progress_ms = 0;  // when it last wrote output or used the CPU
    bool reported = false;    // this attempt's hang is on record
  };
  void hung(const Job& job, double timeout_s);

  Deps deps_;
  std::optional<double> default_timeout_s_;
  std::map<std::string, Watched> watched_;
  Timers::Id timer_ = 0;
};

}  // namespace ag::head
