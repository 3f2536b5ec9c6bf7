// UsageSampler: what this node is using right now, sent with every heartbeat so that
// the head can chart the last minutes per node: CPU busy share (from /proc/stat
// deltas), memory in use (MemTotal - MemAvailable) and, where NVML is present, each
// GPU's utilisation and memory. Io thread only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "api/protocol.h"

namespace ag::worker {

class UsageSampler {
 public:
  UsageSampler();
  ~UsageSampler();
  api::NodeUsage sample();

 private:
  struct Nvml;
  uint64_t last_busy_ = 0;
  uint64_t last_total_ = 0;
  Nvml* nvml_ = nullptr;
};

}  // namespace ag::worker
