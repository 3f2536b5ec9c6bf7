// GpuWatch: the node's GPUs' health from NVML, with no configuration. Every two seconds
// it reads the critical XID events it registered for, and each GPU's uncorrected ECC
// errors, pending retired pages and row remaps (pending or failed); a GPU NVML no longer
// finds (or calls answer "GPU is lost") has vanished. Each new fault goes to `report`
// as a sticky HealthReport naming the GPU, its index and UUID, and the error: the node
// stays UNHEALTHY until an admin resumes it. XIDs an application causes (13, 31, 43,
// 45, 68: bad memory access, a killed or faulting context) are not the node's fault and
// are left out. Io thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "api/protocol.h"
#include "common/timers.h"
#include "worker/nvml.h"

namespace ag::worker {

inline constexpr int64_t kGpuWatchPeriodMs = 2000;

class GpuWatch {
 public:
  using Report = std::function<void(const api::HealthReport&)>;
  GpuWatch(Timers& timers, const Nvml& nvml, Report report);
  ~GpuWatch();
  GpuWatch(const GpuWatch&) = delete;
  GpuWatch& operator=(const GpuWatch&) = delete;

  // Learns the GPUs (index, UUID), registers for XID events, checks now and every period.
  void start();
  // The latest fault, once there is one (GPU faults are sticky here too).
  const std::optional<api::HealthReport>& unhealthy() const { return unhealthy_; }
  // An admin cleared the node's mark (after a reset or repair): the faults seen so far
  // are forgiven; only new ones mark it again.
  void clear() { unhealthy_.reset(); }

 private:
  struct Gpu {
    int index = 0;
    std::string uuid;
    nvml::Device device = nullptr;
  };
  void check();
  // Reports a fault of `gpu` once per (gpu, kind, detail).
  void fault(const Gpu& gpu, const std::string& kind, const std::string& detail, const std::string& what);
  const Gpu* gpu_of(nvml::Device device) const;

  Timers& timers_;
  const Nvml& nvml_;
  Report report_;
  std::vector<Gpu> gpus_;
  nvml::EventSet events_ = nullptr;
  std::set<std::tuple<int, std::string, std::string>> reported_;
  std::optional<api::HealthReport> unhealthy_;
  Timers::Id tick_ = 0;
};

}  // namespace ag::worker
