#include "worker/resource_detector.h"

#include <dlfcn.h>
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

namespace {
// The few NVML entry points used, with the C ABI NVML documents.
using nvmlReturn_t = int;
struct nvmlMemory_t {
  unsigned long long total, free, used;
};
using InitFn = nvmlReturn_t (*)();
using CountFn = nvmlReturn_t (*)(unsigned int*);
using HandleFn = nvmlReturn_t (*)(unsigned int, void**);
using NameFn = nvmlReturn_t (*)(void*, char*, unsigned int);
using MemFn = nvmlReturn_t (*)(void*, nvmlMemory_t*);
}  // namespace

std::vector<GpuInfo> detect_gpus(std::string* why_none) {
  std::vector<GpuInfo> gpus;
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    if (why_none) *why_none = "libnvidia-ml.so.1 not found (no NVIDIA driver)";
    return gpus;
  }
  auto init = reinterpret_cast<InitFn>(dlsym(lib, "nvmlInit_v2"));
  auto count_fn = reinterpret_cast<CountFn>(dlsym(lib, "nvmlDeviceGetCount_v2"));
  auto handle_fn = reinterpret_cast<HandleFn>(dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
  auto name_fn = reinterpret_cast<NameFn>(dlsym(lib, "nvmlDeviceGetName"));
  auto mem_fn = reinterpret_cast<MemFn>(dlsym(lib, "nvmlDeviceGetMemoryInfo"));
  unsigned int count = 0;
  if (!init || !count_fn || !handle_fn || init() != 0 || count_fn(&count) != 0) {
    if (why_none) *why_none = "NVML did not initialise (driver not loaded?)";
    return gpus;  // the library stays loaded; unloading NVML mid-process is unsafe
  }
  for (unsigned int i = 0; i < count; ++i) {
    GpuInfo gpu;
    gpu.index = static_cast<int>(i);
    void* handle = nullptr;
    if (handle_fn(i, &handle) == 0) {
      char name[96] = {0};
      if (name_fn && name_fn(handle, name, sizeof name) == 0) gpu.name = name;
      nvmlMemory_t mem{};
      if (mem_fn && mem_fn(handle, &mem) == 0) gpu.memory_bytes = static_cast<int64_t>(mem.total);
    }
    gpus.push_back(gpu);
  }
  if (gpus.empty() && why_none) *why_none = "NVML reports no GPUs";
  return gpus;
}

}  // namespace ag::worker
