// The head's record of a job: its spec, state, attempts and their tasks. Plain data;
// the job state machine (job_state_machine.h) is the only code that changes it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/job_spec.h"
#include "api/job_state.h"
#include "head/scheduler/fair_share.h"
#include "head/scheduler/scheduler.h"

namespace ag::head {

// The states are the API's (clients read them too); the head names them unqualified.
using api::JobState;
using api::TaskState;
using api::to_string;
using api::parse_job_state;
using api::parse_task_state;

struct TaskRecord {
  int index = 0;
  std::string node_id;
  std::string node_address;
  std::vector<int> gpu_ids;
  TaskState state = TaskState::kStarting;
  int64_t pid = 0;
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::string reason;  // why it failed or was stopped, for users
  int64_t started_ms = 0;
  int64_t finished_ms = 0;

  bool terminal() const {
    return state == TaskState::kSucceeded || state == TaskState::kFailed ||
           state == TaskState::kStopped;
  }
};

struct AttemptRecord {
  int number = 0;
  std::string master_addr;
  int master_port = 0;
  std::vector<TaskRecord> tasks;
  int64_t started_ms = 0;
  int64_t finished_ms = 0;
  // Set when the attempt is being torn down (a task failed, or a stop/timeout); no
  // task of it may succeed the job any more.
  bool ending = false;
  std::string failure_reason;
  // The task whose failure ended the attempt (not those stopped because of it), or -1,
  // and its last lines of output as the head held them then (nullopt until read).
  int failed_task = -1;
  std::optional<std::string> failure_tail;
  // What that task's failure was, for the job's retry_on: its exit code (a signal N
  // counts as 128+N, as a shell reports it), or its node lost.
  std::optional<int> failure_exit_code;
  bool failure_node_lost = false;
  // Stopped to make room for a higher-priority job: the job is requeued, and the
  // attempt does not count against its retries.
  bool preempted = false;
  // A failed attempt whose live tasks are kept for a look (hold_on_failure) until this
  // wall time; 0 when not held.
  int64_t held_until_ms = 0;

  bool all_terminal() const;
  bool finished() const { return finished_ms != 0; }
};

// A job's spec as its stored record writes it (job_codec.h's job_record_text): made
// once the spec is final, kept with the job and shared by the elements of an array.
struct JobSpecText {
  std::string spec;      // the "spec" object, as dump() writes it
  std::string num_cpus;  // spec.num_cpus, as dump() writes it
};

struct Job {
  std::string id;
  api::JobSpec spec;
  // `spec` as its stored record writes it (make_spec_text), made at submit or, for a
  // job loaded at start, at its first change: a spec never changes after, and whoever
  // would change it must clear this. Null: encoded from `spec` whenever it is written.
  std::shared_ptr<const JobSpecText> spec_text;
  std::string owner;           // the user who submitted it ("" for jobs from before users)
  std::string submitted_from;  // the address the submission came from
  JobState state = JobState::kPending;
  // FAILED/STOPPED: why. PENDING: the scheduler's latest reason it is waiting.
  std::string message;
  std::optional<sched::PendingKind> pending_kind;  // PENDING: the kind of `message`
  std::vector<AttemptRecord> attempts;
  int64_t submitted_ms = 0;
  int64_t started_ms = 0;
  int64_t finished_ms = 0;
  bool stop_requested = false;
  bool timed_out = false;
  uint64_t queue_seq = 0;  // FIFO order among pending jobs; assigned at submit
  int64_t retry_at_ms = 0;  // PENDING for a retry: not placed before this time
  std::string held_by;      // PENDING and held (ag hold, submit --hold): who holds it
  // An element of a job array: the array's id (this job's id is ARRAY_INDEX) and its index.
  std::string array_id;
  int array_index = -1;

  bool terminal() const {
    return state == JobState::kSucceeded || state == JobState::kFailed ||
           state == JobState::kStopped;
  }
  // Whether task `task_index` of attempt `attempt` can write no more output: it ended,
  // or the job did, or the attempt is no longer the current one. A task of an attempt
  // not placed yet is not over while the job is not.
  bool task_over(int attempt, int task_index) const {
    if (attempt < 0 || attempt >= static_cast<int>(attempts.size())) return terminal();
    const auto& tasks = attempts[static_cast<size_t>(attempt)].tasks;
    return terminal() || task_index < 0 || task_index >= static_cast<int>(tasks.size()) ||
           tasks[static_cast<size_t>(task_index)].terminal();
  }
  AttemptRecord* current_attempt() { return attempts.empty() ? nullptr : &attempts.back(); }
  const AttemptRecord* current_attempt() const {
    return attempts.empty() ? nullptr : &attempts.back();
  }
};

// A pending job as the head's queue keeps it (sched::PendingQueue: priority, then fair
// share among owners, then the order of submission).
inline sched::PendingQueue::Entry queue_entry(const Job& job) {
  const Resources per_task = job.spec.per_task();
  const int64_t n = job.spec.num_workers;
  sched::NodeNeeds where{job.spec.constraints, !job.spec.runtime_env.image.empty(), {}, job.spec.queue};
  for (const auto& mount : job.spec.runtime_env.mounts) where.mounts.push_back(mount.source);
  return {job.owner,
          job.spec.priority,
          job.queue_seq,
          job.id,
          {per_task.cpu_millis * n, per_task.memory_bytes * n, per_task.gpus * n},
          std::move(where)};
}

// A user-readable line in a job's event log ("attempt 0 placed on ...").
// Each is also one event of the cluster's stream (head/events/event_log.h): `seq` is
// its cursor there and `type` its kind ("job.failed"); 0 and "" until it is in it.
struct JobEvent {
  int64_t time_ms = 0;
  std::string message;
  int64_t seq = 0;
  std::string type;
};

}  // namespace ag::head
