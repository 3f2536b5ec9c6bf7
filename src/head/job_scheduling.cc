// The scheduling pass as the job manager runs it: the cluster's snapshot (capacity minus
// what live tasks hold), the queue's window in order (priority, fair share, submit
// order; owners over quota left out), the pure scheduler over them, then its plan
// carried out: placements launched, reasons recorded, preemptions begun.
#include <algorithm>

#include "head/job_manager.h"
#include "head/scheduler/scheduler.h"

namespace ag::head {
namespace {

// Jobs of one owner over quota a pass looks at (and renews the reason of) before it may
// leave out the rest of that owner's jobs.
constexpr int kOverQuotaLookedAt = 8;

}  // namespace

std::map<std::string, sched::NodeView> JobManager::node_capacity(bool draining_schedulable) const {
  std::map<std::string, sched::NodeView> views;
  for (const auto& [id, node] : deps_.nodes.nodes()) {
    sched::NodeView v;
    v.node_id = id;
    v.total = node.total;
    v.free = node.total;
    v.free_gpu_ids = node.gpu_ids;
    v.schedulable = node.state == NodeState::kAlive && (draining_schedulable || !node.draining);
    v.labels = node.labels;
    v.containers = !node.container_engine.empty();
    v.mount_prefixes = node.allowed_mounts;
    views[id] = std::move(v);
  }
  return views;
}

sched::PendingJob JobManager::pending_job(const std::string& id, const api::JobSpec& spec) const {
  sched::PendingJob job{id, spec.num_workers, spec.per_task(),
          spec.placement == api::Placement::kSpread ? sched::PlacementPolicy::kSpread : sched::PlacementPolicy::kPack,
          spec.constraints};
  job.needs_containers = !spec.runtime_env.image.empty();
  job.exclusive = spec.exclusive;
  job.priority = spec.priority;
  job.queue = spec.queue;
  if (const QueueDef* queue = spec.queue.empty() ? nullptr : policy_.queue(spec.queue)) {
    for (const auto& [label, wanted] : queue->nodes_with) job.constraints[label] = wanted;
    job.may_preempt = queue->preempt;
  }
  for (const auto& mount : spec.runtime_env.mounts) job.mount_sources.push_back(mount.source);
  return job;
}

void JobManager::run_schedule() {
  if (pending_.empty()) return;
  // Build the snapshot: capacity minus what live tasks hold.
  std::map<std::string, sched::NodeView> views = node_capacity();
  for (const auto& [_, active] : active_) {
    const Job& job = *active;
    const AttemptRecord* attempt = job.current_attempt();
    if (!attempt) continue;
    Resources per_task = job.spec.per_task();
    for (const auto& task : attempt->tasks) {
      if (task.terminal()) continue;
      auto v = views.find(task.node_id);
      if (v == views.end()) continue;
      // A node an exclusive job runs on has nothing free for anyone else.
      if (job.spec.exclusive) v->second.free_gpu_ids.clear();
      v->second.free -= job.spec.exclusive ? v->second.free : per_task;
      auto& ids = v->second.free_gpu_ids;
      for (int g : task.gpu_ids) ids.erase(std::remove(ids.begin(), ids.end(), g), ids.end());
    }
  }
  std::vector<sched::NodeView> nodes;
  nodes.reserve(views.size());
  for (auto& [_, v] : views) {
    v.free.cpu_millis = std::max<int64_t>(0, v.free.cpu_millis);
    v.free.memory_bytes = std::max<int64_t>(0, v.free.memory_bytes);
    v.free.gpus = static_cast<int64_t>(v.free_gpu_ids.size());
    nodes.push_back(std::move(v));
  }
  std::vector<sched::PendingJob> queue;
  // One pass looks at the oldest jobs only: a pass runs after every event that frees
  // capacity, and walking a queue of thousands each time would cost more than it
  // places. Jobs further back move into the window as those ahead are placed.
  queue.reserve(std::min(pending_.size(), loop_.window()));
  // Jobs no node of this cluster can ever hold wait aside (with their reason) until the
  // cluster changes: otherwise a window full of them would stop everything behind.
  // Jobs waiting out their retry delay are looked at again when it ends.
  const int64_t now_ms = deps_.clock.now_ms();
  int64_t next_retry_ms = 0;
  // Jobs whose owner holds all their quota allows wait with that reason and take no
  // place in the window (it only grows during the pass), so one user's backlog never
  // stops the others'.
  std::map<std::string, sched::Use> use = use_by_owner();
  std::set<std::string> owners;  // whose groups group quotas need
  if (!policy_.group_quotas().empty()) {
    for (const auto& [owner, _] : use) owners.insert(owner);
    for (const auto& owner : pending_.owners()) owners.insert(owner);
  }
  sched::PassInput input;
  input.quotas = policy_.quota_policy(owners);
  input.queue_use = use_by_queue();
  input.now_ms = now_ms;
  input.max_blocked = SchedulingLoop::kMaxJobsPerPass;  // as many as a narrow pass weighs in all
  const sched::QuotaLedger ledger(input.quotas, use, input.queue_use);
  bool may_preempt = false;
  std::vector<sched::PendingReason> over_quota;
  std::map<std::string, int> over_quota_seen;  // owner -> their jobs found over quota
  const auto least_job = [this](const std::string& owner) {  // needs no more than any of theirs
    sched::PendingJob least;
    least.owner = owner;
    least.per_task = pending_.least_need(owner);
    return least;
  };
  using Visit = sched::PendingQueue::Visit;
  pending_.walk_owners(usage_.usage_now(policy_.share_weights()), [&](const std::string& owner, const std::string& id) {
    if (queue.size() >= loop_.window()) return Visit::kStop;
    if (loop_.set_aside(id)) return Visit::kNext;
    const Job& job = jobs_.at(id);
    if (job.retry_at_ms > now_ms) {
      next_retry_ms = next_retry_ms == 0 ? job.retry_at_ms : std::min(next_retry_ms, job.retry_at_ms);
      return Visit::kNext;
    }
    sched::PendingJob pending = pending_job(id, job.spec);
    pending.owner = job.owner;
    if (auto why = ledger.over_quota(pending)) {
      over_quota.push_back({id, sched::PendingKind::kQuota, std::move(*why)});
      // An owner over quota even for the least any job of theirs needs has nothing that
      // fits this pass: after a few (whose reasons are renewed) the walk leaves out the
      // rest, so a long backlog behind a quota costs a pass nothing.
      if (++over_quota_seen[owner] < kOverQuotaLookedAt) return Visit::kNext;
      return ledger.over_quota(least_job(owner)) ? Visit::kSkipOwner : Visit::kNext;
    }
    may_preempt = may_preempt || pending.may_preempt;
    queue.push_back(std::move(pending));
    return Visit::kNext;
  });
  if (next_retry_ms != 0) loop_.at(next_retry_ms);
  if (may_preempt) input.running = running_for_preemption();
  input.use = std::move(use);
  sched::Plan plan = sched::schedule(nodes, queue, input);
  plan.pending.insert(plan.pending.end(), over_quota.begin(), over_quota.end());

  for (const auto& placement : plan.placements) {
    Job& job = jobs_[placement.job_id];
    std::vector<PlacedTask> tasks;
    for (const auto& t : placement.tasks) {
      const Node* node = deps_.nodes.find(t.node_id);
      tasks.push_back({t.node_id, node ? node->address : "", t.gpu_ids});
    }
    pending_.remove(queue_entry(job));
    active_.emplace(job.id, &job);
    int port = dispatcher_.allocate_master_port(tasks.empty() ? "" : tasks.front().node_id);
    apply(job, on_placed(job, tasks, port, deps_.clock.now_ms()));
    usage_.charge(job, false);
    arm_timeout(job);
  }
  // Nodes left out because an admin drained them are named in every reason.
  int draining = 0;
  for (const auto& [_, node] : deps_.nodes.nodes()) draining += node.state == NodeState::kAlive && node.draining;
  const std::string drained_note =
      draining == 0 ? "" : "; " + std::to_string(draining) + " node(s) draining take no new tasks (`ag resume NODE`)";
  for (const auto& reason : plan.pending) {
    Job& job = jobs_[reason.job_id];
    if (reason.infeasible()) loop_.set_aside_job(job.id);
    apply(job, on_pending(job, reason.kind, reason.reason + drained_note, deps_.clock.now_ms()));
  }
  for (const auto& preemption : plan.preemptions) preempt(preemption);
  loop_.passed(queue.size(), plan.placements.size());
}

}  // namespace ag::head
