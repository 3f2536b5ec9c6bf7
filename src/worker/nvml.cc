#include "worker/nvml.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

namespace ag::worker {
namespace {

template <typename Fn>
void resolve(void* lib, const char* symbol, Fn* out) {
  *out = reinterpret_cast<Fn>(dlsym(lib, symbol));
}

}  // namespace

const Nvml* Nvml::get(std::string* why) {
  static std::once_flag once;
  static Nvml* loaded = nullptr;
  static std::string why_not;
  std::call_once(once, [] {
    const char* custom = std::getenv("AG_NVML_LIBRARY");
    const std::string path = custom && *custom ? custom : "libnvidia-ml.so.1";
    void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      why_not = custom && *custom ? "AG_NVML_LIBRARY " + path + " could not be loaded: " + dlerror()
                                  : "libnvidia-ml.so.1 not found (no NVIDIA driver)";
      return;
    }
    nvml::Return (*init)() = nullptr;
    resolve(lib, "nvmlInit_v2", &init);
    auto nvml = new Nvml;
    resolve(lib, "nvmlDeviceGetCount_v2", &nvml->device_count);
    resolve(lib, "nvmlDeviceGetHandleByIndex_v2", &nvml->device_by_index);
    resolve(lib, "nvmlDeviceGetName", &nvml->name);
    resolve(lib, "nvmlDeviceGetUUID", &nvml->uuid);
    resolve(lib, "nvmlDeviceGetMemoryInfo", &nvml->memory);
    resolve(lib, "nvmlDeviceGetUtilizationRates", &nvml->utilization);
    resolve(lib, "nvmlEventSetCreate", &nvml->event_set_create);
    resolve(lib, "nvmlDeviceRegisterEvents", &nvml->register_events);
    resolve(lib, "nvmlEventSetWait_v2", &nvml->event_set_wait);
    resolve(lib, "nvmlDeviceGetTotalEccErrors", &nvml->total_ecc_errors);
    resolve(lib, "nvmlDeviceGetRetiredPagesPendingStatus", &nvml->retired_pages_pending);
    resolve(lib, "nvmlDeviceGetRemappedRows", &nvml->remapped_rows);
    if (!init || !nvml->device_count || !nvml->device_by_index || init() != nvml::kSuccess) {
      // The library stays loaded: unloading NVML in a running process is unsafe.
      delete nvml;
      why_not = "NVML did not initialise (driver not loaded?)";
      return;
    }
    loaded = nvml;
  });
  if (!loaded && why) *why = why_not;
  return loaded;
}

std::string Nvml::uuid_of(nvml::Device device) const {
  char text[96] = {0};
  if (!uuid || uuid(device, text, sizeof text) != nvml::kSuccess) return "";
  return text;
}

}  // namespace ag::worker
