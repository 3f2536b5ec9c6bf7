// The job layer's settings, from `ag start-head`'s flags (head_daemon.cc).
#pragma once

#include <cstdint>

#include "api/protocol.h"
#include "head/scheduler/fair_share.h"

namespace ag::head {

struct JobConfig {
  int master_port_first = api::kMasterPortFirst;  // master ports are handed out from this range
  int master_port_last = api::kMasterPortLast;    // (see master_ports.h)
  int64_t kill_grace_ms = 10000;  // SIGTERM -> SIGKILL grace for stopped tasks
  int64_t preempt_grace_ms = 30000;  // the same for preempted ones (AG_PREEMPT_GRACE_S)
  int64_t usage_half_life_ms = sched::kDefaultUsageHalfLifeMs;  // fair share's decay
};

}  // namespace ag::head
