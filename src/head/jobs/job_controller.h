// JobController: takes the events that change jobs in, runs the job state machine
// (job_state_machine.h) over them and routes the effects it returns to the units that
// carry them out. It decides nothing itself and owns no state: the jobs are the
// JobTable's, the queue and its passes the SchedulingLoop's, and so on (job_layer.h
// builds them all and wires them together).
//
//   submit --admission--> stored (JobWriter) --> table + gates or queue --> pass
//   submit while nothing waits --admission--> placed at once --> stored with its
//         placement (one write) --> table, tasks launched
//   pass: plan_pass (scheduling_view.h) --> placements --> TaskDispatcher (launch once
//         stored); reasons --> pending jobs; preemptions --> victims stopped
//   worker: task started / exited, node lost or back (reconcile.h) --> state machine
//   effects --> JobWriter (persist), TaskDispatcher (launch, kill, master ports),
//         UsageLedger (charge), Deadlines (timeouts), GateIndex / ArrayThrottle (who is
//         weighed next), JobEvents (watchers, observers)
//
// Scheduling is pushed, never polled: any event that frees capacity or queues a job
// asks the loop for one pass. All methods run on the io thread.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "api/protocol.h"
#include "common/clock.h"
#include "common/result.h"
#include "head/events/event_log.h"
#include "head/jobs/array_throttle.h"
#include "head/jobs/cluster_capacity.h"
#include "head/jobs/deadlines.h"
#include "head/jobs/gate_index.h"
#include "head/jobs/job_config.h"
#include "head/jobs/job_events.h"
#include "head/jobs/job_state_machine.h"
#include "head/jobs/job_table.h"
#include "head/jobs/job_writer.h"
#include "head/jobs/scheduling_loop.h"
#include "head/jobs/task_dispatcher.h"
#include "head/logs/log_store.h"
#include "head/nodes/node_registry.h"
#include "head/nodes/worker_channel.h"
#include "head/sharing/policy_store.h"
#include "head/sharing/usage_ledger.h"
#include "head/store/kv_store.h"

namespace ag::head {

class JobController {
 public:
  // The units it feeds, and what it reads of the rest of the head.
  struct Units {
    JobTable& jobs;
    ClusterCapacity& capacity;  // told of every change of a job it applies
    JobWriter& writer;
    SchedulingLoop& loop;
    TaskDispatcher& dispatcher;
    Deadlines& deadlines;
    GateIndex& gates;
    ArrayThrottle& arrays;
    UsageLedger& usage;
    JobEvents& listeners;
    EventLog& cluster_events;
    const PolicyStore& policy;
    NodeRegistry& nodes;
    WorkerChannel& workers;
    LogStore& logs;
    store::KvStore& store;
    const Clock& clock;
  };
  JobController(Units units, JobConfig config) : u_(units), config_(config) {}
  JobController(const JobController&) = delete;
  JobController& operator=(const JobController&) = delete;

  // Loads every job and event (at start; the policy and usage are loaded before).
  // Running jobs wait for their workers to reconnect; nodes that never do are declared
  // lost by the registry's expiry. Errors: the store's.
  Status recover();

  // Accepts jobs: checks them (admission.h), stores them in one write (all or none),
  // then calls `done` with their ids (or the error; nothing is kept then). A spec whose
  // submission_id its owner used before gets the earlier job's id. An array's id stands
  // for all its elements.
  struct Submitter {
    std::string owner;
    std::string from;  // the client's address, kept for the audit log
    bool admin;  // no initializer (a default argument's type may not have one); {} makes it false
  };
  void submit_all(std::vector<api::JobSpec> specs, std::function<void(Result<std::vector<std::string>>)> done,
                  const Submitter& by = {});
  void submit(api::JobSpec spec, std::function<void(Result<std::string>)> done, const Submitter& by = {});

  // Stops a job: the stop is durable before anything happens, so that a stop
  // acknowledged to a user survives a head restart. `done` gets ok once it is stored and
  // carried out, or the error (kNotFound, kConflict when finished, the store's), in
  // which case nothing changed. `by` names who asked, in the job's events.
  void stop(const std::string& job_id, const std::string& by, std::function<void(Status)> done);

  // Holds a pending job (out of the queue until released) or releases it, once stored.
  // Errors: kNotFound; kConflict when not pending, or released unheld.
  void set_hold(const std::string& job_id, bool hold, const std::string& by, std::function<void(Status)> done);

  // Worker channel events.
  // `running`: tasks the worker still runs (adopted, or killed when the head gave up on
  // them). `ended`: tasks that ended while the head was away, whose exits follow.
  // Any other task the head placed on the node is gone and fails as lost.
  void on_node_registered(const std::string& node_id, const std::vector<api::RunningTask>& running,
                          const std::vector<api::TaskKey>& ended);
  // A node reports a task's start or end. Only the node the task is placed on may:
  // kPermissionDenied (and nothing changes) otherwise; kNotFound for a task the head
  // does not know (nothing to change either).
  Status on_task_started(const std::string& node_id, const api::TaskKey& task, int64_t pid);
  Status on_task_exited(const std::string& node_id, const api::TaskKey& task, const api::TaskExit& exit);
  void on_node_dead(const std::string& node_id);
  // A node's health report (or its registration's): an UNHEALTHY node takes no new
  // tasks, and the running gangs on it that asked for it (on_node_unhealthy: requeue)
  // are stopped and queued again, not counted as a retry.
  void on_node_health(const std::string& node_id, const api::HealthReport& report);

  // The head's own events: a task ended as the head concluded (its launch could not be
  // sent), a run or attempt timeout came, begin times came for gated jobs, and a
  // scheduling pass is due.
  void task_ended(const api::TaskKey& task, const api::TaskExit& exit);
  void deadline_passed(const std::string& job_id, const Deadline& deadline);
  // Attempt `attempt` of the job made no progress for its hang timeout, and the job
  // fails on a hang (head/exec/hang_watch.h).
  void hung(const std::string& job_id, int attempt, const std::string& reason);
  void begin_times_came(const std::vector<std::string>& job_ids);
  void run_pass();

  // Adds a line to a job's event log about a problem outside its state machine (a log
  // that could not be written), so that it shows in `ag status JOB -v`.
  // `type` is its kind in the cluster's event stream ("job.hung").
  void report_problem(const std::string& job_id, const std::string& message, const std::string& type = "job.update");

 private:
  void task_started(const api::TaskKey& task, int64_t pid);
  // A job just submitted while nothing waits before it, placed before it is stored (its
  // placement stored with it, in one write): what it holds is reserved meanwhile.
  // nullopt: it queues (gated, an array's element, no room now, over a quota).
  std::optional<Effects> place_at_once(Job& draft, int64_t now_ms);
  // Carries out the state machine's effects on `job`.
  void apply(Job& job, const Effects& fx);
  // Gates: a pending job joins the queue once every gate is open (`opened_by` is its
  // event then), else waits gated, or FAILS on an unmet dependency.
  void admit(Job& job, const std::string& opened_by = "");
  void admit_next_element(const std::string& job_id);  // a place under its array's limit came free
  void ungate(const Job& job);
  void release_dependents(const Job& ended);  // the jobs gated on it are weighed again
  void leave_array_slot(const Job& job);      // an element ended or left the queue
  void preempt(const sched::Preemption& preemption);
  // Adds `messages` to the job's events (and the cluster's stream: the last as `type`,
  // any before it as "job.update") and marks the job to be written with them.
  void record(const Job& job, const std::vector<std::string>& messages, const std::string& type = "job.update");
  // `message` as the next event of the cluster's stream, shown there at once if
  // `stored` (a submit's events, written with the job), else once the writer stores it.
  JobEvent stream_event(const Job& job, std::string message, const std::string& type, bool stored = false);
  void arm_timeout(const Job& job);

  Units u_;
  JobConfig config_;
};

}  // namespace ag::head
