#include "head/jobs/cluster_capacity.h"

#include <algorithm>

#include "head/jobs/scheduling_view.h"

namespace ag::head {

void ClusterCapacity::rebuild(const NodeRegistry& nodes, const JobTable& jobs) {
  *this = ClusterCapacity();
  for (const auto& [id, node] : nodes.nodes()) node_changed(id, &node);
  for (const auto& [_, job] : jobs.active()) job_changed(*job, true);
}

void ClusterCapacity::node_changed(const std::string& node_id, const Node* node) {
  auto it = views_.find(node_id);
  if (it != views_.end() && it->second.schedulable) --schedulable_;
  draining_.erase(node_id);
  unhealthy_.erase(node_id);
  if (node && node->state == NodeState::kAlive && (node->draining || node->unhealthy)) {
    (node->draining ? draining_ : unhealthy_).insert(node_id);
  }
  if (!node) {
    if (it == views_.end()) return;
    views_.erase(it);
    gpu_ids_.erase(node_id);
    sorted_stale_ = true;
    return;
  }
  if (it == views_.end()) {
    it = views_.try_emplace(node_id).first;
    sorted_stale_ = true;
  }
  it->second = node_view(*node);
  if (it->second.schedulable) ++schedulable_;
  it->second.node_id = node_id;
  gpu_ids_[node_id] = node->gpu_ids;
  refresh_free(node_id);
}

void ClusterCapacity::refresh_free(const std::string& node_id) {
  auto view = views_.find(node_id);
  if (view == views_.end()) return;
  sched::NodeView& v = view->second;
  const std::vector<int>& all = gpu_ids_[node_id];
  auto held = held_.find(node_id);
  if (held == held_.end()) {
    v.free = v.total;
    v.free_gpu_ids = all;
  } else if (held->second.exclusive_tasks > 0) {
    // A node an exclusive job runs on has nothing free for anyone else.
    v.free = {};
    v.free_gpu_ids.clear();
  } else {
    v.free = v.total - held->second.sum;
    v.free_gpu_ids.clear();
    for (int g : all) {
      if (!held->second.gpus.count(g)) v.free_gpu_ids.push_back(g);
    }
  }
  v.free.cpu_millis = std::max<int64_t>(0, v.free.cpu_millis);
  v.free.memory_bytes = std::max<int64_t>(0, v.free.memory_bytes);
  v.free.gpus = static_cast<int64_t>(v.free_gpu_ids.size());
  if (!sorted_stale_) base_.changed(v);
}

ClusterCapacity::Holding ClusterCapacity::holding_of(const Job& job) {
  Holding h;
  const AttemptRecord* attempt = job.current_attempt();
  if (!attempt) return h;
  h.owner = job.owner;
  h.queue = job.spec.queue;
  h.per_task = job.spec.per_task();
  h.exclusive = job.spec.exclusive;
  h.has_attempt = true;
  for (const auto& task : attempt->tasks) {
    if (!task.terminal()) h.tasks.emplace_back(task.node_id, task.gpu_ids);
  }
  return h;
}

void ClusterCapacity::job_changed(const Job& job, bool active) {
  auto it = holdings_.find(job.id);
  if (!active) {
    if (it == holdings_.end()) return;
    count(job.id, it->second, -1);
    holdings_.erase(it);
    return;
  }
  Holding now = holding_of(job);
  if (it != holdings_.end()) {
    if (it->second == now) return;
    count(job.id, it->second, -1);
    it->second = std::move(now);
  } else {
    it = holdings_.emplace(job.id, std::move(now)).first;
  }
  count(job.id, it->second, +1);
}

void ClusterCapacity::count(const std::string& job_id, const Holding& holding, int sign) {
  if (!holding.has_attempt) return;
  sched::Use use;
  for (const auto& [node_id, gpu_ids] : holding.tasks) {
    use.held += holding.per_task;
    use.running_jobs = 1;
    Held& held = held_[node_id];
    if (sign > 0) {
      held.sum += holding.per_task;
    } else {
      held.sum -= holding.per_task;
    }
    held.exclusive_tasks += holding.exclusive ? sign : 0;
    for (int g : gpu_ids) {
      if ((held.gpus[g] += sign) == 0) held.gpus.erase(g);
    }
    if ((held.jobs[job_id] += sign) == 0) held.jobs.erase(job_id);
    if (held.jobs.empty()) held_.erase(node_id);
    refresh_free(node_id);
  }
  const auto add = [sign, &use](OwnedUse& owned) {
    if (sign > 0) {
      owned.use += use;
    } else {
      owned.use.held -= use.held;
      owned.use.running_jobs -= use.running_jobs;
    }
    owned.jobs += sign;
  };
  auto owner = owners_.try_emplace(holding.owner).first;
  add(owner->second);
  if (owner->second.jobs == 0) owners_.erase(owner);
  if (holding.queue.empty()) return;
  auto queue = queues_.try_emplace(sched::QueueUser{holding.queue, holding.owner}).first;
  add(queue->second);
  if (queue->second.jobs == 0) queues_.erase(queue);
}

const std::vector<const sched::NodeView*>& ClusterCapacity::nodes() const {
  if (sorted_stale_) {
    sorted_.clear();
    sorted_.reserve(views_.size());
    for (const auto& [_, view] : views_) sorted_.push_back(&view);
    base_.reset(sorted_);
    sorted_stale_ = false;
  }
  return sorted_;
}

const sched::NodeBase& ClusterCapacity::base() const {
  nodes();
  return base_;
}

const sched::NodeView* ClusterCapacity::node(const std::string& node_id) const {
  auto it = views_.find(node_id);
  return it == views_.end() ? nullptr : &it->second;
}

std::map<std::string, sched::Use> ClusterCapacity::use_by_owner() const {
  std::map<std::string, sched::Use> out;
  for (const auto& [owner, owned] : owners_) out.emplace_hint(out.end(), owner, owned.use);
  return out;
}

std::map<sched::QueueUser, sched::Use> ClusterCapacity::use_by_queue() const {
  std::map<sched::QueueUser, sched::Use> out;
  for (const auto& [key, owned] : queues_) out.emplace_hint(out.end(), key, owned.use);
  return out;
}

std::map<std::string, Job*> ClusterCapacity::jobs_on(const std::string& node_id, const JobTable& jobs) const {
  std::map<std::string, Job*> out;
  auto held = held_.find(node_id);
  if (held == held_.end()) return out;
  for (const auto& [job_id, _] : held->second.jobs) {
    auto active = jobs.active().find(job_id);
    if (active != jobs.active().end()) out.emplace_hint(out.end(), job_id, active->second);
  }
  return out;
}

}  // namespace ag::head
