// Queues (partitions) as the job manager applies them (PolicyStore keeps them): a
// change, refused while jobs still use a queue to be removed, and preemption. A job
// names its queue at submit; the queue is looked up again at every pass, so an admin's
// change applies to the jobs already waiting in it.
#include "head/job_manager.h"

namespace ag::head {

void JobManager::set_queue(const std::string& name, std::optional<QueueDef> queue, std::function<void(Status)> done) {
  if (!queue) {
    if (!policy_.queue(name)) {
      return done(not_found("no queue '" + name + "'; `ag queue list` shows the queues"));
    }
    int using_it = 0;
    for (const auto& [_, job] : jobs_) using_it += !job.terminal() && job.spec.queue == name;
    if (using_it > 0) {
      return done(Error{ErrorCode::kConflict, "queue " + name + " still has " + std::to_string(using_it) +
                                                   " pending or running job(s); stop them or let them end, then "
                                                   "remove it (nothing was changed)"});
    }
  }
  auto change = policy_.set_queue(name, std::move(queue));
  writer_.write_then(std::move(change.batch), [this, apply = std::move(change.apply)] {
    apply();
    // The jobs waiting in a changed queue may now have other nodes or limits.
    loop_.cluster_changed();
    request_schedule();
  }, std::move(done));
}

std::vector<sched::RunningJob> JobManager::running_for_preemption() const {
  std::vector<sched::RunningJob> running;
  for (const auto& [id, active] : active_) {
    const Job& job = *active;
    const AttemptRecord* attempt = job.current_attempt();
    if (!attempt || attempt->finished()) continue;
    sched::RunningJob view;
    view.job_id = id;
    view.priority = job.spec.priority;
    view.preemptible = !job.spec.no_preempt;
    view.stopping = attempt->ending || job.stop_requested || job.timed_out;
    view.started_ms = attempt->started_ms;
    for (const auto& task : attempt->tasks) {
      if (task.terminal()) continue;
      Resources held = job.spec.per_task();
      // An exclusive job holds its nodes whole.
      if (job.spec.exclusive) {
        if (const Node* node = deps_.nodes.find(task.node_id)) held = node->total;
      }
      view.tasks.push_back({task.node_id, held, task.gpu_ids});
    }
    if (!view.tasks.empty()) running.push_back(std::move(view));
  }
  return running;
}

void JobManager::preempt(const sched::Preemption& preemption) {
  auto by = jobs_.find(preemption.job_id);
  if (by == jobs_.end()) return;
  const Job& winner = by->second;
  const std::string who = "preempted by job " + winner.id + " (priority " + std::to_string(winner.spec.priority) +
                          (winner.spec.queue.empty() ? "" : ", queue " + winner.spec.queue) +
                          (winner.owner.empty() ? "" : ", " + winner.owner) + "), which needs what it holds";
  std::string victims;
  for (const auto& id : preemption.victims) {
    auto victim = jobs_.find(id);
    if (victim == jobs_.end()) continue;
    victims += (victims.empty() ? "" : ", ") + id;
    apply(victim->second, on_preempted(victim->second, who, config_.preempt_grace_ms, deps_.clock.now_ms()));
  }
  if (victims.empty()) return;
  Effects fx;
  fx.events.push_back("preempting " + victims + " (lower priority) to make room; it starts once they have stopped");
  apply(by->second, fx);
}

}  // namespace ag::head
