// Quotas as the job manager applies them (head/scheduler/quotas.h decides; the limits
// are PolicyStore's): a change of limits, and what each user's running jobs hold, for
// the scheduler and `ag quota list`.
#include "head/job_manager.h"

namespace ag::head {

void JobManager::set_quota(bool group, const std::string& name, const sched::Limits& limits,
                           std::function<void(Status)> done) {
  auto change = policy_.set_quota(group, name, limits);
  writer_.write_then(std::move(change.batch), [this, apply = std::move(change.apply)] {
    apply();
    // Jobs over the old quota may fit the new one (and every pending reason is redone).
    request_schedule();
  }, std::move(done));
}

void JobManager::for_each_holding(const std::function<void(const Job&, const sched::Use&)>& fn) const {
  for (const auto& [_, active] : active_) {
    const Job& job = *active;
    const AttemptRecord* attempt = job.current_attempt();
    if (!attempt) continue;
    sched::Use held;
    for (const auto& task : attempt->tasks) {
      if (task.terminal()) continue;
      held.held += job.spec.per_task();
      held.running_jobs = 1;
    }
    fn(job, held);
  }
}

std::map<std::string, sched::Use> JobManager::use_by_owner() const {
  std::map<std::string, sched::Use> use;
  for_each_holding([&use](const Job& job, const sched::Use& held) { use[job.owner] += held; });
  return use;
}

std::map<sched::QueueUser, sched::Use> JobManager::use_by_queue() const {
  std::map<sched::QueueUser, sched::Use> use;
  for_each_holding([&use](const Job& job, const sched::Use& held) {
    if (!job.spec.queue.empty()) use[{job.spec.queue, job.owner}] += held;
  });
  return use;
}

}  // namespace ag::head
