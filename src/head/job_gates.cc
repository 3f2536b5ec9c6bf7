// Gates before the queue: holds, begin times and dependencies (head/scheduler/gates.h
// decides; this file keeps the head's indexes and carries the decisions out).
//
// A pending job is in exactly one of pending_ (the queue the scheduler weighs) or
// gates_ (GateIndex: waiting for a gate). Gated jobs are looked at again only when
// something that could open a gate happens: a job they depend on ends, their begin
// time comes, a place under their array's limit comes free (ArrayThrottle), or a user
// releases them. So a thousand held jobs cost a pass nothing.
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
  arrays_.fill_gates(job, gates);
  return gates;
}

std::vector<std::string> JobManager::dependency_ids(const api::JobSpec& spec) const {
  std::vector<std::string> ids;
  for (const auto& [id, _] : dependencies_of(spec)) ids.push_back(id);
  return ids;
}

void JobManager::leave_array_slot(const Job& job) {
  arrays_.leave(job, [this](const std::string& next) {
    if (auto element = jobs_.find(next); element != jobs_.end()) {
      admit(element->second, "a place under the array's limit came free; queued");
    }
  });
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
  if (decision.verdict == Verdict::kOpen) {
    const bool was_gated = gates_.gated(job.id);
    ungate(job);
    arrays_.queued(job);
    pending_.add(queue_entry(job));
    apply(job, on_queued(job, was_gated ? opened_by : ""));
    request_schedule();
    return;
  }
  pending_.remove(queue_entry(job));
  loop_.take_back(job.id);
  // Every dependency, ended or not: one that ended is kept (not deleted) while the job
  // waits, since its outcome is what lets the job start once released.
  gates_.gate(job.id, dependency_ids(job.spec), decision.wake_at_ms);
  arrays_.waits(job, decision.kind == sched::PendingKind::kArrayLimit, [this](const std::string& next) {
    if (auto element = jobs_.find(next); element != jobs_.end()) {
      admit(element->second, "a place under the array's limit came free; queued");
    }
  });
  apply(job, on_pending(job, decision.kind, decision.reason, now));
}

void JobManager::ungate(const Job& job) { gates_.ungate(job.id, dependency_ids(job.spec), job.spec.begin_ms); }

void JobManager::release_dependents(const Job& ended) {
  const std::set<std::string> waiting = gates_.dependents(ended.id);
  const std::string why = "dependency " + ended.id + " ended " + to_string(ended.state);
  for (const auto& id : waiting) {
    auto job = jobs_.find(id);
    if (job != jobs_.end() && gates_.gated(id)) admit(job->second, why + "; queued");
  }
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
