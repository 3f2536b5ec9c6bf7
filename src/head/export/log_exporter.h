// LogExporter: `ag start-head --log-export DIR`: every line every task writes also goes,
// as one JSON object a line, to files in DIR that a log shipper tails (Vector, Fluent
// Bit, Promtail, Filebeat; packaging/log-export/ has a sample):
//
//   DIR/tasks-000001.jsonl  {"ts", "job", "attempt", "task", "node", "owner", "stream", "line"}
//   DIR/tasks-000002.jsonl  (the next, once the first holds max_file_bytes; the newest
//   ...                      keep_files are kept)
//   DIR/.export-state.json  which file and how much of it, and how far each log is exported
//
// Once a second it reads, from the LogStore, the lines of the logs of live jobs (and of
// jobs that ended since) past where it stopped, with the time the head received each,
// appends them, fsyncs the file, then writes the state (write, fsync, rename). A
// restarted head cuts the file back to the length the state says and goes on from the
// state's offsets: every line is exported exactly once across restarts and crashes.
// Lines of logs that existed when export was first turned on are not exported.
//
// A directory that cannot be written, or a full disk: the head goes on serving; export
// pauses, offsets kept, and is tried again every pass; the change is told once as a
// "log_export.failed" event (and "log_export.resumed"), and in ag_log_export_failing.
// Io thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include "common/clock.h"
#include "common/result.h"
#include "common/timers.h"
#include "head/jobs/job_layer.h"
#include "head/logs/log_store.h"

namespace ag::head {

struct LogExportConfig {
  std::string dir;
  int64_t max_file_bytes = int64_t{256} << 20;
  int keep_files = 8;
  int64_t pass_ms = 1000;
};

class LogExporter {
 public:
  // `tell(type, message)`: a cluster event ("log_export.failed", "log_export.resumed").
  using Tell = std::function<void(const std::string& type, const std::string& message)>;
  LogExporter(LogExportConfig config, Timers& timers, JobLayer& jobs, LogStore& logs, Tell tell);
  ~LogExporter();
  LogExporter(const LogExporter&) = delete;
  LogExporter& operator=(const LogExporter&) = delete;

  // Makes the directory, reads the state (or, the first time, notes where every log
  // stands), cuts the current file back to the state's length. Errors: kInvalidArgument
  // naming the directory when it cannot be made or written (`ag start-head` fails).
  Status open();
  // Exports every pass_ms from now on.
  void start();
  // A job changed: one that ended is exported to its logs' ends, then let go.
  void on_job_changed(const Job& job);
  // One pass (tests call it between clock moves).
  void pass();

  // ag_log_export_lines_total, ag_log_export_errors_total, ag_log_export_failing.
  void render_metrics(std::string& out) const;

  uint64_t lines_exported() const { return lines_; }
  uint64_t errors() const { return errors_; }
  bool failing() const { return failing_; }

 private:
  using Key = std::tuple<std::string, int, int>;  // job, attempt, task
  Status write_lines(const std::string& text);
  Status save_state();
  Status rotate();
  std::string file_path(int64_t seq) const;
  void failed(const std::string& why);

  LogExportConfig config_;
  Timers& timers_;
  JobLayer& jobs_;
  LogStore& logs_;
  Tell tell_;
  int fd_ = -1;
  int64_t file_seq_ = 1;
  int64_t file_bytes_ = 0;
  std::map<Key, int64_t> offsets_;  // how far each log is exported
  std::set<std::string> ending_;    // jobs that ended, whose logs' ends are still to export
  uint64_t lines_ = 0;
  uint64_t errors_ = 0;
  bool failing_ = false;
  Timers::Id timer_ = 0;
};

}  // namespace ag::head
