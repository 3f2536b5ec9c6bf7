// What a node and its running tasks use, as each heartbeat reports it, and the key
// every message about a task carries (api/protocol.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ag::api {

// One task of one attempt of a job: the identity every message about a task carries.
struct TaskKey {
  std::string job_id;
  int attempt = 0;
  int task_index = 0;
  auto operator<=>(const TaskKey&) const = default;
  // "job_ab12/0/1"
  std::string to_string() const;
};

struct GpuUsage {
  int64_t index = 0;
  int64_t utilization_percent = 0;
  int64_t memory_used_bytes = 0;
  int64_t memory_total_bytes = 0;
  bool operator==(const GpuUsage&) const = default;
};

// What one running task's processes use: CPU in percent of one core (200 = two cores
// busy) and resident memory.
struct TaskUsage {
  TaskKey task;
  double cpu_percent = 0;
  int64_t memory_bytes = 0;
  bool operator==(const TaskUsage&) const = default;
};

struct NodeUsage {
  double cpu_percent = 0;
  int64_t memory_used_bytes = 0;
  std::vector<GpuUsage> gpus;
  std::vector<TaskUsage> tasks;  // per running task (absent from older workers)
  bool operator==(const NodeUsage&) const = default;
};

}  // namespace ag::api
