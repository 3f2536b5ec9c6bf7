// Task markers: every process of a task carries AG_TASK_MARKER=<marker> in its
// environment, so that a kill finds it even after it left its process group (and
// where the node has no control groups). Used by the runner and by the supervisor.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace ag::worker {

// Pids of every live process whose environment holds AG_TASK_MARKER=`marker`.
std::vector<int> find_marked_processes(const std::string& marker);

// Sends `sig` to a task's processes, each once: its process group (`pgid`; none when
// not positive), then those of `listed` outside that group (they left it), never the
// caller. `listed` (its control group's and marked processes) is read before the
// signal is sent: a process the signal makes (a container engine's helper that passes
// it on to the container) is not sent it too, or it could die before it did its work.
void signal_task_processes(pid_t pgid, const std::vector<int>& listed, int sig);

}  // namespace ag::worker
