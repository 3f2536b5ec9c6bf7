#include "worker/usage_sampler.h"

#include <dlfcn.h>

#include <fstream>
#include <sstream>

namespace ag::worker {

// The NVML entry points used for usage, resolved once; absent without a driver.
struct UsageSampler::Nvml {
  struct Utilization {
    unsigned int gpu, memory;
  };
  struct Memory {
    unsigned long long total, free, used;
  };
  int (*count)(unsigned int*) = nullptr;
  int (*handle)(unsigned int, void**) = nullptr;
  int (*utilization)(void*, Utilization*) = nullptr;
  int (*memory)(void*, Memory*) = nullptr;
};

UsageSampler::UsageSampler() {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return;
  auto init = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlInit_v2"));
  auto nvml = new Nvml;
  nvml->count = reinterpret_cast<int (*)(unsigned int*)>(dlsym(lib, "nvmlDeviceGetCount_v2"));
  nvml->handle = reinterpret_cast<int (*)(unsigned int, void**)>(dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
  nvml->utilization = reinterpret_cast<int (*)(void*, Nvml::Utilization*)>(dlsym(lib, "nvmlDeviceGetUtilizationRates"));
  nvml->memory = reinterpret_cast<int (*)(void*, Nvml::Memory*)>(dlsym(lib, "nvmlDeviceGetMemoryInfo"));
  if (!init || init() != 0 || !nvml->count || !nvml->handle) {
    delete nvml;
    return;
  }
  nvml_ = nvml;
}

UsageSampler::~UsageSampler() { delete nvml_; }

api::NodeUsage UsageSampler::sample() {
  api::NodeUsage s;
  std::ifstream stat("/proc/stat");
  std::string cpu;
  uint64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  if (stat >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal) {
    uint64_t busy = user + nice + system + irq + softirq + steal;
    uint64_t total = busy + idle + iowait;
    if (last_total_ && total > last_total_) {
      s.cpu_percent = 100.0 * static_cast<double>(busy - last_busy_) / static_cast<double>(total - last_total_);
    }
    last_busy_ = busy;
    last_total_ = total;
  }
  std::ifstream meminfo("/proc/meminfo");
  std::string key, unit;
  int64_t kib = 0, total_kib = 0, available_kib = 0;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemTotal:") total_kib = kib;
    if (key == "MemAvailable:") available_kib = kib;
  }
  s.memory_used_bytes = (total_kib - available_kib) * 1024;
  if (nvml_) {
    unsigned int count = 0;
    if (nvml_->count(&count) == 0) {
      for (unsigned int i = 0; i < count; ++i) {
        void* h = nullptr;
        if (nvml_->handle(i, &h) != 0) continue;
        api::GpuUsage g;
        g.index = static_cast<int>(i);
        Nvml::Utilization u{};
        if (nvml_->utilization && nvml_->utilization(h, &u) == 0) g.utilization_percent = static_cast<int64_t>(u.gpu);
        Nvml::Memory m{};
        if (nvml_->memory && nvml_->memory(h, &m) == 0) {
          g.memory_used_bytes = static_cast<int64_t>(m.used);
          g.memory_total_bytes = static_cast<int64_t>(m.total);
        }
        s.gpus.push_back(g);
      }
    }
  }
  return s;
}

}  // namespace ag::worker
