// The gang scheduler. See scheduler.h for the contract and README.md for the flow.
//
// One pass walks the queue once, oldest job first, against the working nodes
// (working_nodes.h: each node's free, unreserved and reserved room in this pass).
#include "head/scheduler/scheduler.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/amounts.h"
#include "common/path_prefix.h"
#include "head/scheduler/free_index.h"
#include "head/scheduler/preemption.h"
#include "head/scheduler/working_nodes.h"

namespace ag::sched {
namespace {

using detail::Assignment;
using detail::clamp_at_zero;
using detail::FreeIndex;
using detail::index_all;
using detail::largest_node;
using detail::make_working_nodes;
using detail::pointers_to;
using detail::slots_in;
using detail::WorkingNode;

bool has_labels(const NodeView& node, const PendingJob& job) {
  for (const auto& [key, value] : job.constraints) {
    auto it = node.labels.find(key);
    if (it == node.labels.end() || it->second != value) return false;
  }
  return true;
}

bool allows_mount(const NodeView& node, const std::string& source) {
  for (const auto& prefix : node.mount_prefixes) {
    if (path_under(source, prefix)) return true;
  }
  return false;
}

bool allows_mounts(const NodeView& node, const PendingJob& job) {
  for (const auto& source : job.mount_sources) {
    if (!allows_mount(node, source)) return false;
  }
  return true;
}

// Whether the node can run the job's tasks at all: it has every label the job's
// constraints name, a container engine if the job runs in an image, and allows its
// mounts.
bool matches(const NodeView& node, const PendingJob& job) {
  return has_labels(node, job) && (!job.needs_containers || node.containers) && allows_mounts(node, job);
}

bool matches(const WorkingNode& node, const PendingJob& job) { return matches(*node.view, job); }

// Whether an exclusive job may have the node now: nothing runs there, nothing was placed
// there in this pass and nothing is reserved on it.
bool idle(const WorkingNode& node) {
  return node.unreserved_free == node.capacity && node.reserved == Resources{};
}

// Why no node of `nodes` can run the job's tasks at all (see matches), or "" when one can.
std::string no_matching_node(const std::vector<const NodeView*>& nodes, const PendingJob& job) {
  std::vector<const NodeView*> left;
  for (const NodeView* node : nodes) {
    if (has_labels(*node, job)) left.push_back(node);
  }
  if (left.empty()) {
    std::string wanted;
    for (const auto& [key, value] : job.constraints) {
      if (!wanted.empty()) wanted += ", ";
      wanted += key;
      wanted += "=";
      wanted += value;
    }
    return "no alive node has the label(s) " + wanted +
           " it is constrained to; nodes get labels with `ag start-worker --label KEY=VALUE`";
  }
  if (job.needs_containers) {
    std::erase_if(left, [](const NodeView* node) { return !node->containers; });
    if (left.empty()) {
      return std::string("it runs in a container image and no alive node") +
             (job.constraints.empty() ? "" : " with its labels") +
             " can run containers; install podman (or docker) on the workers and restart them";
    }
  }
  for (const auto& source : job.mount_sources) {
    std::erase_if(left, [&](const NodeView* node) { return !allows_mount(*node, source); });
    if (left.empty()) {
      std::string why = "no alive node";
      if (!job.constraints.empty() || job.needs_containers) why += " that could run it";
      why += " allows mounting " + source;
      why += "; start the workers with `--allow-mount " + source + "` (or a folder above it)";
      return why;
    }
  }
  return "";
}

// A node the policy may choose. `slots` bounds how many tasks it may take; `preference`
// ranks nodes that are otherwise alike. For a placement both are the free slots now.
// For a reservation `slots` counts unreserved capacity and `preference` the fractional
// slots free now (6 of 8 GPUs free is 0.75), so that a reservation lands where the
// blocked job can start soonest even when no node has a whole task free yet.
struct Candidate {
  size_t node = 0;
  int64_t slots = 0;
  double preference = 0;
};

Resources times(const Resources& r, int64_t count) {
  return {r.cpu_millis * count, r.memory_bytes * count, r.gpus * count};
}

bool demands_nothing(const Resources& need) {
  return need.cpu_millis == 0 && need.memory_bytes == 0 && need.gpus == 0;
}

// Like slots_in, but without rounding down: how far a node is from holding tasks.
double fractional_slots_in(const Resources& avail, const Resources& need, int64_t when_no_demand) {
  if (demands_nothing(need)) return static_cast<double>(when_no_demand);
  double slots = static_cast<double>(when_no_demand);
  const auto bound = [&slots](int64_t have, int64_t want) {
    if (want > 0) slots = std::min(slots, static_cast<double>(std::max<int64_t>(have, 0)) / want);
  };
  bound(avail.cpu_millis, need.cpu_millis);
  bound(avail.memory_bytes, need.memory_bytes);
  bound(avail.gpus, need.gpus);
  return slots;
}

// ---------------------------------------------------------------------------
// Policies

// Pack: the fewest nodes. A single node that holds the whole gang wins; among those the
// highest preference (capped at the gang size, since extra room does not help this
// job), then the best fit (fewest spare slots) so big holes stay open for big jobs.
// Otherwise taking nodes by most slots first is optimal for the node count.
std::vector<Assignment> choose_pack(std::vector<Candidate> candidates, int64_t num_tasks) {
  const Candidate* best = nullptr;
  for (const Candidate& c : candidates) {
    if (c.slots < num_tasks) continue;
    if (best == nullptr) {
      best = &c;
      continue;
    }
    const double pref_c = std::min(c.preference, static_cast<double>(num_tasks));
    const double pref_best = std::min(best->preference, static_cast<double>(num_tasks));
    if (pref_c != pref_best ? pref_c > pref_best : c.slots < best->slots) best = &c;
  }
  if (best != nullptr) return {{best->node, num_tasks}};

  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    if (a.slots != b.slots) return a.slots > b.slots;
    if (a.preference != b.preference) return a.preference > b.preference;
    return a.node < b.node;
  });
  std::vector<Assignment> chosen;
  int64_t remaining = num_tasks;
  for (const Candidate& c : candidates) {
    if (remaining == 0) break;
    const int64_t take = std::min(c.slots, remaining);
    chosen.push_back({c.node, take});
    remaining -= take;
  }
  return chosen;
}

// Spread: as many distinct nodes as possible. One task per node per round, nodes with
// the most room first. Each round drops the nodes that are full, so the work is
// proportional to the tasks placed plus the candidates, not their product.
std::vector<Assignment> choose_spread(std::vector<Candidate> candidates, int64_t num_tasks) {
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    if (a.preference != b.preference) return a.preference > b.preference;
    if (a.slots != b.slots) return a.slots > b.slots;
    return a.node < b.node;
  });
  std::vector<int64_t> counts(candidates.size(), 0);
  std::vector<size_t> active(candidates.size());
  for (size_t i = 0; i < active.size(); ++i) active[i] = i;
  int64_t remaining = num_tasks;
  while (remaining > 0 && !active.empty()) {
    std::vector<size_t> still_active;
    for (size_t i : active) {
      if (remaining == 0) break;
      ++counts[i];
      --remaining;
      if (counts[i] < candidates[i].slots) still_active.push_back(i);
    }
    active = std::move(still_active);
  }
  std::vector<Assignment> chosen;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (counts[i] > 0) chosen.push_back({candidates[i].node, counts[i]});
  }
  return chosen;
}

// Runs the job's policy over nodes with at least one slot. The caller has checked that
// the slots add up to the gang, so the result always holds num_tasks tasks.
std::vector<Assignment> choose_nodes(std::vector<Candidate> candidates, const PendingJob& job) {
  std::erase_if(candidates, [](const Candidate& c) { return c.slots <= 0; });
  return job.policy == PlacementPolicy::kSpread
             ? choose_spread(std::move(candidates), job.num_tasks)
             : choose_pack(std::move(candidates), job.num_tasks);
}

// Sums slots, stopping once the gang is covered so that huge per-node counts (a task
// asking for one byte) cannot overflow.
template <typename SlotsOf>
int64_t sum_slots_up_to(const std::vector<WorkingNode>& nodes, int64_t limit, SlotsOf slots_of) {
  int64_t sum = 0;
  for (const WorkingNode& node : nodes) {
    sum += std::min(slots_of(node), limit);
    if (sum >= limit) return limit;
  }
  return sum;
}

// ---------------------------------------------------------------------------
// Committing a placement or a reservation

JobPlacement commit_placement(std::vector<WorkingNode>& nodes, FreeIndex& index, std::vector<size_t>& touched,
                              const PendingJob& job, std::vector<Assignment> chosen) {
  // Task 0 goes on the node with the most tasks of the gang (rank 0 is usually the
  // coordinator, so it should sit with most of its peers); a stable sort keeps the
  // policy's order between nodes holding as many tasks.
  std::stable_sort(chosen.begin(), chosen.end(),
                   [](const Assignment& a, const Assignment& b) { return a.tasks > b.tasks; });
  JobPlacement placement;
  placement.job_id = job.job_id;
  placement.tasks.reserve(static_cast<size_t>(job.num_tasks));
  const auto gpus_per_task = static_cast<size_t>(job.per_task.gpus);
  for (const Assignment& a : chosen) {
    WorkingNode& node = nodes[a.node];
    touched.push_back(a.node);
    // Handing out the lowest indices first, in task order, gives each task an ascending
    // run of ids and keeps the assignment reproducible.
    for (int64_t t = 0; t < a.tasks; ++t) {
      TaskPlacement task;
      task.node_id = node.view->node_id;
      task.gpu_ids.assign(node.first_free_gpu(), node.first_free_gpu() + static_cast<std::ptrdiff_t>(gpus_per_task));
      node.gpus_taken += gpus_per_task;
      placement.tasks.push_back(std::move(task));
    }
    const Resources used = times(job.per_task, a.tasks);
    node.free -= used;
    node.unreserved_free -= used;
    if (job.exclusive) {  // the node is the job's alone
      node.free = {};
      node.unreserved_free = {};
      node.gpus_taken = node.all_gpu_ids().size();
    }
    index.set(a.node, node.free);
  }
  return placement;
}

// Reserves what a blocked job will need on the nodes it should eventually run on, so
// that backfilled jobs cannot take it. Reservations are counted against total capacity
// (running tasks end, so capacity is what the job will eventually get), and the same
// amount comes off the node's free resources now, clamped at zero: the part not free
// yet is held by running tasks and needs no protection. GPUs are reserved as a count;
// the ids a task will get are chosen when it is placed. Returns false when earlier
// reservations leave no room, in which case the job reserves nothing.
bool reserve(std::vector<WorkingNode>& nodes, FreeIndex& index, std::vector<size_t>& touched, const PendingJob& job,
             int queue_index) {
  const int64_t n = job.num_tasks;
  std::vector<Candidate> candidates;
  candidates.reserve(nodes.size());
  int64_t capacity_slots = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const WorkingNode& node = nodes[i];
    // An exclusive job reserves only nodes nobody reserved, and then the whole node.
    const bool fits_labels = matches(node, job) && (!job.exclusive || node.reserved == Resources{});
    const int64_t slots = fits_labels ? slots_in(node.capacity - node.reserved, job.per_task, n) : 0;
    // Capped at n (inside fractional_slots_in) because room beyond the gang does not
    // help it start sooner.
    const double free_now = fits_labels ? fractional_slots_in(node.free, job.per_task, n) : 0.0;
    candidates.push_back({i, slots, std::min(free_now, static_cast<double>(slots))});
    capacity_slots += std::min(slots, n);
    if (capacity_slots >= n) capacity_slots = n;
  }
  if (capacity_slots < n) return false;
  for (const Assignment& a : choose_nodes(std::move(candidates), job)) {
    WorkingNode& node = nodes[a.node];
    touched.push_back(a.node);
    const Resources held = job.exclusive ? node.capacity : times(job.per_task, a.tasks);
    node.reserved += held;
    node.free = clamp_at_zero(node.free - held);
    index.set(a.node, node.free);
    if (node.first_reserver < 0) node.first_reserver = queue_index;
  }
  return true;
}

// ---------------------------------------------------------------------------
// Reasons

std::string plural(int64_t count, const char* noun) {
  return std::string(noun) + (count == 1 ? "" : "s");
}

// "{2 CPUs, 4 GiB, 1 GPU}": only the dimensions a task asks for.
std::string format_resources(const Resources& r) {
  std::vector<std::string> parts;
  if (r.cpu_millis > 0) {
    parts.push_back(format_cpus(r.cpu_millis) + " " + (r.cpu_millis == 1000 ? "CPU" : "CPUs"));
  }
  if (r.memory_bytes > 0) parts.push_back(format_memory(r.memory_bytes));
  if (r.gpus > 0) parts.push_back(std::to_string(r.gpus) + " " + plural(r.gpus, "GPU"));
  if (parts.empty()) return "{no resources}";
  std::string out = "{";
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? ", " : "") + parts[i];
  return out + "}";
}

std::string tasks_of(const PendingJob& job) {
  return std::to_string(job.num_tasks) + " " + plural(job.num_tasks, "task") + " of " +
         format_resources(job.per_task);
}

// Says why no amount of waiting would place the job, or nothing when the cluster as it
// is could hold it once running tasks end.
std::optional<std::string> infeasible_reason(const std::vector<WorkingNode>& nodes,
                                             const Resources& largest_of_all, const PendingJob& job) {
  const Resources& need = job.per_task;
  // With constraints, an image or mounts, only the nodes that can run the job count.
  Resources largest = largest_of_all;
  if (!job.constraints.empty() || job.needs_containers || !job.mount_sources.empty()) {
    std::vector<WorkingNode> eligible;
    std::vector<const NodeView*> views;
    for (const WorkingNode& node : nodes) {
      views.push_back(node.view);
      if (matches(node, job)) eligible.push_back(node);
    }
    if (eligible.empty()) return no_matching_node(views, job);
    largest = largest_node(eligible);
  }
  if (job.num_tasks <= 0) {
    return "needs at least 1 task; got num_tasks=" + std::to_string(job.num_tasks);
  }
  if (need.cpu_millis < 0 || need.memory_bytes < 0 || need.gpus < 0) {
    return std::string("asks for a negative amount of a resource");
  }
  // One message per dimension that no node can ever satisfy, so the user sees every
  // request they must lower at once.
  std::vector<std::string> too_big;
  if (need.cpu_millis > largest.cpu_millis) {
    too_big.push_back("needs " + format_cpus(need.cpu_millis) + " " +
                      (need.cpu_millis == 1000 ? "CPU" : "CPUs") + " per task; largest node has " +
                      format_cpus(largest.cpu_millis));
  }
  if (need.memory_bytes > largest.memory_bytes) {
    too_big.push_back("needs " + format_memory(need.memory_bytes) +
                      " memory per task; largest node has " + format_memory(largest.memory_bytes));
  }
  if (need.gpus > largest.gpus) {
    too_big.push_back("needs " + std::to_string(need.gpus) + " " + plural(need.gpus, "GPU") +
                      " per task; largest node has " + std::to_string(largest.gpus));
  }
  if (!too_big.empty()) {
    std::string out = too_big[0];
    for (size_t i = 1; i < too_big.size(); ++i) out += "; " + too_big[i];
    return out;
  }
  // Every dimension fits somewhere, yet maybe not all on the same node (the CPU-rich
  // node has no GPUs); the whole-cluster count below then reports zero.
  const int64_t cluster_slots = sum_slots_up_to(nodes, job.num_tasks, [&](const WorkingNode& n) {
    return matches(n, job) ? slots_in(n.capacity, need, job.num_tasks) : 0;
  });
  if (cluster_slots == 0) {
    return "needs " + format_resources(need) + " per task; no single node has that much in total";
  }
  if (cluster_slots < job.num_tasks) {
    return "needs " + tasks_of(job) + "; the cluster can hold at most " +
           std::to_string(cluster_slots) + " such " + plural(cluster_slots, "task");
  }
  return std::nullopt;
}

// Why a feasible job did not fit now. If it would fit were it not for reservations,
// name the earliest blocked job holding resources on a node it could otherwise use.
PendingReason waiting_reason(const std::vector<WorkingNode>& nodes,
                           const std::vector<PendingJob>& queue, const PendingJob& job,
                           int64_t unreserved_slots) {
  if (unreserved_slots >= job.num_tasks) {
    int blocker = -1;
    for (const WorkingNode& node : nodes) {
      if (node.first_reserver < 0) continue;
      if (!matches(node, job)) continue;
      const int64_t without = slots_in(node.unreserved_free, job.per_task, job.num_tasks);
      const int64_t with = slots_in(node.free, job.per_task, job.num_tasks);
      if (without > with && (blocker < 0 || node.first_reserver < blocker)) {
        blocker = node.first_reserver;
      }
    }
    if (blocker >= 0) {
      return {job.job_id, PendingKind::kWaitingBehind,
              "waiting behind job " + queue[static_cast<size_t>(blocker)].job_id + " (resources reserved for it)"};
    }
  }
  return {job.job_id, PendingKind::kWaitingForResources,
          "waiting for resources: needs " + tasks_of(job) + (job.exclusive ? " on nodes of its own (--exclusive)" : "") +
              "; " + std::to_string(unreserved_slots) + " fit on " + (job.exclusive ? "idle nodes" : "free capacity") +
              " now"};
}

}  // namespace

const char* to_string(PendingKind kind) {
  switch (kind) {
    case PendingKind::kNoNodes: return "no_nodes";
    case PendingKind::kInfeasible: return "infeasible";
    case PendingKind::kWaitingForResources: return "waiting_for_resources";
    case PendingKind::kWaitingBehind: return "waiting_behind";
    case PendingKind::kHeld: return "held";
    case PendingKind::kBeginTime: return "begin_time";
    case PendingKind::kDependency: return "dependency";
    case PendingKind::kArrayLimit: return "array_limit";
    case PendingKind::kQuota: return "quota";
    case PendingKind::kPreempting: return "preempting";
  }
  return "unknown";
}

std::optional<PendingKind> parse_pending_kind(std::string_view text) {
  for (PendingKind kind : {PendingKind::kNoNodes, PendingKind::kInfeasible, PendingKind::kWaitingForResources,
                           PendingKind::kWaitingBehind, PendingKind::kHeld, PendingKind::kBeginTime,
                           PendingKind::kDependency, PendingKind::kArrayLimit, PendingKind::kQuota,
                           PendingKind::kPreempting}) {
    if (text == to_string(kind)) return kind;
  }
  return std::nullopt;
}

std::optional<std::string> never_fits(const std::vector<NodeView>& nodes, const PendingJob& job) {
  std::vector<WorkingNode> working = make_working_nodes(pointers_to(nodes));
  if (working.empty()) return std::nullopt;
  return infeasible_reason(working, largest_node(working), job);
}

// The dimensions in which blocked jobs hold everything, on every node: none of it is
// free and none is left to reserve, so no later job that asks for some of it can be
// placed or reserve. A dimension is marked 1 when so.
Resources fully_reserved(const std::vector<WorkingNode>& nodes) {
  Resources full{1, 1, 1};
  for (const WorkingNode& node : nodes) {
    const Resources left = clamp_at_zero(node.capacity - node.reserved);
    if (node.free.cpu_millis > 0 || left.cpu_millis > 0) full.cpu_millis = 0;
    if (node.free.memory_bytes > 0 || left.memory_bytes > 0) full.memory_bytes = 0;
    if (node.free.gpus > 0 || left.gpus > 0) full.gpus = 0;
  }
  return full;
}

bool needs_any_of(const Resources& need, const Resources& dims) {
  return (need.cpu_millis > 0 && dims.cpu_millis > 0) || (need.memory_bytes > 0 && dims.memory_bytes > 0) ||
         (need.gpus > 0 && dims.gpus > 0);
}

bool can_run_on(const NodeView& node, const PendingJob& job) { return matches(node, job); }

// The working nodes as views of what is free now (after this pass's placements), for
// preemption's checks.
static std::vector<NodeView> free_now(const std::vector<WorkingNode>& nodes) {
  std::vector<NodeView> views;
  views.reserve(nodes.size());
  for (const WorkingNode& node : nodes) {
    NodeView view = *node.view;
    view.total = node.capacity;
    view.free = node.unreserved_free;
    view.free_gpu_ids.assign(node.first_free_gpu(), node.all_gpu_ids().end());
    views.push_back(std::move(view));
  }
  return views;
}

static std::string preempting_reason(const PendingJob& job, const std::vector<std::string>& victims) {
  if (victims.empty()) return "waiting for room being freed: needs " + tasks_of(job) + "; jobs stopping now will free it";
  std::string names;
  for (size_t i = 0; i < victims.size() && i < 3; ++i) names += (i ? ", " : "") + victims[i];
  if (victims.size() > 3) names += " and " + std::to_string(victims.size() - 3) + " more";
  return "preempting " + names + " (lower priority than " + std::to_string(job.priority) + ") to make room: needs " +
         tasks_of(job) + "; it starts once they have stopped";
}

namespace {
// The pass itself, from the nodes as it starts from them (schedulable ones, by node_id),
// `index` of their free amounts and the `largest` capacity of any one of them.
// `touched`: the nodes it placed or reserved on, which it changed.
Plan schedule_on(std::vector<WorkingNode>& working, FreeIndex& index, const Resources& largest,
                 const std::vector<PendingJob>& queue, const PassInput& input, std::vector<size_t>& touched);

}  // namespace

Plan schedule(const std::vector<NodeView>& nodes, const std::vector<PendingJob>& queue) {
  return schedule(nodes, queue, PassInput{});
}

Plan schedule(const std::vector<NodeView>& nodes, const std::vector<PendingJob>& queue, const QuotaPolicy& quotas,
              std::map<std::string, Use> use) {
  PassInput input;
  input.quotas = quotas;
  input.use = std::move(use);
  return schedule(nodes, queue, input);
}

Plan schedule(const std::vector<NodeView>& nodes, const std::vector<PendingJob>& queue, const PassInput& input) {
  return schedule(pointers_to(nodes), queue, input);
}

Plan schedule(const std::vector<const NodeView*>& nodes, const std::vector<PendingJob>& queue, const PassInput& input) {
  std::vector<WorkingNode> working = make_working_nodes(nodes);
  FreeIndex index;
  index_all(index, working);
  std::vector<size_t> touched;
  return schedule_on(working, index, largest_node(working), queue, input, touched);
}

Plan schedule(const NodeBase& nodes, const std::vector<PendingJob>& queue, const PassInput& input) {
  if (nodes.stale_) nodes.rebuild();
  if (nodes.largest_stale_) {
    nodes.largest_ = largest_node(nodes.nodes_);
    nodes.largest_stale_ = false;
  }
  // In place, not on a copy (10,000 nodes are a megabyte and more to copy and fault in
  // at every pass): the nodes it placed or reserved on are made again from their views.
  std::vector<size_t> touched;
  Plan plan;
  try {
    plan = schedule_on(nodes.nodes_, *nodes.index_, nodes.largest_, queue, input, touched);
  } catch (...) {
    nodes.stale_ = true;  // left half-changed: the next pass makes them all again
    throw;
  }
  for (size_t i : touched) nodes.remake(i);
  return plan;
}

namespace {

Plan schedule_on(std::vector<WorkingNode>& working, FreeIndex& index, const Resources& largest,
                 const std::vector<PendingJob>& queue, const PassInput& input, std::vector<size_t>& touched) {
  Plan plan;
  QuotaLedger ledger(input.quotas, input.use, input.queue_use);
  bool blocked_before = false;  // a job ahead was blocked: only the first may preempt
  size_t blocked = 0;
  // The dimensions blocked jobs already hold whole: the jobs further back that need
  // them are not weighed one by one (on a full cluster with a long queue that would
  // cost every pass, and a pass runs at every task end, for nothing).
  Resources saturated;
  std::string behind_reason;  // theirs

  for (size_t q = 0; q < queue.size(); ++q) {
    const PendingJob& job = queue[q];
    // Waiting helps here: a worker may join at any moment.
    if (working.empty()) {
      plan.pending.push_back({job.job_id, PendingKind::kNoNodes,
                              "no alive nodes in the cluster; start a worker with `ag start-worker`"});
      continue;
    }
    // Infeasible jobs reserve nothing, so they never hold up the jobs behind them.
    if (auto reason = infeasible_reason(working, largest, job)) {
      plan.pending.push_back({job.job_id, PendingKind::kInfeasible, std::move(*reason)});
      continue;
    }
    // Over its owner's quota: it waits, and holds nothing back from the jobs behind it.
    if (auto reason = ledger.over_quota(job)) {
      plan.pending.push_back({job.job_id, PendingKind::kQuota, std::move(*reason)});
      continue;
    }

    if (needs_any_of(job.per_task, saturated)) {
      plan.pending.push_back({job.job_id, PendingKind::kWaitingBehind, behind_reason});
      continue;
    }
    if (input.max_blocked > 0 && blocked >= input.max_blocked) {
      plan.pending.push_back({job.job_id, PendingKind::kWaitingBehind,
                              "waiting behind " + std::to_string(blocked) + " " + plural(static_cast<int64_t>(blocked), "job") +
                                  " ahead of it that cannot start yet"});
      continue;
    }
    // A pack job that may run anywhere (no labels, image or mounts to match) on a large
    // cluster: the index finds the nodes a scan of every node would. When they do not
    // hold it, the scan below says why and reserves.
    // When the index finds nothing, a scan would not either: the job is blocked.
    const bool indexed = index.enabled() && job.policy == PlacementPolicy::kPack && !job.exclusive &&
                         job.constraints.empty() && !job.needs_containers && job.mount_sources.empty() &&
                         !demands_nothing(job.per_task);
    if (indexed) {
      if (std::vector<Assignment> chosen = index.pack(job.per_task, job.num_tasks); !chosen.empty()) {
        plan.placements.push_back(commit_placement(working, index, touched, job, std::move(chosen)));
        ledger.add(job);
        continue;
      }
    }
    const int64_t n = job.num_tasks;
    std::vector<Candidate> candidates;
    int64_t free_slots = 0;
    for (size_t i = 0; i < working.size() && !indexed; ++i) {
      if (i == 0) candidates.reserve(working.size());
      const bool usable = matches(working[i], job) && (!job.exclusive || idle(working[i]));
      const int64_t slots = usable ? slots_in(working[i].free, job.per_task, n) : 0;
      candidates.push_back({i, slots, static_cast<double>(slots)});
      free_slots = std::min(free_slots + std::min(slots, n), n);
    }
    if (!indexed && free_slots >= n) {
      plan.placements.push_back(
          commit_placement(working, index, touched, job, choose_nodes(std::move(candidates), job)));
      ledger.add(job);
      continue;
    }

    // Blocked: explain before reserving, so the reason reflects the jobs ahead of this
    // one and not this job's own reservation.
    const int64_t unreserved_slots = sum_slots_up_to(working, n, [&](const WorkingNode& node) {
      const bool usable = matches(node, job) && (!job.exclusive || node.unreserved_free == node.capacity);
      return usable ? slots_in(node.unreserved_free, job.per_task, n) : 0;
    });
    PendingReason reason = waiting_reason(working, queue, job, unreserved_slots);
    if (!blocked_before && job.may_preempt && !input.running.empty()) {
      if (auto victims = choose_victims(free_now(working), job, input.running, input.now_ms)) {
        reason = {job.job_id, PendingKind::kPreempting, preempting_reason(job, *victims)};
        if (!victims->empty()) plan.preemptions.push_back({job.job_id, std::move(*victims)});
      }
    }
    blocked_before = true;
    ++blocked;
    plan.pending.push_back(std::move(reason));
    reserve(working, index, touched, job, static_cast<int>(q));
    saturated = fully_reserved(working);
    if (behind_reason.empty() && !demands_nothing(saturated)) {
      int blocker = static_cast<int>(q);
      for (const WorkingNode& node : working) {
        if (node.first_reserver >= 0) blocker = std::min(blocker, node.first_reserver);
      }
      behind_reason = "waiting behind job " + queue[static_cast<size_t>(blocker)].job_id + " (resources reserved for it)";
    }
  }
  return plan;
}

}  // namespace
}  // namespace ag::sched
