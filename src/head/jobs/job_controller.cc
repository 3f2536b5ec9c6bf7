#include "head/jobs/job_controller.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cstdint>

#include "common/ids.h"
#include "head/jobs/admission.h"
#include "head/jobs/job_codec.h"
#include "head/jobs/reconcile.h"
#include "head/scheduler/gates.h"
#include "head/jobs/scheduling_view.h"

namespace ag::head {
namespace {

// A failed task's last lines kept with its attempt (shown with the job's failure).
constexpr int64_t kFailureTailBytes = 8 * 1024;
constexpr int kFailureTailLines = 50;
// A submit that makes more jobs queues them all (JobController::place_at_once).
constexpr size_t kMostPlacedAtOnce = 8;

// The job's gang as fair share charges it: every task of its attempt.
Gang gang_of(const Job& job) {
  const AttemptRecord* attempt = job.current_attempt();
  const int64_t tasks = attempt ? static_cast<int64_t>(attempt->tasks.size()) : 0;
  const Resources per_task = job.spec.per_task();
  return {job.id, job.owner, {per_task.cpu_millis * tasks, per_task.memory_bytes * tasks, per_task.gpus * tasks}};
}

Error no_such_job(const std::string& job_id) {
  return not_found("no job with id '" + job_id + "'; list jobs with `ag list-jobs`");
}

}  // namespace

Status JobController::recover() {
  auto salvaged = u_.jobs.load(u_.store, u_.clock.now_ms());
  if (!salvaged.ok()) return salvaged.error();
  // The jobs' events that were in the cluster's stream go back into it.
  std::vector<ClusterEvent> streamed;
  for (const auto& [id, job] : u_.jobs.all()) {
    for (const auto& e : u_.jobs.events(id)) {
      if (e.seq > 0) streamed.push_back({e.seq, e.time_ms, e.type, id, "", job.owner, e.message});
    }
  }
  u_.cluster_events.recover(std::move(streamed));
  const int64_t steady = u_.clock.steady_ms();
  std::vector<Job*> waiting;
  for (const auto& [id, stored] : u_.jobs.all()) {
    Job& job = *u_.jobs.find(id);
    if (job.state == JobState::kPending) {
      waiting.push_back(&job);
    } else if (job.state == JobState::kRunning && job.current_attempt()) {
      AttemptRecord& attempt = *job.current_attempt();
      u_.jobs.activate(job);
      u_.usage.charge(gang_of(job), false);  // charged from now: the head was away before
      if (!attempt.tasks.empty()) u_.dispatcher.take_master_port(attempt.tasks.front().node_id, attempt.master_port);
      // The nodes of a running attempt get until the node timeout to reconnect and
      // report; the registry's expiry declares them lost otherwise.
      for (const auto& task : attempt.tasks) {
        if (task.terminal() || u_.nodes.find(task.node_id)) continue;
        Node awaited;  // known from the attempt until the node itself reconnects
        awaited.node_id = task.node_id;
        awaited.address = task.node_address;
        awaited.state = NodeState::kDisconnected;
        awaited.last_heartbeat_steady_ms = steady;
        u_.nodes.upsert(std::move(awaited));
      }
      arm_timeout(job);
    }
  }
  // Salvaged jobs are stored again in the form this version reads, with an event
  // saying what happened.
  for (const auto& id : salvaged.value()) {
    const Job& job = *u_.jobs.find(id);
    record(job, {job.message});
  }
  // Every job is loaded: gates can weigh their dependencies and arrays their elements
  // (by index: ids order "_10" before "_2"). Running elements use their array's limit.
  std::vector<const Job*> elements;
  for (const auto& [id, job] : u_.jobs.all()) {
    if (!job.array_id.empty()) elements.push_back(&job);
  }
  std::sort(elements.begin(), elements.end(),
            [](const Job* a, const Job* b) { return a->array_index < b->array_index; });
  for (const Job* job : elements) u_.arrays.add(*job, job->state == JobState::kRunning);
  for (Job* job : waiting) admit(*job);
  u_.capacity.rebuild(u_.nodes, u_.jobs);
  spdlog::info("recovered {} jobs ({} pending, {} running) from the store", u_.jobs.all().size(),
               u_.loop.queue().size(), u_.jobs.active().size());
  u_.loop.request();
  return {};
}

void JobController::submit(api::JobSpec spec, std::function<void(Result<std::string>)> done, const Submitter& by) {
  std::vector<api::JobSpec> specs;
  specs.push_back(std::move(spec));
  submit_all(std::move(specs), [done = std::move(done)](const Result<std::vector<std::string>>& ids) {
    if (!ids.ok()) return done(ids.error());
    done(ids.value().front());
  }, by);
}

void JobController::submit_all(std::vector<api::JobSpec> specs,
                               std::function<void(Result<std::vector<std::string>>)> done, const Submitter& by) {
  const AdmissionView view{u_.jobs, u_.arrays, u_.policy, u_.nodes,
                           [this](const std::string& id) { return u_.writer.removing(id); }};
  if (auto refused = check_submit(specs, by.owner, by.admin, view)) return done(*refused);
  struct Accepted {
    Job job;
    std::vector<std::string> events;  // submitted, and placed when it was at once
    std::vector<TaskRef> launch;      // placed at once: its tasks, launched once stored
  };
  auto accepted = std::make_shared<std::vector<Accepted>>();
  std::vector<std::string> ids;
  std::vector<std::string> reserved;  // submission ids kept for jobs not yet stored
  std::vector<store::Mutation> batch;
  const int64_t now = u_.clock.now_ms();
  // Jobs are placed at their submit while nothing waits before them (in the queue, in
  // a submit being stored, earlier in this one): the placement is stored with the job.
  // Not the jobs of a large submit: each costs a look at every node, where the passes
  // after it weigh many jobs at once.
  size_t making = 0;
  for (const auto& spec : specs) making += spec.array ? spec.array->indices.size() : 1;
  bool at_once = u_.loop.idle() && making <= kMostPlacedAtOnce;
  for (auto& spec : specs) {
    // A retried submit (same client-chosen id) returns the job it created before.
    // Per owner: one user's submission id never finds another's job.
    if (std::string earlier = u_.jobs.submission(by.owner, spec.submission_id); !earlier.empty()) {
      const Job* job = u_.jobs.find(earlier);
      ids.push_back(job && !job->array_id.empty() ? job->array_id : earlier);
      continue;
    }
    // One job, or one per index of an array ("ARRAY_INDEX", in index order).
    const std::string id = new_job_id();
    std::vector<std::pair<std::string, int>> made;
    if (spec.array) {
      for (int index : spec.array->indices) made.emplace_back(id + "_" + std::to_string(index), index);
    } else {
      made.emplace_back(id, -1);
    }
    // The spec's stored text once for the job (and every element of an array).
    std::shared_ptr<const JobSpecText> spec_text = make_spec_text(spec);
    for (const auto& [job_id, index] : made) {
      Accepted a;
      Job& job = a.job;
      job.id = job_id;
      job.spec = spec;
      job.spec_text = spec_text;
      job.owner = by.owner;
      job.submitted_from = by.from;
      job.submitted_ms = now;
      job.queue_seq = u_.jobs.next_seq();
      if (index >= 0) {
        job.array_id = id;
        job.array_index = index;
      }
      if (job.spec.hold) job.held_by = by.owner.empty() ? "user" : by.owner;
      // Until a scheduling pass says more: a pass looks at the oldest pending jobs only,
      // so a job far back in a long queue still says why it waits.
      job.message = "queued behind jobs submitted before it";
      a.events.push_back("submitted" + (by.owner.empty() ? "" : " by " + by.owner) +
                         (by.from.empty() ? "" : " from " + by.from) + ": " +
                         (index >= 0 ? "element " + std::to_string(index) + " of array " + id + ", " : "") +
                         std::to_string(job.spec.num_workers) + " task(s), entrypoint: " + job.spec.entrypoint);
      if (at_once) {
        if (std::optional<Effects> fx = place_at_once(job, now)) {
          a.events.insert(a.events.end(), fx->events.begin(), fx->events.end());
          a.launch = std::move(fx->launch);
        } else {
          at_once = false;
        }
      }
      std::vector<JobEvent> events;
      for (const auto& message : a.events) events.push_back({now, message});
      for (auto& mutation : JobWriter::records(job, events)) batch.push_back(std::move(mutation));
      accepted->push_back(std::move(a));
    }
    if (!spec.submission_id.empty()) {
      u_.jobs.reserve_submission(by.owner, spec.submission_id, made.front().first);
      reserved.push_back(spec.submission_id);
    }
    ids.push_back(id);
  }
  if (accepted->empty()) return done(ids);
  // Jobs that wait: a job submitted meanwhile is not placed ahead of them.
  const bool queues = accepted->back().launch.empty();
  if (queues) u_.loop.joining(+1);
  // The jobs become visible only once durable: acknowledging first could lose them.
  u_.writer.write_then(
      std::move(batch),
      [this, accepted] {
        std::vector<Job*> added;
        for (auto& a : *accepted) {
          u_.arrays.add(a.job);
          // The job's events are in the stream once durable; they are written again
          // with their places there.
          JobEvent first = stream_event(a.job, a.events.front(), "job.submitted", true);
          Job& job = u_.jobs.add(std::move(a.job), std::move(first));
          for (size_t i = 1; i < a.events.size(); ++i) {
            u_.jobs.add_event(job.id, stream_event(job, a.events[i], "job.update", true));
          }
          u_.writer.changed_unhurried(job.id, 0);
          u_.listeners.added(job);
          if (a.launch.empty()) {
            added.push_back(&job);
            continue;
          }
          // Placed at once, and stored so: its capacity and master port are held already.
          u_.jobs.activate(job);
          u_.usage.charge(gang_of(job), false);
          arm_timeout(job);
          u_.dispatcher.launch(job, a.launch);
        }
        for (Job* job : added) admit(*job);
      },
      [this, ids, accepted, queues, done = std::move(done), reserved, owner = by.owner](const Status& status) {
        if (queues) u_.loop.joining(-1);
        if (!status) {
          for (const auto& sid : reserved) u_.jobs.release_submission(owner, sid);
          // What the jobs placed at once held is free again.
          for (const auto& a : *accepted) {
            const AttemptRecord* attempt = a.job.current_attempt();
            if (!attempt) continue;
            u_.capacity.job_changed(a.job, false);
            u_.dispatcher.release_master_port(attempt->tasks.front().node_id, attempt->master_port);
          }
          return done(status.error());
        }
        done(ids);
        if (queues) u_.loop.request();
      });
}

std::optional<Effects> JobController::place_at_once(Job& draft, int64_t now_ms) {
  if (!draft.array_id.empty() || !draft.held_by.empty() || u_.capacity.schedulable() == 0) return std::nullopt;
  if (sched::check_gates(gates_of(draft, u_.jobs, u_.arrays), now_ms).verdict != sched::GateDecision::Verdict::kOpen) {
    return std::nullopt;
  }
  std::optional<sched::JobPlacement> placement =
      place_now({u_.jobs, u_.nodes, u_.capacity, u_.policy, u_.usage, u_.loop, now_ms}, draft);
  if (!placement) return std::nullopt;
  std::vector<PlacedTask> tasks = placed_tasks(u_.nodes, *placement);
  const int port = u_.dispatcher.allocate_master_port(tasks.empty() ? "" : tasks.front().node_id);
  Effects fx = on_placed(draft, tasks, port, now_ms);
  // Held while the job is stored, so that no pass or submit meanwhile gives it away.
  u_.capacity.job_changed(draft, true);
  return fx;
}

void JobController::stop(const std::string& job_id, const std::string& by, std::function<void(Status)> done) {
  const Job* job = u_.jobs.find(job_id);
  if (!job) return done(no_such_job(job_id));
  if (job->terminal()) {
    return done(Error{ErrorCode::kConflict, "job " + job_id + " already finished (" + to_string(job->state) + ")"});
  }
  // The stopped job is written first, from a draft; only once it is durable does the
  // stop take effect (and is written again as it then stands).
  Job draft = *job;
  on_stop_requested(draft, u_.clock.now_ms(), by);
  u_.writer.write_then(
      JobWriter::records(draft, {}), [] {},
      [this, job_id, by, done = std::move(done)](const Status& status) {
        if (!status) return done(status);
        Job* job = u_.jobs.find(job_id);
        if (!job || job->terminal()) return done({});
        apply(*job, on_stop_requested(*job, u_.clock.now_ms(), by));
        // A batch may have written the job as it stood, without the stop, after its
        // draft: the answer waits for the job written again as it stands now (or, should
        // that write fail, for the batches that retry it).
        u_.writer.write_now(*job, [this, done](bool ok) {
          if (ok) return done({});
          u_.writer.after_durable([done] { done({}); });
        });
      });
}

void JobController::set_hold(const std::string& job_id, bool hold, const std::string& by,
                             std::function<void(Status)> done) {
  Job* found = u_.jobs.find(job_id);
  if (!found) return done(no_such_job(job_id));
  Job& job = *found;
  if (job.state != JobState::kPending) {
    return done(Error{ErrorCode::kConflict,
                      "job " + job_id + " is " + to_string(job.state) + "; only a pending job can be " +
                          (hold ? "held" : "released") +
                          (job.terminal() ? "" : " (stop it with `ag stop-job " + job_id + "`)")});
  }
  if (!hold && job.held_by.empty()) {
    return done(Error{ErrorCode::kConflict, "job " + job_id + " is not held; it is pending: " + job.message});
  }
  const auto when_stored = [this, done = std::move(done)] { u_.writer.after_durable([done] { done({}); }); };
  if (hold && !job.held_by.empty()) return when_stored();  // held already
  const std::string who = by.empty() ? "user" : by;
  job.held_by = hold ? who : "";
  Effects fx;
  fx.changed = true;
  if (hold) fx.events.push_back("held by " + who);
  apply(job, fx);
  admit(job, "released by " + who);
  when_stored();
}

void JobController::on_node_registered(const std::string& node_id, const std::vector<api::RunningTask>& running,
                                       const std::vector<api::TaskKey>& ended) {
  Reconciliation plan = reconcile_node(u_.jobs.all(), u_.capacity.jobs_on(node_id, u_.jobs), node_id, running, ended,
                                       config_.kill_grace_ms);
  for (const auto& kill : plan.kill) u_.workers.send(node_id, kill);
  for (const auto& task : plan.adopt) task_started(task.task, task.pid);
  for (const auto& ref : plan.relaunch) u_.dispatcher.relaunch(*u_.jobs.find(ref.task.job_id), ref);
  const Node* node = u_.nodes.find(node_id);
  const std::string label = node ? node->label() : node_id;
  for (const auto& ref : plan.lost) {
    api::TaskExit exit;
    exit.lost = "node " + label + " reconnected without it";
    task_ended(ref.task, exit);
  }
  // A node that brings nothing a queued job could use (as full as a restarted head's
  // nodes come back, with the tasks they run, or not taking tasks, or with room only
  // for jobs whose owners hold all their quotas allow, or that no queued job may run
  // on: labels, engine, mounts) changes no pass's outcome unless jobs wait set aside
  // for the cluster to change, or it is the only node, or a queue may preempt (the
  // tasks it runs are victims a pass may now choose): a pass for it would weigh the
  // same blocked jobs again, and in a storm of registrations those
  // passes would be all the head does.
  const sched::NodeView* view = u_.capacity.node(node_id);
  const bool brings_nothing =
      !view || !view->schedulable ||
      !could_use({u_.jobs, u_.nodes, u_.capacity, u_.policy, u_.usage, u_.loop, u_.clock.now_ms()}, *view);
  const bool others_schedulable = u_.capacity.schedulable() > (view && view->schedulable ? 1 : 0);
  const bool preemption = std::any_of(u_.policy.queues().begin(), u_.policy.queues().end(),
                                      [](const auto& queue) { return queue.second.preempt; });
  const bool weigh_again = u_.loop.any_set_aside() || !brings_nothing || !others_schedulable || preemption;
  u_.loop.cluster_changed();
  if (weigh_again) u_.loop.request();
}

Status JobController::on_task_started(const std::string& node_id, const api::TaskKey& task, int64_t pid) {
  Status allowed = check_reporter(u_.jobs.all(), node_id, task);
  if (allowed) task_started(task, pid);
  return allowed;
}

Status JobController::on_task_exited(const std::string& node_id, const api::TaskKey& task,
                                     const api::TaskExit& exit) {
  Status allowed = check_reporter(u_.jobs.all(), node_id, task);
  if (allowed) task_ended(task, exit);
  return allowed;
}

void JobController::on_node_health(const std::string& node_id, const api::HealthReport& report) {
  const bool was_unhealthy = u_.nodes.find(node_id) && u_.nodes.find(node_id)->unhealthy;
  const bool turned_unhealthy = u_.nodes.set_health(node_id, report, u_.clock.now_ms());
  const Node* node = u_.nodes.find(node_id);
  if (!node) return;
  if (was_unhealthy != static_cast<bool>(node->unhealthy)) {
    u_.loop.cluster_changed();
    u_.loop.request();
  }
  if (!turned_unhealthy) return;
  const std::string why = "node " + node->label() + " is UNHEALTHY (" + node->unhealthy->reason +
                          "); requeued as it asked (on_node_unhealthy: requeue), not counted as a retry";
  std::vector<Job*> affected;
  for (const auto& [_, job] : u_.jobs.active()) {
    const AttemptRecord* attempt = job->current_attempt();
    if (!job->spec.requeue_on_unhealthy || !attempt) continue;
    for (const auto& task : attempt->tasks) {
      if (task.node_id == node_id && !task.terminal()) {
        affected.push_back(job);
        break;
      }
    }
  }
  for (Job* job : affected) apply(*job, on_preempted(*job, why, config_.kill_grace_ms, u_.clock.now_ms()));
}

void JobController::on_node_dead(const std::string& node_id) {
  u_.loop.cluster_changed();
  const Node* node = u_.nodes.find(node_id);
  const std::string label = node ? node->label() : node_id;
  std::vector<Job*> affected;
  for (const auto& [_, job] : u_.jobs.active()) affected.push_back(job);
  for (Job* job : affected) {
    Effects fx = on_node_lost(*job, node_id, label, u_.clock.now_ms());
    if (const AttemptRecord* attempt = job->current_attempt()) {
      for (const auto& task : attempt->tasks) {
        if (task.node_id == node_id) u_.logs.close({job->id, attempt->number, task.index});
      }
    }
    apply(*job, fx);
  }
  u_.loop.request();
}

void JobController::task_started(const api::TaskKey& task, int64_t pid) {
  Job* job = u_.jobs.find(task.job_id);
  if (job) apply(*job, head::on_task_started(*job, task.attempt, task.task_index, pid, u_.clock.now_ms()));
}

void JobController::task_ended(const api::TaskKey& task, const api::TaskExit& exit) {
  u_.logs.close(task);
  Job* job = u_.jobs.find(task.job_id);
  if (!job) return;
  apply(*job, head::on_task_exited(*job, task.attempt, task.task_index, exit, u_.clock.now_ms()));
  // Any task that ended freed capacity: let queued jobs have it now. (A start, a
  // placement or a new pending reason frees nothing; a pass after them would only
  // look at the same queue again.)
  if (!u_.loop.queue().empty()) u_.loop.request();
}

void JobController::deadline_passed(const std::string& job_id, const Deadline& deadline) {
  if (Job* job = u_.jobs.find(job_id)) apply(*job, on_deadline(*job, deadline, u_.clock.now_ms()));
}

void JobController::hung(const std::string& job_id, int attempt, const std::string& reason) {
  if (Job* job = u_.jobs.find(job_id)) apply(*job, on_hung(*job, attempt, reason, u_.clock.now_ms()));
}

void JobController::begin_times_came(const std::vector<std::string>& job_ids) {
  for (const auto& id : job_ids) {
    Job* job = u_.jobs.find(id);
    if (job && u_.gates.gated(id)) admit(*job, "its begin time came; queued");
  }
}

void JobController::run_pass() {
  if (u_.loop.queue().empty()) return;
  PassPlan pass = plan_pass({u_.jobs, u_.nodes, u_.capacity, u_.policy, u_.usage, u_.loop, u_.clock.now_ms()});
  if (pass.next_retry_ms != 0) u_.loop.at(pass.next_retry_ms);
  for (const auto& placement : pass.plan.placements) {
    Job& job = *u_.jobs.find(placement.job_id);
    std::vector<PlacedTask> tasks = placed_tasks(u_.nodes, placement);
    u_.loop.queue().remove(queue_entry(job));
    u_.jobs.activate(job);
    const int port = u_.dispatcher.allocate_master_port(tasks.empty() ? "" : tasks.front().node_id);
    apply(job, on_placed(job, tasks, port, u_.clock.now_ms()));
    u_.usage.charge(gang_of(job), false);
    arm_timeout(job);
  }
  // Nodes left out because an admin drained them, or unhealthy, are named in every reason.
  const size_t draining = u_.capacity.draining(), unhealthy = u_.capacity.unhealthy();
  std::string drained_note =
      draining == 0 ? "" : "; " + std::to_string(draining) + " node(s) draining take no new tasks (`ag resume NODE`)";
  if (unhealthy > 0) {
    drained_note += "; " + std::to_string(unhealthy) + " UNHEALTHY node(s) take no new tasks (`ag list-nodes` says why)";
  }
  for (const auto& reason : pass.plan.pending) {
    Job& job = *u_.jobs.find(reason.job_id);
    if (reason.infeasible()) u_.loop.set_aside_job(job.id);
    // Most passes give most of what they weigh the reason they gave it before: nothing
    // to write, count or tell.
    const Effects fx = on_pending(job, reason.kind, reason.reason + drained_note, u_.clock.now_ms());
    if (fx.changed || !fx.events.empty()) apply(job, fx);
  }
  for (const auto& preemption : pass.plan.preemptions) preempt(preemption);
  u_.loop.passed(pass.weighed, pass.plan.placements.size());
}

void JobController::report_problem(const std::string& job_id, const std::string& message, const std::string& type) {
  if (const Job* job = u_.jobs.find(job_id)) record(*job, {message}, type);
}

void JobController::preempt(const sched::Preemption& preemption) {
  Job* winner = u_.jobs.find(preemption.job_id);
  if (!winner) return;
  const std::string who = "preempted by job " + winner->id + " (priority " + std::to_string(winner->spec.priority) +
                          (winner->spec.queue.empty() ? "" : ", queue " + winner->spec.queue) +
                          (winner->owner.empty() ? "" : ", " + winner->owner) + "), which needs what it holds";
  std::string victims;
  for (const auto& id : preemption.victims) {
    Job* victim = u_.jobs.find(id);
    if (!victim) continue;
    victims += (victims.empty() ? "" : ", ") + id;
    apply(*victim, on_preempted(*victim, who, config_.preempt_grace_ms, u_.clock.now_ms()));
  }
  if (victims.empty()) return;
  Effects fx;
  fx.events.push_back("preempting " + victims + " (lower priority) to make room; it starts once they have stopped");
  apply(*winner, fx);
}

void JobController::admit(Job& job, const std::string& opened_by) {
  if (job.state != JobState::kPending || u_.jobs.active().count(job.id)) return;
  const int64_t now = u_.clock.now_ms();
  const sched::GateDecision decision = sched::check_gates(gates_of(job, u_.jobs, u_.arrays), now);
  using Verdict = sched::GateDecision::Verdict;
  if (decision.verdict == Verdict::kNever) {
    apply(job, on_dependency_never_met(job, decision.reason, now));
    return;
  }
  if (decision.verdict == Verdict::kOpen) {
    const bool was_gated = u_.gates.gated(job.id);
    ungate(job);
    u_.arrays.queued(job);
    u_.loop.queue().add(queue_entry(job));
    apply(job, on_queued(job, was_gated ? opened_by : ""));
    u_.loop.request();
    return;
  }
  u_.loop.queue().remove(queue_entry(job));
  u_.loop.take_back(job.id);
  // Every dependency, ended or not: one that ended is kept (not deleted) while the job
  // waits, since its outcome is what lets the job start once released.
  u_.gates.gate(job.id, dependency_ids(job.spec, u_.arrays), decision.wake_at_ms);
  u_.arrays.waits(job, decision.kind == sched::PendingKind::kArrayLimit,
                  [this](const std::string& next) { admit_next_element(next); });
  apply(job, on_pending(job, decision.kind, decision.reason, now));
}

void JobController::admit_next_element(const std::string& job_id) {
  if (Job* element = u_.jobs.find(job_id)) admit(*element, "a place under the array's limit came free; queued");
}

void JobController::ungate(const Job& job) {
  u_.gates.ungate(job.id, dependency_ids(job.spec, u_.arrays), job.spec.begin_ms);
}

void JobController::release_dependents(const Job& ended) {
  const std::set<std::string> waiting = u_.gates.dependents(ended.id);
  const std::string why = "dependency " + ended.id + " ended " + to_string(ended.state);
  for (const auto& id : waiting) {
    Job* job = u_.jobs.find(id);
    if (job && u_.gates.gated(id)) admit(*job, why + "; queued");
  }
}

void JobController::leave_array_slot(const Job& job) {
  u_.arrays.leave(job, [this](const std::string& next) { admit_next_element(next); });
}

void JobController::record(const Job& job, const std::vector<std::string>& messages, const std::string& type) {
  const size_t first_new = u_.jobs.events(job.id).size();
  for (size_t i = 0; i < messages.size(); ++i) {
    u_.jobs.add_event(job.id, stream_event(job, messages[i], i + 1 == messages.size() ? type : "job.update"));
  }
  u_.writer.changed(job.id, first_new);
}

JobEvent JobController::stream_event(const Job& job, std::string message, const std::string& type, bool stored) {
  ClusterEvent event;
  event.type = type;
  event.job_id = job.id;
  event.owner = job.owner;
  event.message = std::move(message);
  const ClusterEvent& added =
      stored ? u_.cluster_events.append(std::move(event)) : u_.cluster_events.append_unstored(std::move(event));
  return {added.time_ms, added.message, added.seq, added.type};
}

namespace {

// What a change of a job is in the cluster's event stream: how it ended, or why it
// queues again; "job.update" for the rest.
std::string event_type(const Job& job, const Effects& fx) {
  if (fx.finished) {
    std::string state = to_string(job.state);
    for (char& c : state) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return "job." + state;
  }
  if (fx.requeue) {
    const AttemptRecord* attempt = job.current_attempt();
    return attempt && attempt->preempted ? "job.preempted" : "job.requeued";
  }
  return "job.update";
}

}  // namespace

void JobController::apply(Job& job, const Effects& fx) {
  u_.jobs.recount(job);  // the cluster summary's counts follow its state
  // The task that failed an attempt: its last lines, while the head holds its log whole
  // (a task's exit follows its last byte), kept with the attempt.
  if (AttemptRecord* failed = job.current_attempt(); failed && failed->failed_task >= 0 && !failed->failure_tail) {
    failed->failure_tail =
        u_.logs.tail({job.id, failed->number, failed->failed_task}, kFailureTailBytes, kFailureTailLines);
  }
  if (fx.changed || !fx.events.empty()) {
    // Written from now on at every change: its spec's stored text once (a job loaded at
    // start has none: most of a restart's jobs are finished, and are never written).
    if (!job.spec_text) job.spec_text = make_spec_text(job.spec);
    record(job, fx.events, event_type(job, fx));
    // A finished job is written once more, and then seldom: its text would only hold
    // memory (~0.5 KiB a job; the write makes it again for the moment).
    if (fx.finished && job.terminal()) job.spec_text.reset();
  }
  if (!fx.launch.empty()) u_.dispatcher.launch_when_stored(job, fx.launch);
  for (const auto& ref : fx.kill) {
    u_.dispatcher.kill(ref, fx.kill_grace_ms > 0 ? fx.kill_grace_ms : config_.kill_grace_ms);
  }
  const AttemptRecord* attempt = job.current_attempt();
  if (fx.requeue || fx.finished) {
    if (attempt && !attempt->tasks.empty()) {
      u_.dispatcher.release_master_port(attempt->tasks.front().node_id, attempt->master_port);
    }
    u_.usage.charge(gang_of(job), true);
    u_.jobs.deactivate(job.id);
  }
  if (fx.requeue) u_.loop.queue().add(queue_entry(job));
  // What its live tasks hold now, before anyone else hears of the change.
  u_.capacity.job_changed(job, u_.jobs.active().count(job.id) > 0);
  if (fx.finished) {
    u_.loop.queue().remove(queue_entry(job));
    ungate(job);
    leave_array_slot(job);
    u_.deadlines.disarm(job.id);
  }
  // The job's one timer follows what it waits for now (a failed attempt held for a look
  // has a deadline of its own; a retry waits for the whole run's timeout again).
  if (fx.changed && !fx.finished) arm_timeout(job);
  if (fx.changed || fx.finished) u_.listeners.changed(job);
  // A job that ended or went back to the queue: queued jobs may have what it held.
  if ((fx.finished || fx.requeue) && !u_.loop.queue().empty()) u_.loop.request();
  if (fx.finished) release_dependents(job);
}

void JobController::arm_timeout(const Job& job) { u_.deadlines.arm(job.id, next_deadline(job)); }

}  // namespace ag::head
