// What the JobWriter's next write of changed jobs carries, and where that write stands
// (JobWriter): changes are batched and written at most every interval.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

namespace ag::head {

struct FlushState {
  // Jobs changed since the last flush -> index of their first event not yet written
  // (by hash: marked at every change of a job; the order of a write does not matter).
  std::unordered_map<std::string, size_t> unsaved;
  bool armed = false;
  uint64_t timer = 0;      // the armed flush's timer (Timers::Id)
  int64_t due_ms = 0;      // when it fires (steady clock)
  bool retrying = false;   // it retries a failed write: nothing brings it sooner
  bool in_flight = false;  // a flush is being written
  bool again = false;      // changes came while it was
  int64_t last_steady_ms = -1000000;
  int64_t interval_ms = 20;  // grows with what the last flush cost
  // after_durable callbacks waiting for the next flush to be stored.
  std::vector<std::function<void()>> durable_waiters;
};

}  // namespace ag::head
