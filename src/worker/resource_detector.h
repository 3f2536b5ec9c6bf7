// Resource detection: what this machine offers to tasks. Small detectors, one per
// resource: CPUs (the affinity mask), memory (/proc/meminfo) and NVIDIA GPUs (NVML,
// loaded with dlopen so the binary runs where there is no driver).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ag::worker {

int detect_cpus();
int64_t detect_memory_bytes();

struct GpuInfo {
  int index = 0;
  std::string name;
  int64_t memory_bytes = 0;
};

// The GPUs NVML reports, or none when NVML or the driver is absent. `why_none` says
// why when the list is empty ("libnvidia-ml.so.1 not found").
std::vector<GpuInfo> detect_gpus(std::string* why_none);

}  // namespace ag::worker
