#include "head/jobs/scheduling_view.h"

#include <algorithm>
#include <set>

namespace ag::head {
namespace {

// Jobs of one owner over quota a pass looks at (and renews the reason of) before it may
// leave out the rest of that owner's jobs.
constexpr int kOverQuotaLookedAt = 8;

}  // namespace

sched::NodeView node_view(const Node& node, bool draining_schedulable) {
  sched::NodeView v;
  v.node_id = node.node_id;
  v.total = node.total;
  v.free = node.total;
  v.free_gpu_ids = node.gpu_ids;
  // An unhealthy node is set aside as a drained one is (it takes tasks again once
  // healthy or resumed).
  v.schedulable = node.state == NodeState::kAlive && (draining_schedulable || (!node.draining && !node.unhealthy));
  v.labels = node.labels;
  v.containers = !node.container_engine.empty();
  v.mount_prefixes = node.allowed_mounts;
  return v;
}

std::map<std::string, sched::NodeView> node_capacity(const NodeRegistry& nodes, bool draining_schedulable) {
  std::map<std::string, sched::NodeView> views;
  for (const auto& [id, node] : nodes.nodes()) {
    views[id] = node_view(node, draining_schedulable);
    views[id].node_id = id;
  }
  return views;
}

sched::PendingJob pending_job(const std::string& id, const api::JobSpec& spec, const PolicyStore& policy) {
  sched::PendingJob job{id, spec.num_workers, spec.per_task(),
          spec.placement == api::Placement::kSpread ? sched::PlacementPolicy::kSpread : sched::PlacementPolicy::kPack,
          spec.constraints};
  job.needs_containers = !spec.runtime_env.image.empty();
  job.exclusive = spec.exclusive;
  job.priority = spec.priority;
  job.queue = spec.queue;
  if (const QueueDef* queue = spec.queue.empty() ? nullptr : policy.queue(spec.queue)) {
    for (const auto& [label, wanted] : queue->nodes_with) job.constraints[label] = wanted;
    job.may_preempt = queue->preempt;
  }
  for (const auto& mount : spec.runtime_env.mounts) job.mount_sources.push_back(mount.source);
  return job;
}

std::vector<sched::RunningJob> running_for_preemption(const JobTable& jobs, const NodeRegistry& nodes) {
  std::vector<sched::RunningJob> running;
  for (const auto& [id, active] : jobs.active()) {
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
        if (auto node = nodes.nodes().find(task.node_id); node != nodes.nodes().end()) held = node->second.total;
      }
      view.tasks.push_back({task.node_id, held, task.gpu_ids});
    }
    if (!view.tasks.empty()) running.push_back(std::move(view));
  }
  return running;
}

std::vector<PlacedTask> placed_tasks(const NodeRegistry& nodes, const sched::JobPlacement& placement) {
  std::vector<PlacedTask> tasks;
  tasks.reserve(placement.tasks.size());
  for (const auto& t : placement.tasks) {
    const Node* node = nodes.find(t.node_id);
    tasks.push_back({t.node_id, node ? node->address : "", t.gpu_ids});
  }
  return tasks;
}

PassPlan plan_pass(const PassState& state) {
  PassPlan out;
  const sched::PendingQueue& pending = state.loop.queue();
  std::vector<sched::PendingJob> queue;
  // One pass looks at the oldest jobs only: a pass runs after every event that frees
  // capacity, and walking a queue of thousands each time would cost more than it
  // places. Jobs further back move into the window as those ahead are placed.
  queue.reserve(std::min(pending.size(), state.loop.window()));
  // Jobs whose owner holds all their quota allows wait with that reason and take no
  // place in the window (it only grows during the pass), so one user's backlog never
  // stops the others'.
  std::map<std::string, sched::Use> use = state.capacity.use_by_owner();
  std::set<std::string> owners;  // whose groups group quotas need
  if (!state.policy.group_quotas().empty()) {
    for (const auto& [owner, _] : use) owners.insert(owner);
    for (const auto& owner : pending.owners()) owners.insert(owner);
  }
  sched::PassInput input;
  input.quotas = state.policy.quota_policy(owners);
  input.queue_use = state.capacity.use_by_queue();
  input.now_ms = state.now_ms;
  input.max_blocked = SchedulingLoop::kMaxJobsPerPass;  // as many as a narrow pass weighs in all
  const sched::QuotaLedger ledger(input.quotas, use, input.queue_use);
  bool may_preempt = false;
  std::vector<sched::PendingReason> over_quota;
  std::map<std::string, int> over_quota_seen;  // owner -> their jobs found over quota
  const auto least_job = [&pending](const std::string& owner) {  // needs no more than any of theirs
    sched::PendingJob least;
    least.owner = owner;
    least.per_task = pending.least_need(owner);
    return least;
  };
  using Visit = sched::PendingQueue::Visit;
  const auto usage_now = state.usage.usage_now(state.policy.share_weights());
  pending.walk_owners(usage_now, [&](const std::string& owner, const std::string& id) {
    if (queue.size() >= state.loop.window()) return Visit::kStop;
    // Jobs no node of this cluster can hold wait aside (with their reason) until the
    // cluster changes: otherwise a window full of them would stop everything behind.
    if (state.loop.set_aside(id)) return Visit::kNext;
    const Job& job = *state.jobs.find(id);
    // Jobs waiting out their retry delay are looked at again when it ends.
    if (job.retry_at_ms > state.now_ms) {
      out.next_retry_ms = out.next_retry_ms == 0 ? job.retry_at_ms : std::min(out.next_retry_ms, job.retry_at_ms);
      return Visit::kNext;
    }
    sched::PendingJob candidate = pending_job(id, job.spec, state.policy);
    candidate.owner = job.owner;
    if (auto why = ledger.over_quota(candidate)) {
      over_quota.push_back({id, sched::PendingKind::kQuota, std::move(*why)});
      // An owner over quota even for the least any job of theirs needs has nothing that
      // fits this pass: after a few (whose reasons are renewed) the walk leaves out the
      // rest, so a long backlog behind a quota costs a pass nothing.
      if (++over_quota_seen[owner] < kOverQuotaLookedAt) return Visit::kNext;
      return ledger.over_quota(least_job(owner)) ? Visit::kSkipOwner : Visit::kNext;
    }
    may_preempt = may_preempt || candidate.may_preempt;
    queue.push_back(std::move(candidate));
    return Visit::kNext;
  });
  if (may_preempt) input.running = running_for_preemption(state.jobs, state.nodes);
  input.use = std::move(use);
  out.plan = sched::schedule(state.capacity.base(), queue, input);
  out.plan.pending.insert(out.plan.pending.end(), over_quota.begin(), over_quota.end());
  out.weighed = queue.size();
  return out;
}

bool could_use(const PassState& state, const sched::NodeView& node) {
  const sched::PendingQueue& pending = state.loop.queue();
  // Each kind of node the queued jobs ask for once (typically a few), not each job.
  const auto may_run_here = [&](const auto& kind) {
    const sched::NodeNeeds& needs = kind.first;
    sched::PendingJob job;
    job.constraints = needs.labels;
    if (const QueueDef* queue = needs.queue.empty() ? nullptr : state.policy.queue(needs.queue)) {
      for (const auto& [label, wanted] : queue->nodes_with) job.constraints[label] = wanted;
    }
    job.needs_containers = needs.containers;
    job.mount_sources = needs.mounts;
    return sched::can_run_on(node, job);
  };
  if (std::none_of(pending.node_needs().begin(), pending.node_needs().end(), may_run_here)) return false;
  const Resources& free = node.free;
  std::vector<sched::PendingJob> least;  // per owner whose jobs need nothing the node lacks
  for (const auto& owner : pending.owners()) {
    sched::PendingJob job;  // needs no more than any job of theirs
    job.owner = owner;
    job.per_task = pending.least_need(owner);
    const Resources& need = job.per_task;
    const bool lacks = (free.cpu_millis <= 0 && need.cpu_millis > 0) ||
                       (free.memory_bytes <= 0 && need.memory_bytes > 0) || (free.gpus <= 0 && need.gpus > 0);
    if (!lacks) least.push_back(std::move(job));
  }
  if (least.empty()) return false;
  std::map<std::string, sched::Use> use = state.capacity.use_by_owner();
  std::set<std::string> grouped;  // whose groups group quotas need: a group holds its members' use
  if (!state.policy.group_quotas().empty()) {
    for (const auto& [owner, _] : use) grouped.insert(owner);
    for (const auto& job : least) grouped.insert(job.owner);
  }
  const sched::QuotaPolicy quotas = state.policy.quota_policy(grouped);
  if (quotas.empty()) return true;
  const sched::QuotaLedger ledger(quotas, std::move(use), state.capacity.use_by_queue());
  return std::any_of(least.begin(), least.end(), [&](const auto& job) { return !ledger.over_quota(job); });
}

std::optional<sched::JobPlacement> place_now(const PassState& state, const Job& job) {
  sched::PendingJob candidate = pending_job(job.id, job.spec, state.policy);
  candidate.owner = job.owner;
  candidate.may_preempt = false;
  sched::PassInput input;
  input.use = state.capacity.use_by_owner();
  std::set<std::string> owners{job.owner};  // whose groups group quotas need
  if (!state.policy.group_quotas().empty()) {
    for (const auto& [owner, _] : input.use) owners.insert(owner);
  }
  input.quotas = state.policy.quota_policy(owners);
  input.queue_use = state.capacity.use_by_queue();
  input.now_ms = state.now_ms;
  sched::Plan plan = sched::schedule(state.capacity.base(), {candidate}, input);
  if (plan.placements.empty()) return std::nullopt;
  return std::move(plan.placements.front());
}

}  // namespace ag::head
