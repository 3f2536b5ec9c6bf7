// Resource amounts: what a node offers and what one task asks for.
//
// CPUs are kept in thousandths so that fractional requests (num_cpus=0.5) add and
// subtract exactly; memory in bytes; GPUs as a count here and as concrete device
// indices where a node or a task holds them.
#pragma once

#include <cstdint>

namespace ag {

struct Resources {
  int64_t cpu_millis = 0;
  int64_t memory_bytes = 0;
  int64_t gpus = 0;

  Resources& operator+=(const Resources& other) {
    cpu_millis += other.cpu_millis;
    memory_bytes += other.memory_bytes;
    gpus += other.gpus;
    return *this;
  }
  Resources& operator-=(const Resources& other) {
    cpu_millis -= other.cpu_millis;
    memory_bytes -= other.memory_bytes;
    gpus -= other.gpus;
    return *this;
  }
  // True when every amount of `need` fits into this one.
  bool fits(const Resources& need) const {
    return need.cpu_millis <= cpu_millis && need.memory_bytes <= memory_bytes &&
           need.gpus <= gpus;
  }
  bool operator==(const Resources&) const = default;
};

inline Resources operator+(Resources a, const Resources& b) { return a += b; }
inline Resources operator-(Resources a, const Resources& b) { return a -= b; }

}  // namespace ag
