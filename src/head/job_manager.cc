#include "head/job_manager.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "common/ids.h"
#include "head/job_codec.h"
#include "head/reconcile.h"
#include "head/scheduler/scheduler.h"

namespace ag::head {
namespace {

using nlohmann::json;

const std::vector<JobEvent> kNoEvents;

// A failed task's last lines kept with its attempt (shown with the job's failure).
constexpr int64_t kFailureTailBytes = 8 * 1024;
constexpr int kFailureTailLines = 50;

}  // namespace

JobManager::JobManager(Deps deps, JobManagerConfig config)
    : deps_(deps),
      config_(config),
      writer_(deps.clock, deps.timers, deps.store,
              JobWriter::Source{[this](const std::string& id) -> const Job* {
                                  auto it = jobs_.find(id);
                                  return it == jobs_.end() ? nullptr : &it->second;
                                },
                                [this](const std::string& id) -> const std::vector<JobEvent>* {
                                  auto it = events_.find(id);
                                  return it == events_.end() ? nullptr : &it->second;
                                },
                                [this](const std::string& id) { forget(id); }}),
      policy_(deps.store),
      usage_(deps.clock, deps.timers, deps.store, config.usage_half_life_ms),
      dispatcher_(TaskDispatcher::Deps{deps.timers, deps.workers, deps.nodes, writer_,
                                       [this](const std::string& id) { return find(id); },
                                       [this](const api::TaskKey& task, const api::TaskExit& exit) {
                                         task_exited(task, exit);
                                       }},
                  config.master_port_first, config.master_port_last, config.preempt_grace_ms),
      deadlines_(deps.clock, deps.timers,
                 [this](const std::string& id, const Deadline& deadline) {
                   auto it = jobs_.find(id);
                   if (it != jobs_.end()) apply(it->second, on_deadline(it->second, deadline, deps_.clock.now_ms()));
                 }),
      loop_(deps.clock, deps.timers, [this] { run_schedule(); }),
      gates_(deps.clock, deps.timers, [this](const std::vector<std::string>& due) {
        for (const auto& id : due) {
          auto job = jobs_.find(id);
          if (job != jobs_.end() && gates_.gated(id)) admit(job->second, "its begin time came; queued");
        }
      }) {}

JobManager::~JobManager() {
  // The writer, a member, writes what is left (and waits for the store) as it goes.
  *alive_ = false;
}

Status JobManager::recover() {
  if (Status s = policy_.recover(); !s) return s;
  if (Status s = usage_.recover(); !s) return s;
  // Nodes an admin drained stay drained.
  if (Status s = deps_.nodes.recover_drained(deps_.store); !s) return s;
  auto jobs = deps_.store.scan(store::kJobsTable);
  if (!jobs.ok()) return jobs.error();
  for (const auto& [key, value] : jobs.value()) {
    auto doc = json::parse(value, nullptr, false);
    auto job = job_from_json(doc);
    if (!job.ok()) {
      // An accepted job is never dropped: kept as FAILED, saying why, when it can be.
      auto salvaged = salvage_job(doc, job.error().message, deps_.clock.now_ms());
      if (!salvaged) {
        spdlog::error("skipping stored job {}: {}", key, job.error().message);
        continue;
      }
      spdlog::error("stored job {} could not be loaded ({}): kept as FAILED", key, job.error().message);
      salvaged_.push_back(salvaged->id);
      job = std::move(*salvaged);
    }
    next_seq_ = std::max(next_seq_, job->queue_seq + 1);
    if (!job->spec.submission_id.empty()) submission_ids_[job->owner + "\n" + job->spec.submission_id] = job->id;
    jobs_[job->id] = std::move(job.value());
  }
  auto events = deps_.store.scan(store::kEventsTable);
  if (!events.ok()) return events.error();
  for (const auto& [key, value] : events.value()) {
    auto event = event_from_json(json::parse(value, nullptr, false));
    if (!event.ok()) continue;
    events_[key.substr(0, key.find('/'))].push_back(std::move(event.value()));
  }
  int64_t steady = deps_.clock.steady_ms();
  std::vector<std::string> waiting;
  for (auto& [id, job] : jobs_) {
    if (job.state == JobState::kPending) {
      waiting.push_back(id);
    } else if (job.state == JobState::kRunning && job.current_attempt()) {
      AttemptRecord& attempt = *job.current_attempt();
      active_.emplace(id, &job);
      usage_.charge(job, false);  // charged from now: the head was away before
      if (!attempt.tasks.empty()) dispatcher_.take_master_port(attempt.tasks.front().node_id, attempt.master_port);
      // The nodes of a running attempt get until the node timeout to reconnect and
      // report; the registry's expiry declares them lost otherwise.
      for (const auto& task : attempt.tasks) {
        if (task.terminal() || deps_.nodes.find(task.node_id)) continue;
        Node placeholder;
        placeholder.node_id = task.node_id;
        placeholder.address = task.node_address;
        placeholder.state = NodeState::kDisconnected;
        placeholder.last_heartbeat_steady_ms = steady;
        deps_.nodes.upsert(std::move(placeholder));
      }
      arm_timeout(job);
    }
  }
  // Salvaged jobs are stored again in the form this version reads, with an event
  // saying what happened.
  for (const auto& id : salvaged_) {
    Job& job = jobs_[id];
    std::vector<JobEvent> added;
    add_event(job, job.message, added);
    persist(job, added);
  }
  salvaged_.clear();
  // Every job is loaded: gates can weigh their dependencies and arrays their elements
  // (by index: ids order "_10" before "_2"). Running elements use their array's limit.
  std::vector<const Job*> elements;
  for (const auto& [id, job] : jobs_) {
    if (!job.array_id.empty()) elements.push_back(&job);
  }
  std::sort(elements.begin(), elements.end(),
            [](const Job* a, const Job* b) { return a->array_index < b->array_index; });
  for (const Job* job : elements) arrays_.add(*job, job->state == JobState::kRunning);
  for (const auto& id : waiting) admit(jobs_.at(id));
  spdlog::info("recovered {} jobs ({} pending, {} running) from the store", jobs_.size(),
               pending_.size(), active_.size());
  request_schedule();
  return {};
}

void JobManager::submit(api::JobSpec spec, std::function<void(Result<std::string>)> done, const Submitter& by) {
  std::vector<api::JobSpec> specs;
  specs.push_back(std::move(spec));
  submit_all(std::move(specs), [done = std::move(done)](const Result<std::vector<std::string>>& ids) {
    if (!ids.ok()) return done(ids.error());
    done(ids.value().front());
  }, by);
}

const Job* JobManager::find_submission(const std::string& owner, const std::string& submission_id) const {
  if (submission_id.empty()) return nullptr;
  auto it = submission_ids_.find(owner + "\n" + submission_id);
  return it == submission_ids_.end() ? nullptr : find(it->second);
}

std::optional<Error> JobManager::check_submissions(const std::vector<api::JobSpec>& specs,
                                                   const std::string& owner) const {
  // A draining node counts: it takes tasks again once resumed.
  std::vector<sched::NodeView> nodes;
  for (auto& [_, view] : node_capacity(true)) nodes.push_back(std::move(view));
  size_t made = 0;
  for (const auto& spec : specs) made += spec.array ? spec.array->indices.size() : 1;
  if (made > api::kMaxArraySize) {
    return Error{ErrorCode::kInvalidArgument, "this submit would make " + std::to_string(made) +
                                                  " jobs; one submit makes at most " +
                                                  std::to_string(api::kMaxArraySize) + " (no job was submitted)"};
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    const api::JobSpec& spec = specs[i];
    const std::string where = specs.size() > 1 ? "jobs[" + std::to_string(i) + "]: " : "";
    // A submit retried with the same id gets the job it made; the same id with another
    // spec is a mistake that must not quietly return that job.
    if (const Job* existing = find_submission(owner, spec.submission_id)) {
      api::JobSpec as_kept = spec;  // as submit_all keeps it
      as_kept.priority_set = true;
      if (api::to_json(existing->spec) != api::to_json(as_kept)) {
        return Error{ErrorCode::kConflict,
                     where + "submission_id \"" + spec.submission_id + "\" was already used for job " + existing->id +
                         " with a different spec; choose a new submission_id for a new job, or see that one with "
                         "`ag status " + existing->id + "`" + (specs.size() > 1 ? " (no job was submitted)" : "")};
      }
      continue;
    }
    if (auto refused = spec.priority_set ? policy_.check_priority_cap(spec, owner) : std::nullopt) {
      refused->message = where + refused->message + (specs.size() > 1 ? " (no job was submitted)" : "");
      return refused;
    }
    if (auto refused = check_dependencies(spec, where)) {
      if (specs.size() > 1) refused->message += " (no job was submitted)";
      return refused;
    }
    if (spec.allow_unschedulable) continue;
    // A job for an image waits (pending, with the reason) for nodes that can run
    // containers: engines get installed on running clusters. Everything else no node
    // could ever give it is refused now.
    sched::PendingJob job = pending_job("", spec);
    job.needs_containers = false;
    if (auto why = sched::never_fits(nodes, job)) {
      return Error{ErrorCode::kInvalidArgument,
                   where + "no node of this cluster could ever run this job: " + *why +
                       ". Ask for less, add nodes that have it, or queue it for nodes still to join with "
                       "`ag submit --allow-unschedulable` (REST: \"allow_unschedulable\": true)" +
                       (specs.size() > 1 ? " (no job was submitted)" : "")};
    }
  }
  return std::nullopt;
}

void JobManager::submit_all(std::vector<api::JobSpec> specs,
                            std::function<void(Result<std::vector<std::string>>)> done, const Submitter& by) {
  struct Accepted {
    Job job;
    JobEvent event;
  };
  for (size_t i = 0; i < specs.size(); ++i) {
    const std::string where = specs.size() > 1 ? "jobs[" + std::to_string(i) + "]: " : "";
    auto refused = policy_.resolve_queue(specs[i], where);
    if (!refused) refused = policy_.check_no_preempt(specs[i], by.owner, by.admin);
    if (refused) {
      if (specs.size() > 1) refused->message += " (no job was submitted)";
      return done(*refused);
    }
  }
  if (auto refused = check_submissions(specs, by.owner)) return done(*refused);
  // Its priority is settled now (chosen, or its queue's): kept and shown as such.
  for (auto& spec : specs) spec.priority_set = true;
  auto accepted = std::make_shared<std::vector<Accepted>>();
  std::vector<std::string> ids;
  std::vector<std::string> reserved_submission_ids;
  std::vector<store::Mutation> batch;
  int64_t now = deps_.clock.now_ms();
  for (auto& spec : specs) {
    // A retried submit (same client-chosen id) returns the job it created before.
    // Per owner: one user's submission id never finds another's job.
    const std::string submission_key = spec.submission_id.empty() ? "" : by.owner + "\n" + spec.submission_id;
    if (!submission_key.empty()) {
      auto it = submission_ids_.find(submission_key);
      if (it != submission_ids_.end()) {
        const Job* earlier = find(it->second);
        ids.push_back(earlier && !earlier->array_id.empty() ? earlier->array_id : it->second);
        continue;
      }
    }
    // One job, or one per index of an array ("ARRAY_INDEX", in index order).
    const std::string id = new_job_id();
    std::vector<std::pair<std::string, int>> made;
    if (spec.array) {
      for (int index : spec.array->indices) made.emplace_back(id + "_" + std::to_string(index), index);
    } else {
      made.emplace_back(id, -1);
    }
    for (const auto& [job_id, index] : made) {
      Job job;
      job.id = job_id;
      job.spec = spec;
      job.owner = by.owner;
      job.submitted_from = by.from;
      job.submitted_ms = now;
      job.queue_seq = next_seq_++;
      if (index >= 0) {
        job.array_id = id;
        job.array_index = index;
      }
      if (job.spec.hold) job.held_by = by.owner.empty() ? "user" : by.owner;
      // Until a scheduling pass says more: a pass looks at the oldest pending jobs only,
      // so a job far back in a long queue still says why it waits.
      job.message = "queued behind jobs submitted before it";
      JobEvent event{now, "submitted" + (by.owner.empty() ? "" : " by " + by.owner) +
                              (by.from.empty() ? "" : " from " + by.from) + ": " +
                              (index >= 0 ? "element " + std::to_string(index) + " of array " + id + ", " : "") +
                              std::to_string(job.spec.num_workers) + " task(s), entrypoint: " + job.spec.entrypoint};
      for (auto& record : JobWriter::records(job, {event})) batch.push_back(std::move(record));
      accepted->push_back({std::move(job), event});
    }
    if (!submission_key.empty()) {
      submission_ids_[submission_key] = made.front().first;
      reserved_submission_ids.push_back(submission_key);
    }
    ids.push_back(id);
  }
  if (accepted->empty()) return done(ids);
  // The jobs become visible only once durable: acknowledging first could lose them.
  writer_.write_then(
      std::move(batch),
      [this, accepted] {
        std::vector<std::string> made;
        for (auto& a : *accepted) {
          std::string id = a.job.id;
          events_[id].push_back(a.event);
          arrays_.add(a.job);
          jobs_[id] = std::move(a.job);
          listeners_.added(jobs_[id]);
          made.push_back(std::move(id));
        }
        for (const auto& id : made) admit(jobs_.at(id));
      },
      [this, ids, done = std::move(done), reserved_submission_ids](const Status& status) {
        if (!status) {
          for (const auto& sid : reserved_submission_ids) submission_ids_.erase(sid);
          return done(status.error());
        }
        done(ids);
        request_schedule();
      });
}

const Job* JobManager::find(const std::string& job_id) const {
  auto it = jobs_.find(job_id);
  return it == jobs_.end() ? nullptr : &it->second;
}

std::vector<const Job*> JobManager::list() const {
  std::vector<const Job*> out;
  out.reserve(jobs_.size());
  for (const auto& [_, job] : jobs_) out.push_back(&job);
  std::sort(out.begin(), out.end(), [](const Job* a, const Job* b) { return a->queue_seq > b->queue_seq; });
  return out;
}

std::map<uint64_t, int64_t> JobManager::queue_positions() const {
  std::map<uint64_t, int64_t> out;
  int64_t position = 0;
  pending_.walk(usage_.usage_now(policy_.share_weights()), [&](const std::string& id) {
    out.emplace(jobs_.at(id).queue_seq, ++position);
    return true;
  });
  return out;
}

const std::vector<JobEvent>& JobManager::events(const std::string& job_id) const {
  auto it = events_.find(job_id);
  return it == events_.end() ? kNoEvents : it->second;
}

std::map<std::string, Resources> JobManager::allocations() const {
  std::map<std::string, Resources> out;
  for (const auto& [_, job] : active_) {
    const AttemptRecord* attempt = job->current_attempt();
    if (!attempt) continue;
    for (const auto& task : attempt->tasks) {
      if (!task.terminal()) out[task.node_id] += job->spec.per_task();
    }
  }
  return out;
}

void JobManager::set_draining(const std::string& node_id, bool draining, std::function<void(Status)> done) {
  if (!deps_.nodes.find(node_id)) {
    return done(not_found("no node with id '" + node_id + "'; list nodes with `ag list-nodes`"));
  }
  std::set<std::string> drained;
  auto batch = deps_.nodes.drain_record(node_id, draining, &drained);
  writer_.write_then(std::move(batch), [this, drained] {
    deps_.nodes.set_drained(drained);
    loop_.cluster_changed();
    request_schedule();
  }, std::move(done));
}

void JobManager::report_problem(const std::string& job_id, const std::string& message) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  std::vector<JobEvent> added;
  add_event(it->second, message, added);
  persist(it->second, added);
}

std::map<JobState, int> JobManager::count_by_state() const {
  std::map<JobState, int> counts;
  for (const auto& [_, job] : jobs_) counts[job.state]++;
  return counts;
}

Status JobManager::stop(const std::string& job_id, const std::string& by) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return not_found("no job with id '" + job_id + "'; list jobs with `ag list-jobs`");
  Job& job = it->second;
  if (job.terminal()) {
    return Error{ErrorCode::kConflict, "job " + job_id + " already finished (" + to_string(job.state) + ")"};
  }
  apply(job, on_stop_requested(job, deps_.clock.now_ms(), by));
  return {};
}

void JobManager::stop_durably(const std::string& job_id, const std::string& by, std::function<void(Status)> done) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return done(not_found("no job with id '" + job_id + "'; list jobs with `ag list-jobs`"));
  if (it->second.terminal()) {
    return done(Error{ErrorCode::kConflict,
                      "job " + job_id + " already finished (" + to_string(it->second.state) + ")"});
  }
  // The stopped job is written first, from a draft; only once it is durable does the
  // stop take effect (and is written again as it then stands).
  Job draft = it->second;
  on_stop_requested(draft, deps_.clock.now_ms(), by);
  std::vector<store::Mutation> batch = JobWriter::records(draft, {});
  writer_.write_then(std::move(batch), [this, job_id, by] {
    auto job = jobs_.find(job_id);
    if (job != jobs_.end() && !job->second.terminal()) {
      apply(job->second, on_stop_requested(job->second, deps_.clock.now_ms(), by));
    }
  }, std::move(done));
}

uint64_t JobManager::watch(const std::string& job_id, std::function<void()> changed) {
  const Job* job = find(job_id);
  if (!job || job->terminal()) {
    changed();
    return 0;
  }
  return listeners_.watch(job_id, std::move(changed));
}

void JobManager::on_node_registered(const std::string& node_id, const std::vector<api::RunningTask>& running,
                                    const std::vector<api::TaskKey>& ended) {
  Reconciliation plan = reconcile_node(jobs_, active_, node_id, running, ended, config_.kill_grace_ms);
  for (const auto& kill : plan.kill) deps_.workers.send(node_id, kill);
  for (const auto& task : plan.adopt) task_started(task.task, task.pid);
  for (const auto& ref : plan.relaunch) {
    dispatcher_.relaunch(jobs_.at(ref.task.job_id), ref);
  }
  const Node* node = deps_.nodes.find(node_id);
  const std::string label = node ? node->label() : node_id;
  for (const auto& ref : plan.lost) {
    api::TaskExit exit;
    exit.lost = "node " + label + " reconnected without it";
    task_exited(ref.task, exit);
  }
  loop_.cluster_changed();
  request_schedule();
}

Status JobManager::on_task_started(const std::string& node_id, const api::TaskKey& task, int64_t pid) {
  Status allowed = check_reporter(jobs_, node_id, task);
  if (allowed) task_started(task, pid);
  return allowed;
}

Status JobManager::on_task_exited(const std::string& node_id, const api::TaskKey& task, const api::TaskExit& exit) {
  Status allowed = check_reporter(jobs_, node_id, task);
  if (allowed) task_exited(task, exit);
  return allowed;
}

Status JobManager::may_report(const std::string& node_id, const api::TaskKey& task) const {
  return check_reporter(jobs_, node_id, task);
}

void JobManager::task_started(const api::TaskKey& task, int64_t pid) {
  auto it = jobs_.find(task.job_id);
  if (it == jobs_.end()) return;
  apply(it->second, head::on_task_started(it->second, task.attempt, task.task_index, pid, deps_.clock.now_ms()));
}

void JobManager::task_exited(const api::TaskKey& task, const api::TaskExit& exit) {
  deps_.logs.close(task);
  auto it = jobs_.find(task.job_id);
  if (it == jobs_.end()) return;
  apply(it->second, head::on_task_exited(it->second, task.attempt, task.task_index, exit, deps_.clock.now_ms()));
  // Any task that ended freed capacity: let queued jobs have it now. (A start, a
  // placement or a new pending reason frees nothing; a pass after them would only
  // look at the same queue again.)
  if (!pending_.empty()) request_schedule();
}

void JobManager::on_node_dead(const std::string& node_id) {
  loop_.cluster_changed();
  const Node* node = deps_.nodes.find(node_id);
  std::string label = node ? node->label() : node_id;
  std::vector<std::string> affected;
  for (const auto& [id, _] : active_) affected.push_back(id);
  for (const auto& id : affected) {
    Job& job = jobs_[id];
    Effects fx = on_node_lost(job, node_id, label, deps_.clock.now_ms());
    if (const AttemptRecord* attempt = job.current_attempt()) {
      for (const auto& task : attempt->tasks) {
        if (task.node_id == node_id) deps_.logs.close({id, attempt->number, task.index});
      }
    }
    apply(job, fx);
  }
  request_schedule();
}

void JobManager::add_event(Job& job, const std::string& message, std::vector<JobEvent>& out) {
  JobEvent event{deps_.clock.now_ms(), message};
  events_[job.id].push_back(event);
  out.push_back(event);
}

void JobManager::apply(Job& job, const Effects& fx) {
  // The task that failed an attempt: its last lines, while the head holds its log whole
  // (a task's exit follows its last byte), kept with the attempt.
  if (AttemptRecord* failed = job.current_attempt(); failed && failed->failed_task >= 0 && !failed->failure_tail) {
    failed->failure_tail =
        deps_.logs.tail({job.id, failed->number, failed->failed_task}, kFailureTailBytes, kFailureTailLines);
  }
  std::vector<JobEvent> added;
  for (const auto& e : fx.events) add_event(job, e, added);
  if (fx.changed || !added.empty()) persist(job, added);
  if (!fx.launch.empty()) dispatcher_.launch_when_stored(job, fx.launch);
  for (const auto& ref : fx.kill) dispatcher_.kill(ref, fx.kill_grace_ms > 0 ? fx.kill_grace_ms : config_.kill_grace_ms);
  const AttemptRecord* attempt = job.current_attempt();
  if (fx.requeue || fx.finished) {
    if (attempt && !attempt->tasks.empty()) dispatcher_.release_master_port(attempt->tasks.front().node_id, attempt->master_port);
    usage_.charge(job, true);
    active_.erase(job.id);
  }
  if (fx.requeue) pending_.add(queue_entry(job));
  if (fx.finished) {
    pending_.remove(queue_entry(job));
    ungate(job);
    leave_array_slot(job);
    deadlines_.disarm(job.id);
  }
  if (fx.changed || fx.finished) listeners_.changed(job);
  // A job that ended or went back to the queue: queued jobs may have what it held.
  if ((fx.finished || fx.requeue) && !pending_.empty()) request_schedule();
  if (fx.finished) release_dependents(job);
}

void JobManager::arm_timeout(const Job& job) { deadlines_.arm(job.id, timeout_deadline(job)); }

}  // namespace ag::head
