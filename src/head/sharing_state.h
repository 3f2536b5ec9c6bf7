// What the job manager keeps for the sharing policy (issue 14): gates, job arrays,
// quotas and queues (fair-share usage is UsageLedger's). The decisions are the pure
// core's (head/scheduler/{gates,quotas}.h); this is the state they are made from, kept
// by job_gates.cc, job_quotas.cc and job_queues.cc.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <nlohmann/json_fwd.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "api/job_spec.h"
#include "common/result.h"
#include "common/timers.h"
#include "head/scheduler/fair_share.h"
#include "head/scheduler/quotas.h"

namespace ag::head {

// A job array as the head keeps it: its elements (jobs "ARRAY_INDEX") and their limit.
struct JobArray {
  std::vector<std::string> elements;  // element job ids, by index
  int max_running = 0;                // queued or running at once; 0 for any number
  std::set<std::string> admitted;     // elements queued or running (they use the limit)
  std::set<std::pair<int, std::string>> throttled;  // (index, id): waiting for a place under it
};

// A quota's limits as the API shows them: {"max_gpus", "max_cpu_millis", "max_memory",
// "max_running_jobs", "max_priority"}, null for no limit (job_quotas.cc).
nlohmann::json quota_limits_json(const sched::Limits& limits);

// A queue (partition, `ag queue create`): the nodes its jobs run on (by label), their
// priority unless they choose one, what each user may hold in it, and whether its jobs
// may preempt lower-priority jobs (head/scheduler/preemption.h).
struct QueueDef {
  std::map<std::string, std::string> nodes_with;
  int default_priority = 0;
  sched::Limits per_user;  // max_priority unused
  bool preempt = false;
  bool operator==(const QueueDef&) const = default;
};

// A queue as the API shows it: {"nodes_with", "priority", "preempt", "max_gpus_per_user",
// "max_cpu_millis_per_user", "max_memory_per_user", "max_running_jobs_per_user"}
// (job_queues.cc), and back (errors name the field).
nlohmann::json queue_json(const QueueDef& queue);
Result<QueueDef> parse_queue(const nlohmann::json& body);

struct SharingState;

// Checks a spec's queue (unknown, or its nodes conflict with the spec's constraints:
// kInvalidArgument; `where` prefixes the message) and gives it the queue's priority
// unless it chose one (job_queues.cc).
std::optional<Error> resolve_queue(const SharingState& sharing, api::JobSpec& spec, const std::string& where);
// kPermissionDenied: --no-preempt by `owner`, who is no admin and whose quota (or a
// group's) does not allow it.
std::optional<Error> check_no_preempt(const SharingState& sharing, const api::JobSpec& spec, const std::string& owner,
                                      bool admin);

struct SharingState {
  // Pending jobs outside the queue until a gate opens, the gated jobs waiting on each
  // job, and begin times (time, job id) with one timer for the first.
  std::set<std::string> gated;
  std::map<std::string, std::set<std::string>> dependents;
  std::set<std::pair<int64_t, std::string>> begins;
  Timers::Id begin_timer = 0;
  int64_t begin_timer_at_ms = 0;
  std::map<std::string, JobArray> arrays;
  sched::QuotaPolicy quotas;  // users' and groups' limits (groups_of left empty)
  std::map<std::string, QueueDef> queues;
  std::function<std::vector<std::string>(const std::string&)> groups_of;
};

}  // namespace ag::head
