// UsageSampler: what this node is using right now, sent with every heartbeat so that
// the head can chart the last minutes per node: CPU busy share (from /proc/stat
// deltas), memory in use (MemTotal - MemAvailable) and, where NVML is present, each
// GPU's utilisation and memory. Io thread only.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "api/protocol.h"
#include "worker/nvml.h"

namespace ag::worker {

class UsageSampler {
 public:
  UsageSampler();
  api::NodeUsage sample();

  // What each task uses, `pids` being the tasks' process-group leaders: the CPU time
  // (since the previous call) and resident memory of every process in the group, read
  // from /proc. A task seen for the first time reports 0% CPU. `cgroups` (leader ->
  // the task's control group) adds the processes of a task's group and the groups
  // below it, wherever their process group: a container's, for one.
  std::vector<api::TaskUsage> sample_tasks(const std::vector<std::pair<api::TaskKey, int64_t>>& pids,
                                           const std::map<int64_t, std::string>& cgroups = {});

 private:
  struct GroupTicks {
    uint64_t ticks = 0;
    int64_t at_ms = 0;
  };
  std::map<int64_t, GroupTicks> last_group_ticks_;  // process group -> CPU ticks then
  uint64_t last_busy_ = 0;
  uint64_t last_total_ = 0;
  const Nvml* nvml_ = nullptr;  // null without a driver
};

}  // namespace ag::worker
