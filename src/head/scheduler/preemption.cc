// Preemption. See preemption.h.
#include "head/scheduler/preemption.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

namespace ag::sched {
namespace {

// What preempting a job costs, compared in this order.
struct Cost {
  int64_t gpus = 0;
  int64_t cpu_millis = 0;
  int64_t lost_ms = 0;  // run time thrown away (the job restarts from its checkpoint, if any)
  size_t jobs = 0;
  auto operator<=>(const Cost&) const = default;
  Cost& operator+=(const Cost& other) {
    gpus += other.gpus;
    cpu_millis += other.cpu_millis;
    lost_ms += other.lost_ms;
    jobs += other.jobs;
    return *this;
  }
};

// Whether the gang fits on the nodes it can use once a set of running jobs has stopped.
class RoomCheck {
 public:
  RoomCheck(const std::vector<NodeView>& nodes, const PendingJob& job) : job_(job) {
    // Only the nodes the job can run on, without what made them so: each check then
    // copies ids and numbers, not label maps.
    const bool demands = job.per_task.cpu_millis > 0 || job.per_task.memory_bytes > 0 || job.per_task.gpus > 0;
    for (const NodeView& node : nodes) {
      if (!node.schedulable || !can_run_on(node, job)) continue;
      NodeView view;
      view.node_id = node.node_id;
      view.total = node.total;
      view.free = node.free;
      view.free_gpu_ids = node.free_gpu_ids;
      // A node that holds no task now and frees nothing cannot help: checks leave it
      // out, so that they cost what is free and freed, not the cluster's size.
      if (!demands || view.free.fits(job.per_task)) useful_.push_back(base_.size());
      index_[node.node_id] = base_.size();
      base_.push_back(std::move(view));
    }
    job_.constraints.clear();
    job_.needs_containers = false;
    job_.mount_sources.clear();
    job_.may_preempt = false;
    job_.queue.clear();
  }

  bool usable(const std::string& node_id) const { return index_.count(node_id) > 0; }

  // How many of the gang's tasks `node_id` alone holds once `freed` have stopped.
  int64_t tasks_on(const std::string& node_id, const std::vector<const RunningJob*>& freed) const {
    NodeView view = base_[index_.at(node_id)];
    for (const RunningJob* running : freed) {
      for (const auto& task : running->tasks) {
        if (task.node_id == node_id) add(view, task);
      }
    }
    int64_t slots = job_.num_tasks;
    const auto bound = [&slots](int64_t have, int64_t want) {
      if (want > 0) slots = std::min(slots, std::max<int64_t>(have, 0) / want);
    };
    bound(view.free.cpu_millis, job_.per_task.cpu_millis);
    bound(view.free.memory_bytes, job_.per_task.memory_bytes);
    bound(view.free.gpus, job_.per_task.gpus);
    return slots;
  }

  // What `freed` hold becomes free in every later check.
  void free_for_good(const std::vector<const RunningJob*>& freed) {
    for (const RunningJob* running : freed) {
      for (const auto& task : running->tasks) {
        auto at = index_.find(task.node_id);
        if (at == index_.end()) continue;
        add(base_[at->second], task);
        if (base_[at->second].free.fits(job_.per_task)) useful_.push_back(at->second);
      }
    }
  }

  bool fits(const std::vector<const RunningJob*>& freed) const {
    Plan plan = schedule(with_freed(freed), {job_});
    return !plan.placements.empty();
  }

 private:
  // A task's resources back on its node (capped at the node's total).
  static void add(NodeView& view, const RunningJob::Task& task) {
    view.free += task.held;
    view.free_gpu_ids.insert(view.free_gpu_ids.end(), task.gpu_ids.begin(), task.gpu_ids.end());
    std::sort(view.free_gpu_ids.begin(), view.free_gpu_ids.end());
    view.free_gpu_ids.erase(std::unique(view.free_gpu_ids.begin(), view.free_gpu_ids.end()), view.free_gpu_ids.end());
    view.free.cpu_millis = std::min(view.free.cpu_millis, view.total.cpu_millis);
    view.free.memory_bytes = std::min(view.free.memory_bytes, view.total.memory_bytes);
    view.free.gpus = static_cast<int64_t>(view.free_gpu_ids.size());
  }

  // The useful nodes and those `freed` run on, with what `freed` hold given back.
  std::vector<NodeView> with_freed(const std::vector<const RunningJob*>& freed) const {
    std::map<size_t, NodeView> views;
    for (size_t i : useful_) views.emplace(i, base_[i]);
    for (const RunningJob* running : freed) {
      for (const auto& task : running->tasks) {
        auto at = index_.find(task.node_id);
        if (at == index_.end()) continue;
        add(views.try_emplace(at->second, base_[at->second]).first->second, task);
      }
    }
    std::vector<NodeView> out;
    out.reserve(views.size());
    for (auto& [_, view] : views) out.push_back(std::move(view));
    return out;
  }

  PendingJob job_;
  std::vector<NodeView> base_;
  std::vector<size_t> useful_;  // indexes into base_ of nodes that hold a task now
  std::map<std::string, size_t> index_;
};

Cost cost_of(const RunningJob& job, int64_t now_ms) {
  Cost cost;
  for (const auto& task : job.tasks) {
    cost.gpus += task.held.gpus;
    cost.cpu_millis += task.held.cpu_millis;
  }
  cost.lost_ms = std::max<int64_t>(0, now_ms - job.started_ms);
  cost.jobs = 1;
  return cost;
}

std::vector<std::string> ids_of(const std::vector<const RunningJob*>& jobs) {
  std::vector<std::string> ids;
  for (const RunningJob* job : jobs) ids.push_back(job->job_id);
  return ids;
}

// Every subset of `candidates` by cost; the first that makes room.
std::optional<std::vector<const RunningJob*>> cheapest_set(const RoomCheck& room,
                                                           const std::vector<const RunningJob*>& candidates,
                                                           const std::vector<Cost>& costs) {
  const size_t n = candidates.size();
  std::vector<std::pair<Cost, uint32_t>> sets;
  sets.reserve((size_t{1} << n) - 1);
  for (uint32_t mask = 1; mask < (uint32_t{1} << n); ++mask) {
    Cost cost;
    for (size_t i = 0; i < n; ++i) {
      if (mask & (uint32_t{1} << i)) cost += costs[i];
    }
    sets.emplace_back(cost, mask);
  }
  std::sort(sets.begin(), sets.end());
  for (const auto& [_, mask] : sets) {
    std::vector<const RunningJob*> chosen;
    for (size_t i = 0; i < n; ++i) {
      if (mask & (uint32_t{1} << i)) chosen.push_back(candidates[i]);
    }
    if (room.fits(chosen)) return chosen;
  }
  return std::nullopt;
}

// Node by node: each step takes, on the one node where it is cheapest, the cheapest
// victims there that make room for one more task, until the gang fits; then each victim
// is dropped again (dearest first) while it still fits. Steps weigh nodes, not single
// victims, so that the set is not spread over nodes that never become free enough.
std::optional<std::vector<const RunningJob*>> greedy_set(const RoomCheck& room,
                                                         const std::vector<const RunningJob*>& candidates,
                                                         const std::vector<Cost>& costs) {
  std::map<std::string, std::vector<size_t>> on_node;  // cheapest first, as `candidates`
  for (size_t i = 0; i < candidates.size(); ++i) {
    for (const auto& task : candidates[i]->tasks) {
      auto& list = on_node[task.node_id];
      if (room.usable(task.node_id) && (list.empty() || list.back() != i)) list.push_back(i);
    }
  }
  std::vector<const RunningJob*> chosen;
  std::vector<bool> taken(candidates.size(), false);
  while (!room.fits(chosen)) {
    std::optional<std::pair<Cost, std::vector<size_t>>> best;
    for (const auto& [node_id, victims] : on_node) {
      const int64_t before = room.tasks_on(node_id, chosen);
      std::vector<const RunningJob*> trial = chosen;
      std::pair<Cost, std::vector<size_t>> step;
      for (size_t i : victims) {
        if (taken[i]) continue;
        trial.push_back(candidates[i]);
        step.first += costs[i];
        step.second.push_back(i);
        if (room.tasks_on(node_id, trial) > before) break;
      }
      if (step.second.empty() || room.tasks_on(node_id, trial) <= before) continue;
      if (!best || step.first < best->first) best = std::move(step);
    }
    if (!best) return std::nullopt;
    for (size_t i : best->second) {
      taken[i] = true;
      chosen.push_back(candidates[i]);
    }
  }
  for (size_t i = chosen.size(); i-- > 0;) {
    std::vector<const RunningJob*> without = chosen;
    without.erase(without.begin() + static_cast<std::ptrdiff_t>(i));
    if (room.fits(without)) chosen = std::move(without);
  }
  return chosen;
}

}  // namespace

std::optional<std::vector<std::string>> choose_victims(const std::vector<NodeView>& nodes, const PendingJob& job,
                                                       const std::vector<RunningJob>& running, int64_t now_ms) {
  RoomCheck room(nodes, job);
  std::vector<const RunningJob*> stopping;
  std::vector<const RunningJob*> candidates;
  for (const RunningJob& other : running) {
    if (other.job_id == job.job_id) continue;
    if (other.stopping) {
      stopping.push_back(&other);
      continue;
    }
    if (!other.preemptible || other.priority >= job.priority) continue;
    const bool near = std::any_of(other.tasks.begin(), other.tasks.end(),
                                  [&](const RunningJob::Task& task) { return room.usable(task.node_id); });
    if (near) candidates.push_back(&other);
  }
  // What stopping jobs hold is coming free whatever this pass decides.
  room.free_for_good(stopping);
  if (room.fits({})) return std::vector<std::string>{};
  if (candidates.empty() || !room.fits(candidates)) return std::nullopt;

  std::vector<Cost> costs;
  for (const RunningJob* candidate : candidates) costs.push_back(cost_of(*candidate, now_ms));
  // Cheapest first; ties by id, so the same inputs give the same victims.
  std::vector<size_t> order(candidates.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::tie(costs[a], candidates[a]->job_id) < std::tie(costs[b], candidates[b]->job_id);
  });
  std::vector<const RunningJob*> sorted;
  std::vector<Cost> sorted_costs;
  for (size_t i : order) {
    sorted.push_back(candidates[i]);
    sorted_costs.push_back(costs[i]);
  }
  auto chosen = sorted.size() <= kExactCandidates ? cheapest_set(room, sorted, sorted_costs)
                                                      : greedy_set(room, sorted, sorted_costs);
  if (!chosen) return std::nullopt;
  return ids_of(*chosen);
}

}  // namespace ag::sched
