// The scheduler's view of the head's state, and one pass's plan. Free functions, read
// only: they turn the node registry, the job table and the sharing policy into the
// pure scheduler's input (head/scheduler/scheduler.h) and ask it for a plan; the job
// controller carries the plan out.
//
//   plan_pass: the working view of the cluster (cluster_capacity.h: each node with what
//   live tasks leave free, what each owner holds) --> the queue's window in order
//   (priority, fair share, submit order; owners over quota left out, jobs set aside or
//   waiting out a retry delay skipped) --> sched::schedule --> placements, reasons,
//   preemptions
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "api/job_spec.h"
#include "head/jobs/cluster_capacity.h"
#include "head/jobs/job_state_machine.h"
#include "head/jobs/job_table.h"
#include "head/jobs/scheduling_loop.h"
#include "head/nodes/node_registry.h"
#include "head/scheduler/scheduler.h"
#include "head/sharing/policy_store.h"
#include "head/sharing/usage_ledger.h"

namespace ag::head {

// A node with its whole capacity free (before running tasks are taken off);
// `draining_schedulable`: whether a draining node counts.
sched::NodeView node_view(const Node& node, bool draining_schedulable = false);
// Every node with its whole capacity free (before running tasks are taken off);
// `draining_schedulable`: whether draining nodes count (they take tasks again later).
std::map<std::string, sched::NodeView> node_capacity(const NodeRegistry& nodes, bool draining_schedulable = false);

// The scheduler's view of a job: its spec with its queue's nodes and preemption.
sched::PendingJob pending_job(const std::string& id, const api::JobSpec& spec, const PolicyStore& policy);

// Running jobs as preemption weighs them (what each task holds; stopping or not).
std::vector<sched::RunningJob> running_for_preemption(const JobTable& jobs, const NodeRegistry& nodes);

struct PassState {
  const JobTable& jobs;
  const NodeRegistry& nodes;
  const ClusterCapacity& capacity;  // kept from the jobs and nodes above
  const PolicyStore& policy;
  const UsageLedger& usage;
  const SchedulingLoop& loop;  // the queue, its window and the jobs set aside
  int64_t now_ms;
};

struct PassPlan {
  sched::Plan plan;            // pending reasons include those over quota
  size_t weighed = 0;          // queued jobs the scheduler weighed
  int64_t next_retry_ms = 0;   // the earliest retry delay still running, or 0
};

// Where each task of `placement` goes, with its node's address.
std::vector<PlacedTask> placed_tasks(const NodeRegistry& nodes, const sched::JobPlacement& placement);

// One scheduling pass's plan over the head's state as it is.
PassPlan plan_pass(const PassState& state);

// Whether `node`, with what it has free, could hold a task of a queued job: not when no
// queued job may run there at all (labels it lacks, its queue's included; no container
// engine; a mount it does not allow), nor when each owner with jobs queued either needs,
// in some dimension, some of what the node has none of, or holds all a quota allows even
// for the least any job of theirs needs. (Those jobs wait for other nodes, for jobs to
// end or for a quota to change, and each of those asks for a pass.)
bool could_use(const PassState& state, const sched::NodeView& node);

// Where `job`, submitted while no job waits in the queue, goes at once: the placement
// a pass over it alone would make (its owner's and queue's quotas, its queue's nodes),
// or nullopt when it must queue (no room now, or over a quota: the pass after its
// submit says why). It preempts nothing: a job that would have to, queues.
std::optional<sched::JobPlacement> place_now(const PassState& state, const Job& job);

}  // namespace ag::head
