// What the job manager keeps for gates and job arrays (issue 14; quotas and queues are
// PolicyStore's, fair-share usage UsageLedger's). The decisions are the pure core's
// (head/scheduler/gates.h); this is the state they are made from, kept by job_gates.cc.
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

struct SharingState {
  // Pending jobs outside the queue until a gate opens, the gated jobs waiting on each
  // job, and begin times (time, job id) with one timer for the first.
  std::set<std::string> gated;
  std::map<std::string, std::set<std::string>> dependents;
  std::set<std::pair<int64_t, std::string>> begins;
  Timers::Id begin_timer = 0;
  int64_t begin_timer_at_ms = 0;
  std::map<std::string, JobArray> arrays;
};

}  // namespace ag::head
