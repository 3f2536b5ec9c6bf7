#include "worker/gpu_watch.h"

#include <spdlog/spdlog.h>

#include <map>

namespace ag::worker {
namespace {

// XIDs that an application's own fault raises: not a sign of a bad node.
bool application_xid(unsigned long long xid) { return xid == 13 || xid == 31 || xid == 43 || xid == 45 || xid == 68; }

// What a few well-known XIDs mean, for the reason people read.
std::string xid_meaning(unsigned long long xid) {
  switch (xid) {
    case 48:
      return " (double-bit ECC error)";
    case 63:
      return " (ECC page retirement or row remap recorded)";
    case 64:
      return " (ECC page retirement or row remap failed)";
    case 74:
      return " (NVLink error)";
    case 79:
      return " (fell off the bus)";
    case 92:
      return " (high single-bit ECC error rate)";
    case 94:
      return " (contained ECC error)";
    case 95:
      return " (uncontained ECC error)";
    case 119:
    case 120:
      return " (GSP error)";
    default:
      return "";
  }
}

}  // namespace

GpuWatch::GpuWatch(Timers& timers, const Nvml& nvml, Report report)
    : timers_(timers), nvml_(nvml), report_(std::move(report)) {}

GpuWatch::~GpuWatch() {
  if (tick_) timers_.cancel(tick_);
}

void GpuWatch::start() {
  unsigned int count = 0;
  if (nvml_.device_count(&count) != nvml::kSuccess) count = 0;
  for (unsigned int i = 0; i < count; ++i) {
    Gpu gpu;
    gpu.index = static_cast<int>(i);
    if (nvml_.device_by_index(i, &gpu.device) != nvml::kSuccess) continue;
    gpu.uuid = nvml_.uuid_of(gpu.device);
    gpus_.push_back(gpu);
  }
  if (nvml_.event_set_create && nvml_.register_events && nvml_.event_set_wait &&
      nvml_.event_set_create(&events_) == nvml::kSuccess) {
    for (const auto& gpu : gpus_) {
      const nvml::Return r = nvml_.register_events(gpu.device, nvml::kEventXidCriticalError, events_);
      if (r != nvml::kSuccess && r != nvml::kNotSupported) {
        spdlog::warn("GPU {}: cannot watch its XID errors (NVML error {})", gpu.index, r);
      }
    }
  } else {
    events_ = nullptr;
  }
  if (!gpus_.empty()) check();
}

const GpuWatch::Gpu* GpuWatch::gpu_of(nvml::Device device) const {
  for (const auto& gpu : gpus_) {
    if (gpu.device == device) return &gpu;
  }
  return nullptr;
}

void GpuWatch::fault(const Gpu& gpu, const std::string& kind, const std::string& detail, const std::string& what) {
  if (!reported_.emplace(gpu.index, kind, detail).second) return;
  api::HealthReport report;
  report.healthy = false;
  report.sticky = true;
  report.gpu_kind = kind;
  report.gpu_index = gpu.index;
  report.reason = "GPU " + std::to_string(gpu.index) + (gpu.uuid.empty() ? "" : " (" + gpu.uuid + ")") + ": " + what;
  spdlog::error("node unhealthy: {}", report.reason);
  unhealthy_ = report;
  report_(report);
}

void GpuWatch::check() {
  tick_ = 0;
  // Critical XID events since the last look (a wait of 0 ms answers at once).
  if (events_) {
    for (int i = 0; i < 64; ++i) {
      nvml::EventData data{};
      if (nvml_.event_set_wait(events_, &data, 0) != nvml::kSuccess) break;
      const Gpu* gpu = gpu_of(data.device);
      if (!gpu || application_xid(data.event_data)) continue;
      const std::string xid = std::to_string(data.event_data);
      fault(*gpu, "xid", xid, "XID " + xid + xid_meaning(data.event_data));
    }
  }
  // The GPUs NVML finds now, by UUID: indices move up when one before them goes.
  std::map<std::string, nvml::Device> present;
  unsigned int count = 0;
  if (nvml_.device_count(&count) != nvml::kSuccess) count = 0;
  for (unsigned int i = 0; i < count; ++i) {
    nvml::Device device = nullptr;
    if (nvml_.device_by_index(i, &device) != nvml::kSuccess) continue;
    const std::string uuid = nvml_.uuid_of(device);
    present[uuid.empty() ? "#" + std::to_string(i) : uuid] = device;
  }
  for (const auto& gpu : gpus_) {
    auto found = present.find(gpu.uuid.empty() ? "#" + std::to_string(gpu.index) : gpu.uuid);
    if (found == present.end()) {
      fault(gpu, "vanished", "", "vanished: NVML no longer finds it (fell off the bus, or lost its driver)");
      continue;
    }
    nvml::Device now = found->second;
    if (nvml_.total_ecc_errors) {
      unsigned long long uncorrected = 0;
      const nvml::Return r = nvml_.total_ecc_errors(now, 1, 0, &uncorrected);
      if (r == nvml::kGpuIsLost) {
        fault(gpu, "vanished", "", "vanished: NVML says the GPU is lost");
        continue;
      }
      if (r == nvml::kSuccess && uncorrected > 0) {
        fault(gpu, "ecc", "", std::to_string(uncorrected) + " uncorrectable ECC error(s) since the driver loaded");
      }
    }
    if (nvml_.retired_pages_pending) {
      int pending = 0;
      if (nvml_.retired_pages_pending(now, &pending) == nvml::kSuccess && pending) {
        fault(gpu, "retired_pages", "", "memory pages wait to be retired (a reset or reboot retires them)");
      }
    }
    if (nvml_.remapped_rows) {
      unsigned int corrected = 0, uncorrected = 0, pending = 0, failed = 0;
      if (nvml_.remapped_rows(now, &corrected, &uncorrected, &pending, &failed) == nvml::kSuccess) {
        if (failed) fault(gpu, "row_remap", "failed", "a memory row remap failed (the GPU needs service)");
        if (pending) fault(gpu, "row_remap", "pending", "a memory row remap is pending (a reset applies it)");
      }
    }
  }
  tick_ = timers_.start(kGpuWatchPeriodMs, [this] { check(); });
}

}  // namespace ag::worker
