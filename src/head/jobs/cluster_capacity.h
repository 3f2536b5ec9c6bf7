// ClusterCapacity: the scheduler's working view of the cluster, kept between passes.
// It owns every node as the scheduler sees it (sched::NodeView: what the node offers
// and what live tasks leave free of it) and what each user's live tasks hold, in all
// and per queue (quotas.h). It is updated from events instead of being rebuilt from
// every node and running job for each pass:
//
//   NodeRegistry::watch_changes  --node_changed-->  that node's view made again
//   a job's change applied   --job_changed-->   what its live tasks hold, before and
//                                               after, moved on their nodes and owner
//   a pass                   --nodes(), use_by_owner(), use_by_queue()
//
// "Live tasks" are those of the current attempt of an active job (JobTable::active)
// that have not ended; an exclusive job's task leaves nothing free on its node. A task
// on a node the registry does not know is kept and counts once the node registers.
// rebuild() makes the same from scratch (at start, and in tests that check the two
// agree). Io thread only.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/resources.h"
#include "head/jobs/job.h"
#include "head/jobs/job_table.h"
#include "head/nodes/node_registry.h"
#include "head/scheduler/quotas.h"
#include "head/scheduler/scheduler.h"

namespace ag::head {

class ClusterCapacity {
 public:
  // Every node of `nodes` and what the active jobs of `jobs` hold, from scratch.
  void rebuild(const NodeRegistry& nodes, const JobTable& jobs);

  // Node `node_id` registered or changed (`node`), or was erased (null).
  void node_changed(const std::string& node_id, const Node* node);
  // What the job's live tasks hold now (nothing unless `active`).
  void job_changed(const Job& job, bool active);

  // Every known node, sorted by node id, as sched::schedule takes them. The pointers
  // stay valid until the next change.
  const std::vector<const sched::NodeView*>& nodes() const;
  // The same as a pass starts from them, kept up to date with them.
  const sched::NodeBase& base() const;
  const sched::NodeView* node(const std::string& node_id) const;
  // How many of them take tasks now (ALIVE, not drained, healthy).
  size_t schedulable() const { return schedulable_; }
  // How many ALIVE nodes take no new tasks because an admin drained them; and how many
  // more (not drained) because they are UNHEALTHY.
  size_t draining() const { return draining_.size(); }
  size_t unhealthy() const { return unhealthy_.size(); }
  // What each owner's live tasks hold: an entry for every owner with an active job
  // (JobTable::use_by_owner's answer); and per (queue, owner) for jobs in a queue.
  std::map<std::string, sched::Use> use_by_owner() const;
  std::map<sched::QueueUser, sched::Use> use_by_queue() const;
  // The active jobs with a live task on `node_id`, by id.
  std::map<std::string, Job*> jobs_on(const std::string& node_id, const JobTable& jobs) const;

 private:
  // What one active job holds.
  struct Holding {
    std::string owner;
    std::string queue;
    Resources per_task;
    bool exclusive = false;
    bool has_attempt = false;  // counted in its owner's use even with no live task left
    std::vector<std::pair<std::string, std::vector<int>>> tasks;  // node id, GPU ids
    bool operator==(const Holding&) const = default;
  };
  // What live tasks hold on one node.
  struct Held {
    Resources sum;
    int exclusive_tasks = 0;
    std::map<int, int> gpus;          // GPU id -> tasks holding it
    std::map<std::string, int> jobs;  // job id -> its live tasks here
  };
  struct OwnedUse {
    sched::Use use;
    int jobs = 0;
  };

  static Holding holding_of(const Job& job);
  void count(const std::string& job_id, const Holding& holding, int sign);
  // Makes the view's free amounts from the node's totals and what is held on it.
  void refresh_free(const std::string& node_id);

  std::map<std::string, sched::NodeView> views_;     // by node id
  std::map<std::string, std::vector<int>> gpu_ids_;  // every GPU of each node, as it names them
  std::map<std::string, Held> held_;                 // by node id, known or not
  std::map<std::string, Holding> holdings_;          // by job id
  std::map<std::string, OwnedUse> owners_;
  std::map<sched::QueueUser, OwnedUse> queues_;
  // nodes(): made again after a node joined or went (a pass reads it; the views it
  // points to are kept in place).
  mutable std::vector<const sched::NodeView*> sorted_;
  mutable sched::NodeBase base_;  // made again with sorted_, then changed view by view
  mutable bool sorted_stale_ = true;
  size_t schedulable_ = 0;
  std::set<std::string> draining_;   // ALIVE and drained
  std::set<std::string> unhealthy_;  // ALIVE, not drained, UNHEALTHY
};

}  // namespace ag::head
