#include "head/exec/idle_gpu_watch.h"

#include <spdlog/spdlog.h>

#include <set>

#include "head/exec/hang_watch.h"

namespace ag::head {

IdleGpuWatch::~IdleGpuWatch() {
  if (timer_) deps_.timers.cancel(timer_);
}

void IdleGpuWatch::start() {
  timer_ = deps_.timers.start(kCheckMs, [this] {
    timer_ = 0;
    check();
    start();
  });
}

const QueueDef* IdleGpuWatch::jobs_queue(const Job& job) const {
  return job.spec.queue.empty() ? nullptr : deps_.jobs.policy.queue(job.spec.queue);
}

void IdleGpuWatch::check() {
  const int64_t now = deps_.clock.now_ms();
  std::set<std::string> seen;
  for (const auto& [id, job] : deps_.jobs.table.active()) {
    const AttemptRecord* attempt = job->current_attempt();
    // The job's own, else its queue's, else the head's.
    std::optional<double> timeout_s = job->spec.idle_gpu_timeout_s;
    if (const QueueDef* queue = jobs_queue(*job); !timeout_s && queue) timeout_s = queue->idle_gpu_timeout_s;
    if (!timeout_s) timeout_s = default_timeout_s_;
    if (job->state != JobState::kRunning || !attempt || attempt->ending || attempt->finished() || !timeout_s ||
        job->spec.per_task().gpus == 0) {
      continue;
    }
    seen.insert(id);
    Watched& w = watched_[id];
    if (w.attempt != attempt->number) w = {attempt->number, now, false};
    const auto series = deps_.usage.series(id, now);
    const bool fresh = !series.empty() && now - series.back().time_ms <= kFreshMs;
    const bool unused = fresh && series.back().gpus > 0 && series.back().gpu_percent_max < kIdlePercent;
    if (!unused) {
      w.busy_ms = now;
      w.reported = false;
      continue;
    }
    if (!w.reported && now - w.busy_ms >= static_cast<int64_t>(*timeout_s * 1000)) {
      w.reported = true;
      idle(*job, *timeout_s);
    }
  }
  std::erase_if(watched_, [&](const auto& entry) { return !seen.count(entry.first); });
}

void IdleGpuWatch::idle(const Job& job, double timeout_s) {
  const std::string reason = "GPUs idle for " + HangWatch::format_duration(timeout_s);
  const int64_t gpus = job.spec.per_task().gpus * job.spec.num_workers;
  deps_.jobs.controller.report_problem(job.id,
                                       reason + " (all " + std::to_string(gpus) + " under " +
                                           std::to_string(static_cast<int>(kIdlePercent)) + "% busy)" +
                                           (job.spec.stop_on_idle ? "; stopping the job (on_idle: stop)" : ""),
                                       "job.idle");
  if (!job.spec.stop_on_idle) return;
  deps_.jobs.controller.stop(job.id, "the idle-GPU watch: " + reason, [id = job.id](const Status& s) {
    if (!s) spdlog::warn("could not stop job {} for its idle GPUs: {}", id, s.error().message);
  });
}

}  // namespace ag::head
