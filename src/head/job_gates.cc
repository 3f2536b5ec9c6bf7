// Gates before the queue: holds, begin times and dependencies (head/scheduler/gates.h
// decides; this file keeps the head's indexes and carries the decisions out).
//
// A pending job is in exactly one of pending_ (the queue the scheduler weighs) or
// sharing_.gated (waiting for a gate). Gated jobs are looked at again only when
// something that could open a gate happens: a job they depend on ends (dependents),
// their begin time comes (begins), or a user releases them. So a thousand held jobs
// cost a pass
// nothing.
#include <spdlog/spdlog.h>

#include "head/job_manager.h"
#include "head/scheduler/gates.h"

namespace ag::head {
namespace {

sched::Outcome outcome_of(const Job* dep) {
  if (!dep) return sched::Outcome::kGone;
  switch (dep->state) {
    case JobState::kSucceeded: return sched::Outcome::kSucceeded;
    case JobState::kFailed: return sched::Outcome::kFailed;
    case JobState::kStopped: return sched::Outcome::kStopped;
    default: return sched::Outcome::kUnfinished;
  }
}

}  // namespace

std::vector<std::pair<std::string, sched::DependencyKind>> JobManager::dependencies_of(const api::JobSpec& spec) const {
  std::vector<std::pair<std::string, sched::DependencyKind>> out;
  const auto add = [&](const std::vector<std::string>& ids, sched::DependencyKind kind) {
    for (const auto& id : ids) {
      if (const JobArray* array = find_array(id)) {
        for (const auto& element : array->elements) out.emplace_back(element, kind);
      } else {
        out.emplace_back(id, kind);
      }
    }
  };
  add(spec.after, sched::DependencyKind::kAfterOk);
  add(spec.after_any, sched::DependencyKind::kAfterAny);
  add(spec.after_failed, sched::DependencyKind::kAfterFailed);
  return out;
}

sched::Gates JobManager::gates_of(const Job& job) const {
  sched::Gates gates{job.id, job.held_by, job.spec.begin_ms, {}};
  for (const auto& [id, kind] : dependencies_of(job.spec)) gates.dependencies.push_back({id, kind, outcome_of(find(id))});
  if (const JobArray* array = find_array(job.array_id); array && array->max_running > 0) {
    gates.array_id = job.array_id;
    gates.array_limit = array->max_running;
    gates.array_admitted = static_cast<int>(array->admitted.size());
    gates.holds_array_slot = array->admitted.count(job.id) > 0;
  }
  return gates;
}

const JobArray* JobManager::find_array(const std::string& array_id) const {
  auto it = sharing_.arrays.find(array_id);
  return it == sharing_.arrays.end() ? nullptr : &it->second;
}

void JobManager::add_to_array(const Job& job) {
  if (job.array_id.empty()) return;
  JobArray& array = sharing_.arrays[job.array_id];
  array.elements.push_back(job.id);
  if (job.spec.array) array.max_running = job.spec.array->max_running;
}

void JobManager::leave_array_slot(const Job& job) {
  auto it = sharing_.arrays.find(job.array_id);
  if (it == sharing_.arrays.end()) return;
  JobArray& array = it->second;
  array.throttled.erase({job.array_index, job.id});
  if (array.admitted.erase(job.id) == 0) return;
  while (array.max_running > 0 && static_cast<int>(array.admitted.size()) < array.max_running &&
         !array.throttled.empty()) {
    const std::string next = array.throttled.begin()->second;
    array.throttled.erase(array.throttled.begin());
    if (auto element = jobs_.find(next); element != jobs_.end()) admit(element->second, "a place under the array's limit came free; queued");
  }
}

std::optional<Error> JobManager::check_dependencies(const api::JobSpec& spec, const std::string& where) const {
  for (const auto& [id, kind] : dependencies_of(spec)) {
    const std::string flag = std::string("--") + sched::flag_name(kind);
    const Job* dep = find(id);
    if (!dep || writer_.removing(id)) {
      return Error{ErrorCode::kInvalidArgument,
                   where + flag + " names job " + id + ", which does not exist (or was deleted); `ag list-jobs` shows the jobs"};
    }
    sched::Gates one{"", "", 0, {{id, kind, outcome_of(dep)}}};
    const sched::GateDecision decision = sched::check_gates(one, 0);
    if (decision.verdict == sched::GateDecision::Verdict::kNever) {
      return Error{ErrorCode::kInvalidArgument, where + decision.reason};
    }
  }
  return std::nullopt;
}

void JobManager::admit(Job& job, const std::string& opened_by) {
  if (job.state != JobState::kPending || active_.count(job.id)) return;
  const int64_t now = deps_.clock.now_ms();
  const sched::GateDecision decision = sched::check_gates(gates_of(job), now);
  using Verdict = sched::GateDecision::Verdict;
  if (decision.verdict == Verdict::kNever) {
    apply(job, on_dependency_never_met(job, decision.reason, now));
    return;
  }
  JobArray* array = job.array_id.empty() ? nullptr : &sharing_.arrays[job.array_id];
  if (decision.verdict == Verdict::kOpen) {
    const bool was_gated = sharing_.gated.count(job.id) > 0;
    ungate(job);
    if (array && array->max_running > 0) {
      array->throttled.erase({job.array_index, job.id});
      array->admitted.insert(job.id);
    }
    pending_.add(queue_entry(job));
    apply(job, on_queued(job, was_gated ? opened_by : ""));
    request_schedule();
    return;
  }
  pending_.remove(queue_entry(job));
  set_aside_.erase(job.id);
  sharing_.gated.insert(job.id);
  if (array) {
    leave_array_slot(job);
    if (decision.kind == sched::PendingKind::kArrayLimit) array->throttled.insert({job.array_index, job.id});
  }
  // Every dependency, ended or not: one that ended is kept (not deleted) while the job
  // waits, since its outcome is what lets the job start once released.
  for (const auto& [id, kind] : dependencies_of(job.spec)) sharing_.dependents[id].insert(job.id);
  if (decision.wake_at_ms != 0) {
    sharing_.begins.insert({decision.wake_at_ms, job.id});
    arm_begin_timer();
  }
  apply(job, on_pending(job, decision.kind, decision.reason, now));
}

void JobManager::ungate(const Job& job) {
  if (sharing_.gated.erase(job.id) == 0) return;
  for (const auto& [id, _] : dependencies_of(job.spec)) {
    auto it = sharing_.dependents.find(id);
    if (it == sharing_.dependents.end()) continue;
    it->second.erase(job.id);
    if (it->second.empty()) sharing_.dependents.erase(it);
  }
  sharing_.begins.erase({job.spec.begin_ms, job.id});
}

void JobManager::release_dependents(const Job& ended) {
  auto it = sharing_.dependents.find(ended.id);
  if (it == sharing_.dependents.end()) return;
  const std::set<std::string> waiting = it->second;
  const std::string why = "dependency " + ended.id + " ended " + to_string(ended.state);
  for (const auto& id : waiting) {
    auto job = jobs_.find(id);
    if (job != jobs_.end() && sharing_.gated.count(id)) admit(job->second, why + "; queued");
  }
}

void JobManager::arm_begin_timer() {
  if (sharing_.begins.empty()) return;
  const int64_t at = sharing_.begins.begin()->first;
  if (sharing_.begin_timer != 0 && sharing_.begin_timer_at_ms <= at) return;
  if (sharing_.begin_timer != 0) deps_.timers.cancel(sharing_.begin_timer);
  sharing_.begin_timer_at_ms = at;
  sharing_.begin_timer = deps_.timers.start(std::max<int64_t>(0, at - deps_.clock.now_ms()), [this] {
    sharing_.begin_timer = 0;
    const int64_t now = deps_.clock.now_ms();
    std::vector<std::string> due;
    while (!sharing_.begins.empty() && sharing_.begins.begin()->first <= now) {
      due.push_back(sharing_.begins.begin()->second);
      sharing_.begins.erase(sharing_.begins.begin());
    }
    for (const auto& id : due) {
      auto job = jobs_.find(id);
      if (job != jobs_.end() && sharing_.gated.count(id)) admit(job->second, "its begin time came; queued");
    }
    arm_begin_timer();
  });
}

void JobManager::set_hold(const std::string& job_id, bool hold, const std::string& by, std::function<void(Status)> done) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return done(not_found("no job with id '" + job_id + "'; list jobs with `ag list-jobs`"));
  Job& job = it->second;
  if (job.state != JobState::kPending) {
    return done(Error{ErrorCode::kConflict,
                      "job " + job_id + " is " + to_string(job.state) + "; only a pending job can be " +
                          (hold ? "held" : "released") +
                          (job.terminal() ? "" : " (stop it with `ag stop-job " + job_id + "`)")});
  }
  if (!hold && job.held_by.empty()) {
    return done(Error{ErrorCode::kConflict, "job " + job_id + " is not held; it is pending: " + job.message});
  }
  if (hold && !job.held_by.empty()) return after_durable([done = std::move(done)] { done({}); });  // held already
  const std::string who = by.empty() ? "user" : by;
  job.held_by = hold ? who : "";
  Effects fx;
  fx.changed = true;
  if (hold) fx.events.push_back("held by " + who);
  apply(job, fx);
  admit(job, "released by " + who);
  after_durable([done = std::move(done)] { done({}); });
}

}  // namespace ag::head
