// Several tasks' logs as one stream of lines in the order the head received them, as
// `srun -l` shows a job's ranks: what GET /api/jobs/{id}/lines answers (and so `ag logs
// JOB` for all ranks, --tail, --since, --timestamps, and the SDK's get_logs). Pure: the
// pages and line starts come from LogLineReader.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/result.h"
#include "head/logs/log_line_reader.h"

namespace ag::head {

struct TaskLinePage {
  int task_index = 0;
  LogLineReader::Page page;
};

struct MergedLine {
  int task_index = 0;
  int64_t time_ms = 0;
  std::string_view text;
  bool partial = false;  // a piece of a line longer than a page (no newline after it)
};

struct MergedPage {
  std::vector<MergedLine> lines;  // by time received, then task index, then place in the log
  std::vector<int64_t> next;      // each task's cursor, in the pages' order
  bool more = false;              // reading on from `next` gives more now
  // What the lines' text points into, kept as long as the merge.
  std::vector<std::shared_ptr<const std::string>> bytes;
};

// The pages' lines in one order. A page that stopped at its budget has later lines
// that may belong before other tasks' lines of this read: those are held back (their
// task's cursor stays at the first of them) so that page after page, the merge is the
// same as one read of the whole logs would give. Each call gives at least one line when
// any page has one.
MergedPage merge_pages(const std::vector<TaskLinePage>& pages);

// One answer's worth of the merge of several logs from cursor `from`: about `budget`
// bytes of lines. Reads each log `window` bytes at a time (`read(i, from, max)`) and
// merges round after round, reading again only the logs whose window was used up, so a
// log whose lines wait behind another's costs one window, not a share of the budget.
// The result is what merge_pages gives for one read of everything up to where it stops.
using ReadPage = std::function<Result<LogLineReader::Page>(size_t log, int64_t from, int64_t max_bytes)>;
Result<MergedPage> read_merged(const std::vector<int>& task_indexes, const std::vector<int64_t>& from, int64_t budget,
                               int64_t window, const ReadPage& read);

// Where the last `count` lines of the merge of several logs begin, per log. `floors`
// and `ends` bound each log's lines (line starts); `earlier(i, before, n)` gives the
// starts of the last `n` lines of log i before `before` (no earlier than its floor),
// oldest first. Reads about `count` lines in all, however many logs there are.
using EarlierLines =
    std::function<Result<std::vector<LogLineReader::LineStart>>(size_t log, int64_t before, int64_t count)>;
Result<std::vector<int64_t>> merged_tail_starts(const std::vector<int>& task_indexes,
                                                const std::vector<int64_t>& floors,
                                                const std::vector<int64_t>& ends, int64_t count,
                                                const EarlierLines& earlier);

// The page's lines as text: each "TIME [rank N] text\n", the time with `timestamps`,
// the rank with `ranks`; a partial line without its newline when there are no ranks
// to show (so one task's output comes out byte for byte).
std::string render_text(const MergedPage& page, bool ranks, bool timestamps);
// One JSON object per line: {"rank": N, "ts": "2026-12-01T11:48:03.123Z", "line": "..."}
// (a partial line also has "partial": true).
std::string render_json_lines(const MergedPage& page);
// {"lines": [[task_index, time_ms, text], ...], "next": [...], "more": bool}.
nlohmann::json to_json(const MergedPage& page);

}  // namespace ag::head
