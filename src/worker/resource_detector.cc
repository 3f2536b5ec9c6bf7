#include "worker/resource_detector.h"

#include "worker/nvml.h"

#include <sched.h>

#include <fstream>
#include <sstream>
#include <thread>

namespace ag::worker {

int detect_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

int64_t detect_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemTotal:") return kib * 1024;
  }
  return 0;
}

std::vector<GpuInfo> detect_gpus(std::string* why_none) {
  std::vector<GpuInfo> gpus;
  const Nvml* nvml = Nvml::get(why_none);
  unsigned int count = 0;
  if (!nvml) return gpus;
  if (nvml->device_count(&count) != nvml::kSuccess) {
    if (why_none) *why_none = "NVML could not count the GPUs";
    return gpus;
  }
  for (unsigned int i = 0; i < count; ++i) {
    GpuInfo gpu;
    gpu.index = static_cast<int>(i);
    nvml::Device device = nullptr;
    if (nvml->device_by_index(i, &device) == nvml::kSuccess) {
      char name[96] = {0};
      if (nvml->name && nvml->name(device, name, sizeof name) == nvml::kSuccess) gpu.name = name;
      nvml::Memory mem{};
      if (nvml->memory && nvml->memory(device, &mem) == nvml::kSuccess) gpu.memory_bytes = static_cast<int64_t>(mem.total);
    }
    gpus.push_back(gpu);
  }
  if (gpus.empty() && why_none) *why_none = "NVML reports no GPUs";
  return gpus;
}

}  // namespace ag::worker
