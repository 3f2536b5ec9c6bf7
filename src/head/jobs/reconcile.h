// What the head asks of workers, decided over plain data: the launch message of a
// placed task, and what to do with each task a (re)connecting worker reports.
//
//   worker registers {running[], ended[]} --reconcile_node()--> adopt / kill / relaunch / lost
//
// Pure: no I/O and no clock. The job controller carries the results out.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "api/protocol.h"
#include "head/jobs/job.h"
#include "head/jobs/job_state_machine.h"

namespace ag::head {

// The message that starts task `ref` of `job`: its entrypoint, runtime_env and the
// head's half of its environment (api/task_environment.h).
// `preempt_grace_ms` > 0: the job may be preempted, and its tasks are told the grace
// they get then (AG_PREEMPT_GRACE_S).
api::Launch launch_message(const Job& job, const api::TaskKey& task, int64_t preempt_grace_ms = 0);

// What to do about the tasks of one node that (re)registered.
struct Reconciliation {
  // Reported running, and the head still wants them; those it saw as starting are
  // now started (with the reported pid).
  std::vector<api::RunningTask> adopt;
  // Reported running, but the head gave up on them (job or attempt over, or ending).
  std::vector<api::Kill> kill;
  // Placed on the node but never reported started nor running: the launch was lost
  // with an old channel (or a head that crashed right after placing). Nothing ran, so
  // it is sent again.
  std::vector<TaskRef> relaunch;
  // Placed on the node and known to have started (or its attempt is ending), but the
  // worker neither runs it nor reports its end: it is gone.
  std::vector<TaskRef> lost;
};

// Whether node `node_id` may report on `task` (its start or its end): only the node
// the task was placed on may. Errors: kNotFound when the head has no such task (a
// job it no longer knows), kPermissionDenied when it is placed on another node.
Status check_reporter(const std::map<std::string, Job>& jobs, const std::string& node_id, const api::TaskKey& task);

// `jobs`: the head's job table; `active`: its jobs with a live attempt, by id.
// `running` / `ended`: the worker's report (ended tasks' exits follow separately).
Reconciliation reconcile_node(const std::map<std::string, Job>& jobs, const std::map<std::string, Job*>& active,
                              const std::string& node_id, const std::vector<api::RunningTask>& running,
                              const std::vector<api::TaskKey>& ended, int64_t kill_grace_ms);

}  // namespace ag::head
