#include "head/exec/hang_watch.h"

#include <cmath>
#include <set>

namespace ag::head {

HangWatch::~HangWatch() {
  if (timer_) deps_.timers.cancel(timer_);
}

void HangWatch::start() {
  timer_ = deps_.timers.start(kCheckMs, [this] {
    timer_ = 0;
    check();
    start();
  });
}

std::string HangWatch::format_duration(double seconds) {
  const auto total = static_cast<int64_t>(std::llround(seconds));
  if (total < 60 || (total < 3600 && total % 60 != 0)) return std::to_string(total) + "s";
  const int64_t hours = total / 3600, minutes = (total % 3600) / 60, rest = total % 60;
  std::string text = hours ? std::to_string(hours) + "h" : "";
  if (minutes) text += std::to_string(minutes) + "m";
  if (rest) text += std::to_string(rest) + "s";
  return text;
}

void HangWatch::check() {
  const int64_t now = deps_.clock.now_ms();
  std::set<std::string> seen;
  for (const auto& [id, job] : deps_.jobs.table.active()) {
    const AttemptRecord* attempt = job->current_attempt();
    const std::optional<double> timeout_s = job->spec.hang_timeout_s ? job->spec.hang_timeout_s : default_timeout_s_;
    // An allocation's tasks, and an interactive job's task 0, are idle by design.
    if (job->state != JobState::kRunning || !attempt || attempt->ending || attempt->finished() || !timeout_s ||
        job->spec.allocation || job->spec.interactive) {
      continue;
    }
    seen.insert(id);
    Watched& w = watched_[id];
    if (w.attempt != attempt->number) w = {attempt->number, -1, now, false};
    int64_t bytes = 0;
    bool all_running = true;
    for (const TaskRecord& task : attempt->tasks) {
      bytes += deps_.logs.size({job->id, attempt->number, task.index});
      all_running = all_running && task.state == TaskState::kRunning;
    }
    // The latest usage report (5 s buckets): the job's processes were busy.
    const auto series = deps_.usage.series(job->id, now);
    const bool busy = !series.empty() && series.back().time_ms >= now - 2 * JobUsage::kBucketMs &&
                      series.back().cpu_percent >= kIdleCpuPercent;
    if (bytes != w.output_bytes || busy || !all_running) {
      w.output_bytes = bytes;
      w.progress_ms = now;
      w.reported = false;
      continue;
    }
    if (!w.reported && now - w.progress_ms >= static_cast<int64_t>(*timeout_s * 1000)) {
      w.reported = true;
      hung(*job, *timeout_s);
    }
  }
  std::erase_if(watched_, [&](const auto& entry) { return !seen.count(entry.first); });
}

void HangWatch::hung(const Job& job, double timeout_s) {
  const AttemptRecord& attempt = *job.current_attempt();
  const std::string reason = "no progress for " + format_duration(timeout_s);
  const int last = static_cast<int>(attempt.tasks.size()) - 1;
  const std::string ranks = last == 0 ? "rank 0" : "ranks 0-" + std::to_string(last);
  deps_.jobs.controller.report_problem(
      job.id, "hung: " + reason + " (" + ranks + " wrote no output and the job used under 1% of a CPU); taking every "
                  "rank's stacks" + (job.spec.fail_on_hang ? ", then ending attempt " + std::to_string(attempt.number) +
                                                                  " (on_hang: fail)"
                                                            : ""),
      "job.hung");
  std::vector<StackTaker::Target> targets;
  for (const TaskRecord& task : attempt.tasks) targets.push_back({{job.id, attempt.number, task.index}, task.node_id});
  deps_.stacks.take(targets, [this, job_id = job.id, number = attempt.number, fail = job.spec.fail_on_hang,
                              reason](std::vector<StackTaker::Stacks> taken) {
    for (const auto& stacks : taken) {
      deps_.jobs.controller.report_problem(job_id, StackTaker::event_text(stacks, "the hang watch", job_id));
    }
    if (fail) deps_.jobs.controller.hung(job_id, number, reason);
  });
}

}  // namespace ag::head
