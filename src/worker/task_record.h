// TaskRecord: what a task's folder keeps (<data_dir>/tasks/<task>/task.json) so that a
// restarted agent finds the task again: its key, the marker its processes carry, its
// control groups and container, and the pids of its supervisor and of the task. One
// type, written at launch and read at recovery (TaskRunner), so the two cannot drift.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/protocol.h"

namespace ag::worker {

struct TaskRecord {
  api::TaskKey id;
  std::string marker;
  std::string cgroup;  // "" where the node has none
  std::vector<std::string> limit_cgroups;
  int64_t memory_limit_bytes = 0;
  std::string container;    // "" for a host task
  std::string engine_path;  // the engine that runs its container
  std::string cgroup_parent;
  int64_t supervisor_pid = 0;
  int64_t pid = 0;
  bool operator==(const TaskRecord&) const = default;
};

// One JSON line.
std::string encode_task_record(const TaskRecord& record);
// nullopt when `text` is not a record this worker writes (a folder cut short: the
// caller removes it); fields a record lacks keep their defaults.
std::optional<TaskRecord> decode_task_record(std::string_view text);

}  // namespace ag::worker
