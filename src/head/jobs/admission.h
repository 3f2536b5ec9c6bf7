// Admission: whether submitted specs may become jobs, and what a job waits on before
// the queue. Free functions over the head's state, read only; the job controller calls
// them before anything is reserved or written, so a refused submit changes nothing.
//
//   specs --resolve queue, no-preempt leave--> check_submit --> (refused: one error
//   naming the spec and what to do) | accepted: priorities settled, ready to store
//
// The checks, in order: the submit's size, a submission id reused with another spec
// (kConflict; the same spec again gets the earlier job), the user's priority cap, the
// dependencies (unknown, deleted, or ended the wrong way), and a request no node of the
// cluster could ever hold (unless allow_unschedulable). Io thread only.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/job_spec.h"
#include "common/result.h"
#include "head/jobs/array_throttle.h"
#include "head/jobs/job_table.h"
#include "head/nodes/node_registry.h"
#include "head/sharing/policy_store.h"
#include "head/scheduler/gates.h"

namespace ag::head {

struct AdmissionView {
  const JobTable& jobs;
  const ArrayThrottle& arrays;
  const PolicyStore& policy;
  const NodeRegistry& nodes;
  // Whether a job's deletion is under way (it no longer counts as a dependency).
  std::function<bool(const std::string& job_id)> removing;
};

// Resolves each spec's queue (its defaults apply) and checks the submit. On success
// every spec's priority is settled (`priority_set`). Errors: kInvalidArgument,
// kConflict, kPermissionDenied, each naming the spec (`jobs[i]: `) when several.
std::optional<Error> check_submit(std::vector<api::JobSpec>& specs, const std::string& owner, bool admin,
                                  const AdmissionView& view);

// The job's dependencies, an array's id standing for each of its elements.
std::vector<std::pair<std::string, sched::DependencyKind>> dependencies_of(const api::JobSpec& spec,
                                                                           const ArrayThrottle& arrays);
std::vector<std::string> dependency_ids(const api::JobSpec& spec, const ArrayThrottle& arrays);
// Everything that keeps `job` out of the queue: hold, begin time, dependencies with
// their outcomes so far, its array's limit.
sched::Gates gates_of(const Job& job, const JobTable& jobs, const ArrayThrottle& arrays);

}  // namespace ag::head
