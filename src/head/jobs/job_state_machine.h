// The job state machine: PENDING -> RUNNING -> SUCCEEDED | FAILED | STOPPED.
//
// Pure functions over a Job: each takes an event (placed, task started, task exited,
// node lost, stop, timeout) and the time as data, changes the job, and returns the
// effects the head must carry out (launch or kill tasks, append events, requeue).
// No I/O, no clock, no locks; the head's io thread is the only caller in the product.
//
// A gang fails as a whole: when one task of an attempt fails, every other live task is
// killed; once all are confirmed dead the job is retried with a new attempt while
// retries are left, else it FAILS with the first failure's reason.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "api/protocol.h"
#include "head/jobs/job.h"

namespace ag::head {

// A task of a job and the node it was placed on.
struct TaskRef {
  api::TaskKey task;
  std::string node_id;
};

struct Effects {
  std::vector<std::string> events;  // to append to the job's event log, in order
  std::vector<TaskRef> launch;      // tasks to start on their nodes
  std::vector<TaskRef> kill;        // tasks to stop (SIGTERM, grace, SIGKILL)
  int64_t kill_grace_ms = 0;        // the grace for `kill`; 0: the head's own
  bool requeue = false;             // the job is PENDING again and needs a new attempt
  bool finished = false;            // the job reached a terminal state
  bool changed = false;             // the job record changed and must be persisted
};

// Where one task of a new attempt goes.
struct PlacedTask {
  std::string node_id;
  std::string node_address;
  std::vector<int> gpu_ids;
};

// A PENDING job was placed: starts a new attempt whose tasks are all launched.
Effects on_placed(Job& job, const std::vector<PlacedTask>& tasks, int master_port, int64_t now_ms);

// A worker started task `task_index` of `attempt` as process `pid`.
Effects on_task_started(Job& job, int attempt, int task_index, int64_t pid, int64_t now_ms);

// A task's process ended (exit code or signal), or it could not start at all
// (`start_error` set, e.g. "working directory could not be created").
Effects on_task_exited(Job& job, int attempt, int task_index, const api::TaskExit& exit, int64_t now_ms);

// The node stopped heart-beating; its tasks of the current attempt count as failed.
Effects on_node_lost(Job& job, const std::string& node_id, const std::string& node_label,
                     int64_t now_ms);

// The user asked to stop the job. A PENDING job stops at once; a running one once all
// its tasks are confirmed dead. Returns no effects for a job already finished.
Effects on_stop_requested(Job& job, int64_t now_ms, const std::string& by = "");

// A higher-priority job needs what the running job holds (head/scheduler/preemption.h):
// its tasks get SIGTERM and `grace_ms` to save their work, then the job goes back to
// the queue, and the attempt does not count against its retries. `why` names who
// preempted it. No effects for a job not running or already stopping.
Effects on_preempted(Job& job, const std::string& why, int64_t grace_ms, int64_t now_ms);

// Attempt `attempt` made no progress for its hang timeout and the job asked to fail on
// a hang: its tasks are stopped and the attempt fails for `reason` ("no progress for
// 5m"), retried if the job allows. No effects when that attempt is no longer running.
Effects on_hung(Job& job, int attempt, const std::string& reason, int64_t now_ms);

// The job's timeout passed: stopped like on_stop_requested, but ends FAILED with
// "timed out after ...".
Effects on_timed_out(Job& job, int64_t now_ms);

// When a job's timeout fires. A whole-run timeout counts from the job's first
// placement and covers its retries; a per-attempt one (timeout_per_attempt) counts from
// the current attempt's start and belongs to that attempt alone.
struct Deadline {
  int64_t at_ms = 0;           // wall time
  std::optional<int> attempt;  // set for a per-attempt deadline
  bool hold = false;           // the end of a failed attempt's hold (hold_on_failure), not a timeout
  bool operator==(const Deadline&) const = default;
};

// The job's deadline now, or nothing (no timeout, not started, finished, already
// timed out or stopping, or between attempts of a per-attempt timeout).
std::optional<Deadline> timeout_deadline(const Job& job);

// When a failed attempt's hold ends (its live tasks are then stopped), or nothing.
std::optional<Deadline> hold_deadline(const Job& job);
// The earlier of the two: what the job's one timer waits for.
std::optional<Deadline> next_deadline(const Job& job);

// `deadline` passed: on_timed_out, or the hold's end, or no effects when it no longer
// applies (the job finished, or it was an earlier attempt's).
Effects on_deadline(Job& job, const Deadline& deadline, int64_t now_ms);

// A scheduling pass left the job PENDING for `reason`. The reason shown is always the
// latest, but it is derived state: it is logged (and the job written) only when its
// kind changes, not each time the job ahead of it is another one; otherwise a long
// queue would rewrite every pending job on every placement.
Effects on_pending(Job& job, sched::PendingKind kind, const std::string& reason, int64_t now_ms);

// A pending job's gates (head/scheduler/gates.h) opened: it joins the queue, and the
// gate's reason gives way to the queue's. `event` says what opened them ("released by
// alice"), or is empty when nothing worth a line did.
Effects on_queued(Job& job, const std::string& event);

// A dependency of a pending job can no longer be met: it ends FAILED with `reason`.
Effects on_dependency_never_met(Job& job, const std::string& reason, int64_t now_ms);

// Describes how a task ended, e.g. "exited with code 127 (command not found)".
std::string describe_exit(const api::TaskExit& exit);

}  // namespace ag::head
