// JobLayer: the head's job layer, built and wired in one place. Each unit owns one
// concern and its own state (see each header); the controller takes events in and
// routes the state machine's effects to them. The REST layer, the worker gateway and
// the dashboard read the units they need directly (the table for jobs, the policy for
// quotas and queues, ...) and change jobs only through the controller, the retention
// and the policy changes.
//
//   PolicyStore, UsageLedger     sharing policy and fair-share usage, as stored
//   JobTable                     jobs, events, the active index, submission ids
//   ClusterCapacity              the scheduler's working view of the nodes, kept
//                                between passes (follows the registry and the jobs)
//   JobWriter                    every store write of the layer (write-behind batches,
//                                write-ahead of placements, deletions)
//   SchedulingLoop               the pending queue and when passes run
//   GateIndex, ArrayThrottle     pending jobs outside the queue, array limits
//   TaskDispatcher, Deadlines    launches and kills, master ports; timeouts
//   JobEvents                    watchers and observers
//   EventLog                     the cluster's event stream (job events; NodeEvents
//                                adds the nodes')
//   JobController                events in, state machine, effects out
//   JobRetention, PolicyChanges  deletions; quota, queue and drain changes
//
// Construction only wires; recover() loads what the store holds. Io thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/timers.h"
#include "head/events/event_log.h"
#include "head/jobs/array_throttle.h"
#include "head/jobs/cluster_capacity.h"
#include "head/jobs/deadlines.h"
#include "head/jobs/gate_index.h"
#include "head/jobs/job_config.h"
#include "head/jobs/job_controller.h"
#include "head/jobs/job_events.h"
#include "head/jobs/job_retention.h"
#include "head/jobs/job_table.h"
#include "head/jobs/job_writer.h"
#include "head/logs/log_store.h"
#include "head/nodes/node_registry.h"
#include "head/jobs/policy_changes.h"
#include "head/sharing/policy_store.h"
#include "head/jobs/scheduling_loop.h"
#include "head/store/kv_store.h"
#include "head/jobs/task_dispatcher.h"
#include "head/sharing/usage_ledger.h"
#include "head/nodes/worker_channel.h"

namespace ag::head {

struct JobLayer {
  struct Deps {
    Timers& timers;
    store::KvStore& store;
    NodeRegistry& nodes;      // what the cluster offers (read for scheduling)
    WorkerChannel& workers;   // where launch and kill messages go
    LogStore& logs;
    const Clock& clock;
  };
  JobLayer(Deps deps, JobConfig config);
  ~JobLayer();
  JobLayer(const JobLayer&) = delete;
  JobLayer& operator=(const JobLayer&) = delete;

  // Loads the sharing policy, fair-share usage, drained nodes and every job (at start).
  // Errors: the store's.
  Status recover();

  // Declared in the order they are built: each may use those before it, and is
  // destroyed before them. The units that write through the writer are declared after
  // it (destroyed first); the writer goes before the table, writing what is left of it.
  Deps deps;
  EventLog cluster_events;
  PolicyStore policy;
  UsageLedger usage;
  JobTable table;
  ClusterCapacity capacity;
  JobWriter writer;
  SchedulingLoop loop;
  GateIndex gates;
  ArrayThrottle arrays;
  JobEvents events;
  TaskDispatcher dispatcher;
  Deadlines deadlines;
  JobController controller;
  JobRetention retention;
  PolicyChanges changes;

 private:
  uint64_t node_watch_ = 0;  // capacity's watch of the registry
};

// Each pending job's place in the queue, 1 for the next to be weighed (queue_seq ->
// position); jobs waiting out a retry delay keep their place.
std::map<uint64_t, int64_t> queue_positions(const JobLayer& layer);
// Fair share: each user's usage, part and factor, most used first.
std::vector<sched::ShareLine> share_report(const JobLayer& layer);
// Calls `changed` once, at the job's next change of state, attempt or task (at once when
// the job is finished or unknown). Returns an id for JobEvents::cancel_watch (0 then).
uint64_t watch_job(JobLayer& layer, const std::string& job_id, std::function<void()> changed);
// Whether `node_id` may report on `task` (its start, end or output): only the node the
// task is placed on may. Errors: kPermissionDenied, kNotFound.
Status may_report(const JobLayer& layer, const std::string& node_id, const api::TaskKey& task);

}  // namespace ag::head
