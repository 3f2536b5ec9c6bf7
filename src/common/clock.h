// Clock: the one way code reads time, so that logic can be driven by a fake clock in
// tests. The head and worker pass a SystemClock; tests pass a FakeClock they advance
// (tests/unit/fakes/fake_clock.h, which also implements Timers).
#pragma once

#include <cstdint>

namespace ag {

class Clock {
 public:
  virtual ~Clock() = default;
  // Milliseconds since the Unix epoch (wall time, for timestamps users read).
  virtual int64_t now_ms() const = 0;
  // Monotonic milliseconds, for durations and timeouts.
  virtual int64_t steady_ms() const = 0;
};

class SystemClock final : public Clock {
 public:
  int64_t now_ms() const override;
  int64_t steady_ms() const override;
};

}  // namespace ag
