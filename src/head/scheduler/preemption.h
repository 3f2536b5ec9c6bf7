// Preemption: which running jobs to stop so that a higher-priority gang that cannot fit
// can start. Queues opt in (queues: `ag queue create ... --preempt`); the victims are
// requeued, not failed, and their retry budget is not spent (the job state machine's
// on_preempted).
//
// Candidates are running jobs of strictly lower priority that allow it (not
// `--no-preempt`), are not stopping already, and hold something on a node the gang
// could use. Among the sets of candidates that make room, the cheapest wins, compared
// by (GPUs preempted, CPUs preempted, work lost, number of jobs): fewest GPUs first,
// then the youngest jobs. Up to kExactCandidates candidates every set is weighed; beyond,
// node by node: each step takes the cheapest victims on the node where one more task
// fits most cheaply, until the gang fits; then each victim is dropped again, most
// expensive first, while it still fits, so that no victim is needless.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "head/scheduler/scheduler.h"

namespace ag::sched {

inline constexpr size_t kExactCandidates = 10;

// `nodes`: what is free now. Returns nullopt when no set of candidates makes room; an
// empty list when the gang fits once the jobs stopping already have stopped; else the
// victims' ids, cheapest first.
std::optional<std::vector<std::string>> choose_victims(const std::vector<NodeView>& nodes, const PendingJob& job,
                                                       const std::vector<RunningJob>& running, int64_t now_ms);

}  // namespace ag::sched
