// Enforced task limits: `task_options.memory` and `num_cpus` as caps, through control
// groups. cgroup v2: the task's own group (task_cgroup.h) carries memory.max and
// cpu.max. cgroup v1: a group per task in the memory and cpu hierarchies, made under
// the worker's own group there (so a worker that is itself capped caps its tasks too).
//
//   v1  <memory mount><worker's group>/aethergrid/<node>/<task>/memory.limit_in_bytes
//       <cpu mount><worker's group>/aethergrid/<node>/<task>/cpu.cfs_quota_us
//   v2  <tracking root>/<task>/{memory.max,cpu.max}; the supervisor waits in
//       <tracking root>/supervisor (v2 lets no process sit in a group with children
//       that have controllers)
//
// A task the kernel's OOM killer hit is known by its memory group's oom_kill count.
// Where neither controller can be used, tasks run uncapped and the node says so.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace ag::worker {

struct TaskLimits {
  int64_t memory_bytes = 0;  // 0: no memory cap
  int64_t cpu_millis = 0;    // 0: no CPU cap; 1500 = one and a half CPUs
};

// Where this node puts its limit groups.
struct LimitRoots {
  std::string memory;     // folder for memory-capped groups; "" when memory caps can't be enforced
  std::string cpu;        // folder for CPU-capped groups; "" when CPU caps can't be enforced
  bool unified = false;   // cgroup v2: the limits go on the task's tracking group itself
  std::string home;       // v2: where the supervisor returns after a spawn ("" = the parent)
  std::string summary;    // for people: "memory, cpu (cgroup v1)", "not enforced: ..."
  // Containers: the engine makes a container's groups under --cgroup-parent, the same
  // path in every hierarchy. That path is the task's tracking group relative to its
  // mount (`tracking_base` + "/" + task); a container task's caps go on that path in
  // the memory and cpu hierarchies, so they hold the container too.
  std::string tracking_base;     // e.g. "/aethergrid/<node>"; "" when there is no tracking root
  std::string container_memory;  // "" when container memory caps fall back to the engine's
  std::string container_cpu;
  std::vector<std::string> mounts;  // every cgroup hierarchy (the engine's groups are removed from each)
};

// One mounted cgroup hierarchy, from /proc/self/mountinfo.
struct CgroupMount {
  std::string path;                   // mount point
  int version = 1;                    // 1 or 2
  std::set<std::string> controllers;  // v1: from the mount options; v2: empty
};
std::vector<CgroupMount> parse_cgroup_mounts(std::string_view mountinfo);
// The calling process's group in the v1 hierarchy with `controller` ("" for v2),
// from /proc/self/cgroup's text; "" when it has no such line.
std::string own_cgroup_path(std::string_view proc_cgroup, const std::string& controller);

// What the limit files get (pure, for tests).
std::string cfs_quota_text(int64_t cpu_millis);  // v1 cpu.cfs_quota_us for a 100 ms period
std::string cpu_max_text(int64_t cpu_millis);    // v2 cpu.max: "<quota> <period>"
// Reads "oom_kill N" from a v1 memory.oom_control or v2 memory.events text.
int64_t parse_oom_kills(std::string_view text);

// Finds (and creates) where limit groups go on this node. `tracking_root` is the
// result of prepare_cgroup_root.
LimitRoots prepare_limit_roots(const std::string& node_id, const std::string& tracking_root);

// The groups a task joins for its limits.
struct TaskLimitGroups {
  std::vector<std::string> extra;  // v1 groups to join besides the tracking group
  std::string memory;              // where out-of-memory kills are counted; "" when uncapped
};
// Creates the task's limit groups named `name` and writes its caps. On v2 the caps go on
// `tracking_group`. Errors: kInternal naming the file that could not be written (the
// task must not run uncapped on a node that says it caps).
Result<TaskLimitGroups> create_limit_groups(const LimitRoots& roots, const std::string& tracking_group,
                                            const std::string& name, const TaskLimits& limits);

// The v1 limit groups a task named `name` gets under `roots` (v1 only), without making
// them: the task supervisor makes them with the task (worker/warm_task.h).
TaskLimitGroups plan_v1_limit_groups(const LimitRoots& roots, const std::string& name, const TaskLimits& limits);

// What write_v1_caps writes for `limits`, as one text: two groups that got the same
// one have the same caps.
std::string v1_caps_key(const TaskLimits& limits);

// Writes `limits`' caps on a v1 group of the memory or the cpu hierarchy (whichever
// its control files show). Returns "" or what could not be written.
std::string write_v1_caps(const std::string& group, const TaskLimits& limits);

// How many of the group's processes the OOM killer ended (0 when unknown), the groups
// below it included.
int64_t oom_kills(const std::string& memory_group);

// Whether the task whose memory group this is ran out of memory: the OOM killer ended
// one of its processes, or (cgroup v1 counts kills only in the victim's own group,
// which a container engine removes with its container) the task was SIGKILLed
// (`killed`) after its usage peaked at the cap.
bool ran_out_of_memory(const std::string& memory_group, bool killed);

}  // namespace ag::worker
