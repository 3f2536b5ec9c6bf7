// The gang scheduler: a pure function from a cluster snapshot and a FIFO queue of
// pending jobs to a plan of placements and reasons.
//
//   NodeView[] + PendingJob[] (FIFO) --schedule()--> Plan{placements, pending reasons}
//
// It reads no clock, opens no socket and holds no lock; the head builds the inputs
// from its node registry and job table, applies the plan and persists it. Any thread
// may call it; it keeps no state between calls.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/resources.h"
#include "head/scheduler/quotas.h"

namespace ag::sched {

enum class PlacementPolicy {
  kPack,    // fewest nodes: collective traffic stays local
  kSpread,  // as many distinct nodes as possible
};

// One node as the scheduler sees it.
struct NodeView {
  std::string node_id;
  Resources total;                 // what the node offers in all
  Resources free;                  // total minus what running tasks hold
  std::vector<int> free_gpu_ids;   // concrete free GPU indices; size() == free.gpus
  bool schedulable = true;         // false for dead or draining nodes
  std::map<std::string, std::string> labels;  // what job constraints match
  bool containers = false;                    // has a container engine (runs jobs with an image)
  std::vector<std::string> mount_prefixes;    // node paths jobs may mount (ag start-worker --allow-mount)
};

// One job waiting in the queue: a gang of `num_tasks` identical tasks.
struct PendingJob {
  std::string job_id;
  int num_tasks = 1;
  Resources per_task;
  PlacementPolicy policy = PlacementPolicy::kPack;
  std::map<std::string, std::string> constraints;  // labels each of its nodes must have
  bool needs_containers = false;                    // runs in an image: only on nodes with an engine
  std::vector<std::string> mount_sources;           // node paths each of its nodes must allow mounting
  std::string owner;                                // the user whose quotas it counts against
  // Its nodes are its alone (`ag submit --exclusive`): placed only on idle nodes, each
  // taken whole; blocked, it reserves whole nodes.
  bool exclusive = false;
  std::string queue;         // its queue (queues.h), "" for none: per-queue quotas
  int priority = 0;          // what preemption compares (the queue's order is the caller's)
  bool may_preempt = false;  // its queue lets it preempt lower-priority jobs (preemption.h)
};

struct TaskPlacement {
  std::string node_id;
  std::vector<int> gpu_ids;  // exactly per_task.gpus indices, ascending
};

// Where each task of a placed job goes; tasks[i] is task index i. Tasks placed on
// the same node have consecutive indices, and task 0 sits on the node that holds
// the most tasks of the gang.
struct JobPlacement {
  std::string job_id;
  std::vector<TaskPlacement> tasks;
};

// What a pending job waits for, so that callers compare kinds, never sentences.
enum class PendingKind {
  kNoNodes,              // no schedulable node in the cluster
  kInfeasible,           // the cluster as it is could never hold the gang
  kWaitingForResources,  // running tasks hold what it needs
  kWaitingBehind,        // what it needs is reserved for a blocked job ahead of it
  // Gates (gates.h): the job is not in the queue yet.
  kHeld,                 // held by a user until released
  kBeginTime,            // its begin time has not come
  kDependency,           // jobs it depends on have not ended as it needs
  kArrayLimit,           // its array has as many elements queued or running as it may
  kQuota,                // its owner (or their group) holds all their quota allows
  kPreempting,           // lower-priority jobs are being stopped to make room for it
};

// "no_nodes", "infeasible", "waiting_for_resources", "waiting_behind", "held",
// "begin_time", "dependency", "array_limit", "quota", "preempting".
const char* to_string(PendingKind kind);
std::optional<PendingKind> parse_pending_kind(std::string_view text);

// Why a job was not placed in this pass, in plain words for users.
struct PendingReason {
  std::string job_id;
  PendingKind kind = PendingKind::kWaitingForResources;
  std::string reason;
  // True when no amount of waiting helps.
  bool infeasible() const { return kind == PendingKind::kInfeasible; }
};

// A job running now, as preemption (preemption.h) weighs it.
struct RunningJob {
  std::string job_id;
  int priority = 0;
  bool preemptible = true;  // false: `ag submit --no-preempt`
  bool stopping = false;    // its tasks are being stopped already (preempted, failed, stopped)
  int64_t started_ms = 0;   // when its attempt was placed: the younger, the less work lost
  struct Task {
    std::string node_id;
    Resources held;             // what the task holds there (a whole node for --exclusive)
    std::vector<int> gpu_ids;
  };
  std::vector<Task> tasks;
};

// Lower-priority jobs to stop (and requeue) so that `job_id` can start.
struct Preemption {
  std::string job_id;
  std::vector<std::string> victims;
};

struct Plan {
  std::vector<JobPlacement> placements;  // in queue order
  std::vector<PendingReason> pending;    // one per job of the queue not placed
  std::vector<Preemption> preemptions;   // at most one: for the first blocked job
};

// What a pass weighs besides the nodes and the queue.
struct PassInput {
  QuotaPolicy quotas;
  std::map<std::string, Use> use;        // what each owner's running jobs hold now
  std::map<QueueUser, Use> queue_use;    // the same, by queue
  std::vector<RunningJob> running;       // preemption's candidates (may_preempt jobs only)
  int64_t now_ms = 0;
  // Blocked jobs a pass weighs (each reserves, at a cost of O(nodes)); the jobs behind
  // the last of them wait (kWaitingBehind) without being weighed. 0: no limit.
  size_t max_blocked = 0;
};

// Places as many jobs of `queue` (oldest first) as fit on `nodes`, all-or-nothing per
// gang. A job that fits now but sits behind a blocked job is placed only when it
// cannot delay that job: resources a blocked job will need are reserved for it, and
// later jobs may only use what remains. Infeasible jobs reserve nothing.
//
// Never fails: every job of `queue` ends up in exactly one of plan.placements or
// plan.pending, and a pending reason says in plain words what the job waits for.
// Nodes with schedulable == false are ignored. The result is deterministic and does
// not depend on the order of `nodes` (ties are broken by node_id).
Plan schedule(const std::vector<NodeView>& nodes, const std::vector<PendingJob>& queue);

// The same under quotas (quotas.h): a job that would take its owner or their group over
// a quota is left pending (kQuota, with the reason) and reserves nothing. `use`: what
// each owner's running jobs hold now.
Plan schedule(const std::vector<NodeView>& nodes, const std::vector<PendingJob>& queue, const QuotaPolicy& quotas,
              std::map<std::string, Use> use);

// The same with everything a pass weighs. The first job that is blocked (no job ahead
// of it was) and may preempt gets victims among `input.running` when that makes room
// (preemption.h): plan.preemptions names them, its reason says so (kPreempting), and it
// reserves as any blocked job does, so that what the victims free is kept for it.
Plan schedule(const std::vector<NodeView>& nodes, const std::vector<PendingJob>& queue, const PassInput& input);
// The same over nodes kept elsewhere (the head keeps its view between passes and hands
// the scheduler pointers to it, sorted by node_id or not): nothing is copied.
Plan schedule(const std::vector<const NodeView*>& nodes, const std::vector<PendingJob>& queue, const PassInput& input);

namespace detail {
struct WorkingNode;
class FreeIndex;
}

// The nodes as a pass starts from them (the schedulable ones, by node_id), with the
// index of their free amounts and the largest of them, kept between passes by whoever
// keeps the views (the head's ClusterCapacity) and brought up to date one node at a
// time as they change, instead of made from every view at every pass: a pass that
// places one job costs the same on 10,000 nodes as on 1,000. A pass works on them in
// place and leaves them as it found them. Not thread-safe.
class NodeBase {
 public:
  NodeBase();
  ~NodeBase();
  NodeBase(NodeBase&&) noexcept;
  NodeBase& operator=(NodeBase&&) noexcept;

  // Every node, from `views` (in any order; sorted by node_id, they need no sort);
  // each pointer stays valid until the next reset.
  void reset(std::vector<const NodeView*> views);
  // `view`, one of those given to reset, changed (what is free, whether schedulable).
  void changed(const NodeView& view);

 private:
  friend Plan schedule(const NodeBase& nodes, const std::vector<PendingJob>& queue, const PassInput& input);
  void rebuild() const;
  // Node i made again from its view, with what is kept of it.
  void remake(size_t i) const;

  std::vector<const NodeView*> views_;
  // Made from views_ when a pass needs them and they are stale (after a reset, or a
  // node set aside or back); the pass's scratch space too, hence mutable.
  mutable std::vector<detail::WorkingNode> nodes_;
  mutable std::unordered_map<const NodeView*, size_t> position_;  // in nodes_
  mutable bool stale_ = true;
  // Kept with nodes_: their free amounts indexed, and the largest capacity of any one
  // (looked for again only when a node that had it shrinks).
  mutable std::unique_ptr<detail::FreeIndex> index_;
  mutable Resources largest_;
  mutable bool largest_stale_ = false;
};

// The same over a kept NodeBase: what schedule() over its views would plan.
Plan schedule(const NodeBase& nodes, const std::vector<PendingJob>& queue, const PassInput& input);

// Whether `job`'s tasks may run on `node` at all: its labels, engine and mounts.
bool can_run_on(const NodeView& node, const PendingJob& job);

// Why the schedulable `nodes` could never hold `job` however long it waited (the
// reason schedule() would give with kInfeasible), or nullopt when they could, or when
// there is no schedulable node at all (workers may yet join).
std::optional<std::string> never_fits(const std::vector<NodeView>& nodes, const PendingJob& job);

}  // namespace ag::sched
