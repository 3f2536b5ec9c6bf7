// JobManager: the head's effectful shell around the pure core. It owns the job table,
// the pending queue and master-port allocation; it feeds events to the job state
// machine, runs the scheduler over the node registry, and carries out the effects:
// persisting records through the store, sending launch/kill messages to workers, and
// waking long-poll waiters.
//
//   submit --> store (durable) --> ack + queue --> schedule() --> on_placed --> launch
//   worker: task_started / task_exited / node lost --> state machine --> effects
//   worker registers --> reconcile_node() --> adopt / kill / relaunch / lost
//
// Every decision is made by the pure core (scheduler, job state machine, reconcile.h);
// this class only feeds it and carries out what it returns. Its collaborators come
// from the head daemon (head_daemon.cc), so unit tests run it over a memory store, a
// fake worker channel and a fake clock (tests/unit/head/job_manager_test.cc).
//
// Scheduling is pushed, never polled: any event that frees capacity or queues a job
// posts one scheduling pass. All methods run on the owner's (io) thread.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "api/protocol.h"
#include "common/clock.h"
#include "common/result.h"
#include "common/timers.h"
#include "head/job.h"
#include "head/deadlines.h"
#include "head/job_events.h"
#include "head/job_manager_config.h"
#include "head/job_state_machine.h"
#include "head/job_writer.h"
#include "head/log_store.h"
#include "head/scheduling_loop.h"
#include "head/task_dispatcher.h"
#include "head/node_registry.h"
#include "head/policy_store.h"
#include "head/scheduler/gates.h"
#include "head/array_throttle.h"
#include "head/gate_index.h"
#include "head/usage_ledger.h"
#include "head/store/kv_store.h"
#include "head/worker_channel.h"

namespace ag::head {

class JobManager {
 public:
  struct Deps {
    Timers& timers;
    store::KvStore& store;
    NodeRegistry& nodes;      // what the cluster offers (read for scheduling)
    WorkerChannel& workers;   // where launch and kill messages go
    LogStore& logs;
    const Clock& clock;
  };
  JobManager(Deps deps, JobManagerConfig config);
  ~JobManager();

  // Loads every job and event from the store (at start). Running jobs wait for their
  // workers to reconnect; nodes that never do are declared lost by the registry's
  // expiry. Errors: kInternal when the store cannot be read.
  Status recover();

  // Accepts a job: persists it, then calls `done` with its id (or the store's error,
  // e.g. kResourceExhausted on a full disk; nothing is kept then). A spec whose
  // submission_id was seen before returns the earlier job's id.
  // The submitter becomes the job's owner; submission ids are per owner.
  struct Submitter {
    std::string owner;
    std::string from;  // the client's address, kept for the audit log
    bool admin;  // no initializer (a default argument's type may not have one); {} makes it false
  };
  void submit(api::JobSpec spec, std::function<void(Result<std::string>)> done, const Submitter& by = {});

  // Accepts several jobs in one durable write: all or none.
  void submit_all(std::vector<api::JobSpec> specs, std::function<void(Result<std::vector<std::string>>)> done,
                  const Submitter& by = {});

  const Job* find(const std::string& job_id) const;
  // The job array with this id (`ag submit --array`), or null.
  const JobArray* find_array(const std::string& array_id) const { return arrays_.find(array_id); }

  // Removes a finished job for good: its record, events, logs and submission id
  // (DELETE /api/jobs/{id}, `ag delete-job`); `done` gets ok once that is durable.
  // Errors: kNotFound; kConflict while the job is not finished (stop it first) or is
  // being deleted already; the store's (the job is kept then). job_retention.cc.
  void delete_job(const std::string& job_id, std::function<void(Status)> done);
  // Deletes every job that finished before `before_ms` (the head's --job-retention
  // sweep); returns how many.
  int delete_finished_before(int64_t before_ms);
  // Called with the id of each job deleted, once it is gone.
  using RemovalObserver = JobEvents::RemovalObserver;
  void add_removal_observer(RemovalObserver observer) { listeners_.add_removal_observer(std::move(observer)); }
  // Drains a node (no new tasks; those running finish) or resumes it, once that is
  // stored (it holds across head restarts). Errors: kNotFound; the store's.
  void set_draining(const std::string& node_id, bool draining, std::function<void(Status)> done);
  // Who has the working_dir package `hash`: no job kept, only finished ones, or a
  // pending or running one. One scan of the jobs.
  enum class PackageUse { kUnused, kFinishedJobs, kLiveJobs };
  PackageUse package_use(const std::string& hash) const;
  // The job `owner` submitted with `submission_id` (an alias of its id), or null.
  const Job* find_submission(const std::string& owner, const std::string& submission_id) const;
  // Newest first.
  std::vector<const Job*> list() const;
  // Each pending job's place in the queue, 1 for the next to be weighed (queue_seq ->
  // position); jobs waiting out a retry delay keep their place.
  std::map<uint64_t, int64_t> queue_positions() const;
  const std::vector<JobEvent>& events(const std::string& job_id) const;

  // Errors: kNotFound, kConflict when the job already finished. `by` names who asked,
  // in the job's events.
  Status stop(const std::string& job_id, const std::string& by = "");

  // stop() as the API asks it: the stop is durable before anything happens, so that a
  // stop acknowledged to a user survives a head restart. `done` gets ok once it is
  // stored and carried out, or the error (kNotFound, kConflict, the store's, e.g.
  // kResourceExhausted on a full disk), in which case nothing changed.
  void stop_durably(const std::string& job_id, const std::string& by, std::function<void(Status)> done);

  // Holds a pending job (out of the queue until released) or releases it, once stored
  // (job_gates.cc). Errors: kNotFound; kConflict when not pending, or released unheld.
  void set_hold(const std::string& job_id, bool hold, const std::string& by, std::function<void(Status)> done);

  // Quotas (job_quotas.cc): sets a user's (or group's) limits, or removes them when none
  // is set, once stored. Errors: the store's (nothing changes then).
  void set_quota(bool group, const std::string& name, const sched::Limits& limits, std::function<void(Status)> done);
  const PolicyStore& policy() const { return policy_; }  // quotas, queues
  // What each user's running jobs hold now, in all and in each queue.
  std::map<std::string, sched::Use> use_by_owner() const;
  std::map<sched::QueueUser, sched::Use> use_by_queue() const;
  // Queues (job_queues.cc): sets (or, with nullopt, removes) a queue once stored.
  // Errors: kNotFound, kConflict (jobs still use it), the store's; nothing changes then.
  void set_queue(const std::string& name, std::optional<QueueDef> queue, std::function<void(Status)> done);
  // Fair share (usage_ledger.h): each user's usage, part and factor, most used first.
  std::vector<sched::ShareLine> share_report() const { return usage_.report(policy_.share_weights()); }

  // Where a user's groups come from (the head's access control), for group quotas.
  void set_groups_of(PolicyStore::GroupsOf fn) { policy_.set_groups_of(std::move(fn)); }

  // Calls `changed` once, at the job's next change of state, attempt or task (at once
  // when the job is finished or unknown). Returns an id for cancel_watch.
  uint64_t watch(const std::string& job_id, std::function<void()> changed);
  void cancel_watch(uint64_t id) { listeners_.cancel_watch(id); }

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
  // Whether `node_id` may report on `task` (its output, too): see check_reporter().
  Status may_report(const std::string& node_id, const api::TaskKey& task) const;
  Status on_task_exited(const std::string& node_id, const api::TaskKey& task, const api::TaskExit& exit);
  void on_node_dead(const std::string& node_id);

  // What live tasks hold on each node (for node listings).
  std::map<std::string, Resources> allocations() const;

  // Called (io thread) after every change of a job: submission, placement, task
  // start/exit, finish. For metrics and live views; must not call back into submit/stop.
  using JobObserver = JobEvents::JobObserver;
  void add_observer(JobObserver observer) { listeners_.add_observer(std::move(observer)); }

  // Adds a line to a job's event log about a problem outside its state machine (a log
  // that could not be written), so that it shows in `ag status JOB -v`.
  void report_problem(const std::string& job_id, const std::string& message);

  // Calls `fn` on the io thread once every change made so far is stored (a failed
  // write is retried, and `fn` waits for it). The worker gateway acknowledges a task's
  // exit only then, so a worker never lets go of an end the head could still lose.
  void after_durable(std::function<void()> fn) { writer_.after_durable(std::move(fn)); }

  // Counts by state, for the cluster summary.
  std::map<JobState, int> count_by_state() const;

 private:
  // The start or end of a task, as reported by its own node or concluded by the head.
  void task_started(const api::TaskKey& task, int64_t pid);
  void task_exited(const api::TaskKey& task, const api::TaskExit& exit);
  void request_schedule() { loop_.request(); }
  void run_schedule();  // one pass (job_scheduling.cc), when loop_ says
  // Every node with its whole capacity free (before running tasks are taken off);
  // `draining_schedulable`: whether draining nodes count (they will take tasks again).
  std::map<std::string, sched::NodeView> node_capacity(bool draining_schedulable = false) const;
  // The scheduler's view of a job: its spec with its queue's nodes and preemption.
  sched::PendingJob pending_job(const std::string& id, const api::JobSpec& spec) const;
  // Why a submit of `specs` by `owner` must be refused before anything is reserved: a
  // submission_id reused with another spec (kConflict), or a job no node of the
  // cluster could ever run (kInvalidArgument, unless allow_unschedulable).
  std::optional<Error> check_submissions(const std::vector<api::JobSpec>& specs, const std::string& owner) const;
  // Running jobs for preemption, and carrying one out (victims stop, then requeue).
  std::vector<sched::RunningJob> running_for_preemption() const;
  void preempt(const sched::Preemption& preemption);
  void for_each_holding(const std::function<void(const Job&, const sched::Use&)>& fn) const;
  void apply(Job& job, const Effects& fx);
  // Gates (job_gates.cc): a pending job joins the queue once every gate is open
  // (`opened_by` is its event then), else waits gated, or FAILS on an unmet dependency.
  void admit(Job& job, const std::string& opened_by = "");
  void ungate(const Job& job);
  void release_dependents(const Job& ended);  // the jobs gated on it are weighed again
  // An array element that ended or left the queue gives its place to the next one.
  void leave_array_slot(const Job& job);
  // The job's dependencies, an array's id standing for each of its elements.
  std::vector<std::pair<std::string, sched::DependencyKind>> dependencies_of(const api::JobSpec& spec) const;
  std::vector<std::string> dependency_ids(const api::JobSpec& spec) const;
  sched::Gates gates_of(const Job& job) const;
  // Why a spec's dependencies can never be met (unknown, or ended the wrong way).
  std::optional<Error> check_dependencies(const api::JobSpec& spec, const std::string& where) const;
  // Marks the job (and its new events) to be written (job_writer.h: changed jobs are
  // written together, so a gang whose thousand tasks report in a burst costs a few
  // writes of the job, not one per task).
  void persist(const Job& job, const std::vector<JobEvent>& new_events);
  void add_event(Job& job, const std::string& message, std::vector<JobEvent>& out);
  void arm_timeout(const Job& job);
  // Drops a deleted job from memory (its logs too) and tells the removal observers.
  void forget(const std::string& job_id);

  Deps deps_;
  JobManagerConfig config_;
  std::map<std::string, Job> jobs_;
  std::map<std::string, std::vector<JobEvent>> events_;
  JobWriter writer_;  // every store write of jobs (and policy records, drains)
  // The queue: higher priority first, then the owner who used least lately, then
  // submit order (sched::PendingQueue).
  sched::PendingQueue pending_;
  PolicyStore policy_;    // quotas and queues, as stored
  UsageLedger usage_;     // fair share: users' usage and what running jobs are charged
  std::vector<std::string> salvaged_;  // recover(): stored jobs kept as FAILED
  // Jobs with a live attempt, to their entry in jobs_ (a std::map: entries stay where
  // they are, and an active job is never erased).
  std::map<std::string, Job*> active_;
  std::map<std::string, std::string> submission_ids_;
  uint64_t next_seq_ = 1;
  TaskDispatcher dispatcher_;  // launches (once stored), kills, master ports
  Deadlines deadlines_;  // run and attempt timeouts
  SchedulingLoop loop_;  // when passes run, their window, jobs set aside
  GateIndex gates_;      // pending jobs waiting outside the queue, by what opens their gates
  ArrayThrottle arrays_;  // job arrays and their limits
  JobEvents listeners_;  // watchers and observers of jobs' changes
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ag::head
