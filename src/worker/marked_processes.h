// Task markers: every process of a task carries AG_TASK_MARKER=<marker> in its
// environment, so that a kill finds it even after it left its process group (and
// where the node has no control groups). Used by the runner and by the supervisor.
#pragma once

#include <string>
#include <vector>

namespace ag::worker {

// Pids of every live process whose environment holds AG_TASK_MARKER=`marker`.
std::vector<int> find_marked_processes(const std::string& marker);

}  // namespace ag::worker
