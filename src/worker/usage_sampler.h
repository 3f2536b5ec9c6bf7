// UsageSampler: what this node is using right now, sent with every heartbeat so that
// the head can chart the last minutes per node: CPU busy share (from /proc/stat
// deltas), memory in use (MemTotal - MemAvailable) and, where NVML is present, each
// GPU's utilisation and memory. Io thread only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ag::worker {

struct GpuUsage {
  int index = 0;
  int utilization_percent = 0;
  int64_t memory_used_bytes = 0;
  int64_t memory_total_bytes = 0;
};

struct UsageSample {
  double cpu_percent = 0;  // of the whole machine, 0-100
  int64_t memory_used_bytes = 0;
  std::vector<GpuUsage> gpus;
};

class UsageSampler {
 public:
  UsageSampler();
  ~UsageSampler();
  UsageSample sample();

 private:
  struct Nvml;
  uint64_t last_busy_ = 0;
  uint64_t last_total_ = 0;
  Nvml* nvml_ = nullptr;
};

}  // namespace ag::worker
