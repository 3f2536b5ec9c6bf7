// Nvml: the NVIDIA Management Library, loaded with dlopen once per process so that the
// binary runs where there is no driver, with the entry points AetherGrid uses (GPU
// detection, usage, health). AG_NVML_LIBRARY names another library to load instead of
// libnvidia-ml.so.1: the tests' fake (tests/integration/fake_nvml.c), or a driver
// installed off the loader's path. Entry points a library lacks stay null.
#pragma once

#include <string>

namespace ag::worker {

// NVML's C ABI, as its documentation gives it (the few types used here).
namespace nvml {
using Return = int;
using Device = void*;
using EventSet = void*;
inline constexpr Return kSuccess = 0;
inline constexpr Return kNotSupported = 3;
inline constexpr Return kTimeout = 10;
inline constexpr Return kGpuIsLost = 15;
inline constexpr unsigned long long kEventXidCriticalError = 0x8;
struct Memory {
  unsigned long long total, free, used;
};
struct Utilization {
  unsigned int gpu, memory;
};
struct EventData {
  Device device;
  unsigned long long event_type;
  unsigned long long event_data;  // the XID, for kEventXidCriticalError
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};
}  // namespace nvml

struct Nvml {
  // The process's NVML, initialised; null when there is none, with `why` set.
  static const Nvml* get(std::string* why = nullptr);

  nvml::Return (*device_count)(unsigned int*) = nullptr;
  nvml::Return (*device_by_index)(unsigned int, nvml::Device*) = nullptr;
  nvml::Return (*name)(nvml::Device, char*, unsigned int) = nullptr;
  nvml::Return (*uuid)(nvml::Device, char*, unsigned int) = nullptr;
  nvml::Return (*memory)(nvml::Device, nvml::Memory*) = nullptr;
  nvml::Return (*utilization)(nvml::Device, nvml::Utilization*) = nullptr;
  // Health: critical XID events, uncorrected ECC errors, retired pages and row remaps.
  nvml::Return (*event_set_create)(nvml::EventSet*) = nullptr;
  nvml::Return (*register_events)(nvml::Device, unsigned long long, nvml::EventSet) = nullptr;
  nvml::Return (*event_set_wait)(nvml::EventSet, nvml::EventData*, unsigned int timeout_ms) = nullptr;
  // (device, error type 1 = uncorrected, counter type 0 = volatile, count)
  nvml::Return (*total_ecc_errors)(nvml::Device, int, int, unsigned long long*) = nullptr;
  nvml::Return (*retired_pages_pending)(nvml::Device, int*) = nullptr;
  // (device, corrected rows, uncorrected rows, remap pending, remap failed)
  nvml::Return (*remapped_rows)(nvml::Device, unsigned int*, unsigned int*, unsigned int*, unsigned int*) = nullptr;

  // "GPU-8c1d..." or "" when NVML does not say.
  std::string uuid_of(nvml::Device device) const;
};

}  // namespace ag::worker
