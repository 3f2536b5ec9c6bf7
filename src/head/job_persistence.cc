// What JobManager hands its writer (job_writer.h): changed jobs, and placements stored
// before their tasks are launched (launch_when_stored).
#include "head/job_manager.h"

namespace ag::head {

void JobManager::persist(const Job& job, const std::vector<JobEvent>& new_events) {
  writer_.changed(job.id, events_[job.id].size() - new_events.size());
}

void JobManager::launch_when_stored(const std::string& job_id, const std::vector<TaskRef>& refs) {
  for (const auto& ref : refs) unstored_launches_.insert(ref.task);
  auto alive = alive_;
  auto launch = [this, alive, job_id, refs] {
    if (!*alive) return;
    for (const auto& ref : refs) {
      if (!unstored_launches_.erase(ref.task)) continue;  // sent already
      // Unless the attempt was stopped or given up meanwhile.
      const Job* job = find(job_id);
      const AttemptRecord* attempt = job ? job->current_attempt() : nullptr;
      if (!attempt || attempt->number != ref.task.attempt || attempt->ending) continue;
      const TaskRecord& task = attempt->tasks[static_cast<size_t>(ref.task.task_index)];
      if (task.state == TaskState::kStarting && task.node_id == ref.node_id) send_launch(*job, ref);
    }
  };
  // The placed job alone, at once: it does not wait for a batch in flight, and the
  // store commits it with whatever else is queued. The job stays marked changed, so
  // the next batch writes it again (with its events) whatever happens to this write;
  // a later batch always carries a newer copy, and the store applies writes in order.
  writer_.write_now(jobs_.at(job_id), [this, launch](bool stored) {
    if (stored) return launch();
    // A full disk, say: the launch waits for the batch, which retries until it is stored.
    after_durable(launch);
  });
}

}  // namespace ag::head
