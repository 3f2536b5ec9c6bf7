// What the job manager keeps for the sharing policy (issue 14): gates, job arrays,
// quotas and fair-share usage. The decisions are the pure core's
// (head/scheduler/{gates,quotas,fair_share}.h); this is the state they are made from,
// kept by job_gates.cc, job_quotas.cc and job_fair_share.cc.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

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

struct SharingState {
  // Pending jobs outside the queue until a gate opens, the gated jobs waiting on each
  // job, and begin times (time, job id) with one timer for the first.
  std::set<std::string> gated;
  std::map<std::string, std::set<std::string>> dependents;
  std::set<std::pair<int64_t, std::string>> begins;
  Timers::Id begin_timer = 0;
  int64_t begin_timer_at_ms = 0;
  std::map<std::string, JobArray> arrays;
  // Fair share: usage by user, and each running job's charge so far (wall ms).
  std::map<std::string, sched::UsageRecord> usage;
  std::map<std::string, int64_t> charged_until;
  Timers::Id usage_timer = 0;
  sched::QuotaPolicy quotas;  // users' and groups' limits (groups_of left empty)
  std::function<std::vector<std::string>(const std::string&)> groups_of;
};

}  // namespace ag::head
