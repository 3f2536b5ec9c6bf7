// Timers: the one way code waits, so that logic driven by time (timeouts, retries,
// heartbeats, "schedule after this event") runs under a fake clock in unit tests.
// The daemons pass net::AsioTimers (their io thread); tests pass a FakeClock
// (tests/unit/fakes/fake_clock.h) and advance it.
#pragma once

#include <cstdint>
#include <functional>

namespace ag {

class Timers {
 public:
  using Id = uint64_t;  // never 0

  virtual ~Timers() = default;

  // Runs `fn` on the owner's thread once `delay_ms` have passed (0: as soon as the
  // work in progress is done). Owner's thread only.
  virtual Id start(int64_t delay_ms, std::function<void()> fn) = 0;

  // Cancels a timer that has not fired; unknown and fired ids are ignored.
  virtual void cancel(Id id) = 0;

  // Runs `fn` on the owner's thread soon. Thread-safe (e.g. from the store's writer).
  virtual void post(std::function<void()> fn) = 0;
};

}  // namespace ag
