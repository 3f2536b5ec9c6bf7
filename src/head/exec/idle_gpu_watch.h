// IdleGpuWatch: finds running jobs that hold GPUs and do not use them. A job with an
// idle-GPU timeout (its own `idle_gpu_timeout`, else its queue's, else the head's
// --idle-gpu-timeout; off by default) is idle once, for that long, every GPU its tasks hold has stayed under
// kIdlePercent busy (the workers' usage reports, nodes/job_usage.h; a stretch without
// reports does not count as idle). Then an event says so ("job.idle" in the cluster's
// stream), and a job with `on_idle: stop` is stopped for "GPUs idle for D".
// Allocations are watched too: a held GPU nobody uses is what this is for. Reported
// once per attempt; again only after the GPUs were busy and went idle anew. Checked
// every second; io thread only.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "common/clock.h"
#include "common/timers.h"
#include "head/jobs/job_layer.h"
#include "head/nodes/job_usage.h"

namespace ag::head {

class IdleGpuWatch {
 public:
  struct Deps {
    const Clock& clock;
    Timers& timers;
    JobLayer& jobs;
    const JobUsage& usage;
  };
  static constexpr int64_t kCheckMs = 1000;
  static constexpr double kIdlePercent = 5.0;
  // How recent the latest usage report must be to count (reports come each second,
  // summed in 5-second buckets).
  static constexpr int64_t kFreshMs = 3 * JobUsage::kBucketMs;

  IdleGpuWatch(Deps deps, std::optional<double> default_timeout_s)
      : deps_(deps), default_timeout_s_(default_timeout_s) {}
  ~IdleGpuWatch();
  IdleGpuWatch(const IdleGpuWatch&) = delete;
  IdleGpuWatch& operator=(const IdleGpuWatch&) = delete;

  void start();
  // One check of every running job (tests call it between clock moves).
  void check();

 private:
  struct Watched {
    int attempt = -1;
    int64_t busy_ms = 0;  // when its GPUs were last seen busy (or not seen at all)
    bool reported = false;
  };
  void idle(const Job& job, double timeout_s);
  const QueueDef* jobs_queue(const Job& job) const;

  Deps deps_;
  std::optional<double> default_timeout_s_;
  std::map<std::string, Watched> watched_;
  Timers::Id timer_ = 0;
};

}  // namespace ag::head
