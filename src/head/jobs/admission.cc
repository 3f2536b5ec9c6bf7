#include "head/jobs/admission.h"

#include <nlohmann/json.hpp>

#include "api/protocol.h"
#include "head/jobs/scheduling_view.h"

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

// Why a spec's dependencies can never be met (unknown, or ended the wrong way).
std::optional<Error> check_dependencies(const api::JobSpec& spec, const std::string& where, const AdmissionView& view) {
  for (const auto& [id, kind] : dependencies_of(spec, view.arrays)) {
    const std::string flag = std::string("--") + sched::flag_name(kind);
    const Job* dep = view.jobs.find(id);
    if (!dep || view.removing(id)) {
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

// Whether live nodes (draining ones too) could hold `job` one task each, by what they
// have in all: then it can run some day, and the cluster need not be weighed whole. The
// walk ends at the first nodes that can, on most clusters the first.
bool one_task_per_node_fits(const NodeRegistry& nodes, const sched::PendingJob& job) {
  int found = 0;
  for (const auto& [_, node] : nodes.nodes()) {
    if (node.state != NodeState::kAlive) continue;
    const Resources& total = node.total;
    const Resources& need = job.per_task;
    if (total.cpu_millis < need.cpu_millis || total.memory_bytes < need.memory_bytes || total.gpus < need.gpus ||
        static_cast<int64_t>(node.gpu_ids.size()) < need.gpus) {
      continue;
    }
    if (!sched::can_run_on(node_view(node, true), job)) continue;
    if (++found >= job.num_tasks) return true;
  }
  return false;
}

// Why one spec of the submit must be refused, or nullopt. `nodes`: every node, whole
// (made when first asked for).
std::optional<Error> check_spec(const api::JobSpec& spec, const std::string& owner, const std::string& where,
                                const std::function<const std::vector<sched::NodeView>&()>& nodes,
                                const AdmissionView& view) {
  // A submit retried with the same id gets the job it made; the same id with another
  // spec is a mistake that must not quietly return that job.
  if (const Job* existing = view.jobs.find_submission(owner, spec.submission_id)) {
    api::JobSpec as_kept = spec;  // as the job keeps it
    as_kept.priority_set = true;
    if (api::to_json(existing->spec) == api::to_json(as_kept)) return std::nullopt;
    return Error{ErrorCode::kConflict,
                 where + "submission_id \"" + spec.submission_id + "\" was already used for job " + existing->id +
                     " with a different spec; choose a new submission_id for a new job, or see that one with "
                     "`ag status " + existing->id + "`"};
  }
  if (auto refused = spec.priority_set ? view.policy.check_priority_cap(spec, owner) : std::nullopt) {
    refused->message = where + refused->message;
    return refused;
  }
  if (auto refused = check_dependencies(spec, where, view)) return refused;
  if (spec.allow_unschedulable) return std::nullopt;
  // A job for an image waits (pending, with the reason) for nodes that can run
  // containers: engines get installed on running clusters. Everything else no node
  // could ever give it is refused now.
  sched::PendingJob job = pending_job("", spec, view.policy);
  job.needs_containers = false;
  if (one_task_per_node_fits(view.nodes, job)) return std::nullopt;
  if (auto why = sched::never_fits(nodes(), job)) {
    return Error{ErrorCode::kInvalidArgument,
                 where + "no node of this cluster could ever run this job: " + *why +
                     ". Ask for less, add nodes that have it, or queue it for nodes still to join with "
                     "`ag submit --allow-unschedulable` (REST: \"allow_unschedulable\": true)"};
  }
  return std::nullopt;
}

}  // namespace

std::optional<Error> check_submit(std::vector<api::JobSpec>& specs, const std::string& owner, bool admin,
                                  const AdmissionView& view) {
  // Of several specs, none is submitted when one is refused: the error says so.
  const auto refuse = [&specs](Error e) {
    if (specs.size() > 1) e.message += " (no job was submitted)";
    return std::optional<Error>(std::move(e));
  };
  const auto where = [&specs](size_t i) { return specs.size() > 1 ? "jobs[" + std::to_string(i) + "]: " : ""; };
  for (size_t i = 0; i < specs.size(); ++i) {
    auto refused = view.policy.resolve_queue(specs[i], where(i));
    if (!refused) refused = view.policy.check_no_preempt(specs[i], owner, admin);
    if (refused) return refuse(std::move(*refused));
  }
  size_t made = 0;
  for (const auto& spec : specs) made += spec.array ? spec.array->indices.size() : 1;
  if (made > api::kMaxArraySize) {
    return Error{ErrorCode::kInvalidArgument, "this submit would make " + std::to_string(made) +
                                                  " jobs; one submit makes at most " +
                                                  std::to_string(api::kMaxArraySize) + " (no job was submitted)"};
  }
  // A draining node counts: it takes tasks again once resumed.
  std::optional<std::vector<sched::NodeView>> nodes;
  const auto all_nodes = [&]() -> const std::vector<sched::NodeView>& {
    if (!nodes) {
      nodes.emplace();
      for (auto& [_, node] : node_capacity(view.nodes, true)) nodes->push_back(std::move(node));
    }
    return *nodes;
  };
  for (size_t i = 0; i < specs.size(); ++i) {
    if (auto refused = check_spec(specs[i], owner, where(i), all_nodes, view)) return refuse(std::move(*refused));
  }
  // Its priority is settled now (chosen, or its queue's): kept and shown as such.
  for (auto& spec : specs) spec.priority_set = true;
  return std::nullopt;
}

std::vector<std::pair<std::string, sched::DependencyKind>> dependencies_of(const api::JobSpec& spec,
                                                                           const ArrayThrottle& arrays) {
  std::vector<std::pair<std::string, sched::DependencyKind>> out;
  const auto add = [&](const std::vector<std::string>& ids, sched::DependencyKind kind) {
    for (const auto& id : ids) {
      if (const JobArray* array = arrays.find(id)) {
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

std::vector<std::string> dependency_ids(const api::JobSpec& spec, const ArrayThrottle& arrays) {
  std::vector<std::string> ids;
  for (const auto& [id, _] : dependencies_of(spec, arrays)) ids.push_back(id);
  return ids;
}

sched::Gates gates_of(const Job& job, const JobTable& jobs, const ArrayThrottle& arrays) {
  sched::Gates gates{job.id, job.held_by, job.spec.begin_ms, {}};
  for (const auto& [id, kind] : dependencies_of(job.spec, arrays)) {
    gates.dependencies.push_back({id, kind, outcome_of(jobs.find(id))});
  }
  arrays.fill_gates(job, gates);
  return gates;
}

}  // namespace ag::head
