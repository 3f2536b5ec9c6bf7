// A job's output as lines (GET /api/jobs/{id}/lines): all ranks interleaved in the
// order the head received them, each line prefixed "[rank N]" as `srun -l` does, or
// one rank; --tail, --since, --timestamps; followed until the tasks end.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "cli/session.h"
#include "common/result.h"

namespace ag::cli {

struct LinesOptions {
  std::optional<int> task_index;    // one rank; all of them when empty
  std::optional<int> attempt;       // the latest when empty
  int64_t tail = 0;                 // only the last N lines; 0 for all
  std::optional<int64_t> since_ms;  // only lines received since then (ms since the epoch)
  bool timestamps = false;          // each line after the time it was received (UTC)
  bool follow = false;              // until every task listed has ended
  bool raw = false;                 // terminal control characters as they are
};

// Prints the lines to `out`; false after printing the error.
bool print_job_lines(const Connection& conn, const std::string& job_id, const LinesOptions& options,
                     std::ostream& out);

// "2026-12-01T11:48:03.123Z".
std::string utc_timestamp(int64_t ms);

}  // namespace ag::cli
