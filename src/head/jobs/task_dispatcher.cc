#include "head/jobs/task_dispatcher.h"

#include <set>

#include "head/jobs/reconcile.h"

namespace ag::head {

TaskDispatcher::TaskDispatcher(Deps deps, int master_port_first, int master_port_last, int64_t preempt_grace_ms)
    : deps_(std::move(deps)), master_ports_(master_port_first, master_port_last), preempt_grace_ms_(preempt_grace_ms) {}

void TaskDispatcher::launch_when_stored(const Job& placed, const std::vector<TaskRef>& refs) {
  for (const auto& ref : refs) unstored_launches_.insert(ref.task);
  // The placements of one pass (or of whatever else runs on the io thread before the
  // write) go to the store in one write.
  placed_.push_back({placed.id, refs});
  if (placed_.size() > 1) return;  // that write is posted already
  deps_.timers.post([this, alive = alive_] {
    if (*alive) store_placements();
  });
}

void TaskDispatcher::store_placements() {
  auto placed = std::make_shared<std::vector<Placed>>(std::move(placed_));
  placed_.clear();
  std::vector<const Job*> jobs;
  jobs.reserve(placed->size());
  for (const auto& p : *placed) {
    if (const Job* job = deps_.job(p.job_id)) jobs.push_back(job);
  }
  auto launch = [this, alive = alive_, placed] {
    if (!*alive) return;
    for (const auto& p : *placed) launch_stored(p);
  };
  // The placed jobs as they stand, at once: the write does not wait for a batch in
  // flight, and the store commits it with whatever else is queued. The jobs stay marked
  // changed, so the next batch writes them again (with their events) whatever happens
  // to this write; a later batch always carries a newer copy, and the store applies
  // writes in order.
  deps_.writer.write_now(jobs, [this, launch](bool stored) {
    if (stored) return launch();
    // A full disk, say: the launches wait for the batch, which retries until it is stored.
    deps_.writer.after_durable(launch);
  });
}

void TaskDispatcher::launch_stored(const Placed& placed) {
  for (const auto& ref : placed.refs) {
    if (!unstored_launches_.erase(ref.task)) continue;  // sent already
    // Unless the attempt was stopped or given up meanwhile.
    const Job* job = deps_.job(placed.job_id);
    const AttemptRecord* attempt = job ? job->current_attempt() : nullptr;
    if (!attempt || attempt->number != ref.task.attempt || attempt->ending) continue;
    const TaskRecord& task = attempt->tasks[static_cast<size_t>(ref.task.task_index)];
    if (task.state == TaskState::kStarting && task.node_id == ref.node_id) send_launch(*job, ref);
  }
}

void TaskDispatcher::launch(const Job& job, const std::vector<TaskRef>& refs) {
  for (const auto& ref : refs) send_launch(job, ref);
}

void TaskDispatcher::relaunch(const Job& job, const TaskRef& ref) {
  if (!unstored_launches_.count(ref.task)) send_launch(job, ref);
}

void TaskDispatcher::send_launch(const Job& job, const TaskRef& ref) {
  if (deps_.workers.send(ref.node_id, launch_message(job, ref.task, job.spec.no_preempt ? 0 : preempt_grace_ms_))) return;
  // The node went away between placement and launch: the task never started.
  deps_.timers.post([this, alive = alive_, task = ref.task] {
    if (!*alive) return;
    api::TaskExit exit;
    exit.start_error = "its node is not connected";
    deps_.start_failed(task, exit);
  });
}

void TaskDispatcher::kill(const TaskRef& ref, int64_t grace_ms) {
  // An unreachable node is told again when it re-registers (its report lists the
  // task and the head answers with a kill), or its tasks die with it.
  deps_.workers.send(ref.node_id, api::Kill{ref.task, grace_ms});
}

int TaskDispatcher::allocate_master_port(const std::string& node_id) {
  static const std::set<int> kNone;
  const Node* node = deps_.nodes.find(node_id);
  return master_ports_.allocate(node_id, node ? node->busy_ports : kNone);
}

}  // namespace ag::head
