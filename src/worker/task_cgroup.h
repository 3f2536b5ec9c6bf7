// A control group per task, where the machine lets the worker make one (cgroup v2,
// or the v1 `pids` or `freezer` hierarchy). Every process a task starts stays in its
// group whatever it does (setsid, double fork, clearing its environment), so a stop
// can find them all. Where no group can be made, process groups and the task marker
// do the job alone.
//
//   <root>/<task>/cgroup.procs   the task's processes (root: e.g. /sys/fs/cgroup/pids/aethergrid/<node>)
#pragma once

#include <string>
#include <vector>

namespace ag::worker {

// The folder under which this node's task groups go, created if it can be; "" when
// cgroups are not usable here (not mounted, not writable), with why in `why_not`.
std::string prepare_cgroup_root(const std::string& node_id, std::string* why_not);

// Creates the group for one task under `root`; returns its path, or "" on failure.
std::string create_task_cgroup(const std::string& root, const std::string& name);

// Moves the calling process into `group`; false when it could not. Plain system calls
// only: it may run between fork and exec.
bool join_cgroup(const char* group);

// Pids in the group and the groups below it (a container's, made by its engine).
std::vector<int> cgroup_pids(const std::string& group);

// Removes the group and the (empty) groups below it; true when none is left, false
// while a process still holds one (harmless when it is gone already).
bool remove_cgroup(const std::string& group);

}  // namespace ag::worker
