// `ag logs`: a job's output read page after page until it is whole (or up to
// --limit-bytes, which says where it cut). Every rank's lines in the order the head
// received them, each prefixed "[rank N]" as `srun -l` does (GET /api/jobs/{id}/lines
// as text), or one rank's bytes as the task wrote them (GET .../logs); --tail, --since,
// --timestamps; -o json as JSON lines; followed until the tasks end.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

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
  bool json = false;                // one JSON object a line: {"rank", "ts", "line"}
  int64_t limit_bytes = 0;          // print at most this much (0: all of it)
};

// What was printed: all that was asked for, or only up to --limit-bytes.
enum class LogsPrinted { kWhole, kCut, kFailed };

// Writes to `out` until `limit` bytes (0: no limit) have gone; then it drops the rest
// and says so once on stderr ("[... cut at 1 MiB; --limit-bytes 0 for all]").
class LimitedOutput {
 public:
  // `whole_lines`: the cut falls after the last whole line within the limit (JSON lines
  // stay JSON).
  LimitedOutput(std::ostream& out, int64_t limit, bool whole_lines = false)
      : out_(out), limit_(limit), whole_lines_(whole_lines) {}
  // False once the limit is reached (nothing more will be written).
  bool write(std::string_view bytes);
  void flush() { out_.flush(); }
  bool cut() const { return cut_; }

 private:
  std::ostream& out_;
  int64_t limit_;
  bool whole_lines_;
  int64_t written_ = 0;
  bool cut_ = false;
};

// Prints what `options` ask for of the job's output: every page until the logs are
// whole (or, following, until the tasks end). Says on stderr what a job that has not
// started yet waits for. kFailed after printing the error.
LogsPrinted print_job_logs(const Connection& conn, const std::string& job_id, const LinesOptions& options,
                           std::ostream& out);

// One task's bytes (GET .../logs) from the start until the log is complete, or with
// `follow` until the task ends; a head that restarts is waited for. False after
// printing the error.
bool stream_task_log(const Connection& conn, const std::string& job_id, int task_index, std::optional<int> attempt,
                     bool follow, bool raw, LimitedOutput& out);

}  // namespace ag::cli
