// A task's log read as lines, each with the time the head received it (the time of the
// bytes that begin it, to within TimeNoteWriter::kGranularityMs): what
// GET /api/jobs/{id}/lines pages through for `ag logs` (every rank interleaved,
// --tail, --since, --timestamps) and the SDK's get_logs. Reads go to the files of a
// LogStore; every call stands alone (no state between pages: the client holds the
// cursor). Io thread only, as the LogStore.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "api/protocol.h"
#include "common/result.h"
#include "head/logs/log_store.h"

namespace ag::head {

class LogLineReader {
 public:
  struct Line {
    int64_t offset = 0;
    int64_t time_ms = 0;
    std::string_view text;  // without its newline; points into the Page's bytes
    // A piece of a line longer than a page: the rest of it comes first in the next one.
    bool partial = false;
  };
  struct Page {
    std::vector<Line> lines;
    int64_t next = 0;   // where the next read begins
    bool more = false;  // the read stopped at its budget: reading on from `next` gives more now
    std::shared_ptr<const std::string> bytes;   // what the lines point into
    std::shared_ptr<const std::string> marker;  // the line standing for a dropped part
  };
  struct LineStart {
    int64_t offset = 0;
    int64_t time_ms = 0;
  };
  // Where the log's whole lines are: from `first` (0, or the first line after a part
  // dropped under the cap) to `end` (past its last newline; its size once the log has
  // ended, when a last line needs none).
  struct Span {
    int64_t first = 0;
    int64_t end = 0;
  };

  explicit LogLineReader(LogStore& logs) : logs_(logs) {}

  // The lines from byte `from` on, within `max_bytes` of the log. A line not yet ended
  // by its newline is left for a later read unless the log has `ended` (its task is
  // over: the log is closed, or was before the head restarted); a line longer
  // than `max_bytes` comes in pieces (`partial`), so every read that has bytes to give
  // moves on. A cursor in the dropped part reads as the drop marker, then the first
  // whole line kept. Errors: kInternal when the file cannot be read.
  Result<Page> page(const api::TaskKey& key, int64_t from, int64_t max_bytes, bool ended);

  Result<Span> span(const api::TaskKey& key, bool ended);

  // Where the first line received at or after `since_ms` begins (span.end when none
  // was).
  Result<int64_t> first_since(const api::TaskKey& key, int64_t since_ms, const Span& span);

  // The starts of the last `count` lines of [floor, before), oldest first, with their
  // times; `floor` and `before` are line starts (or span ends).
  Result<std::vector<LineStart>> starts_before(const api::TaskKey& key, int64_t floor, int64_t before, int64_t count);

 private:
  LogStore& logs_;
};

}  // namespace ag::head
