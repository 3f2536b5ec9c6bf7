// GET /api/jobs/{id}/lines: a job's output as lines with the time the head received
// each, one task's or all tasks' merged in the order they arrived.
//   attempt     which attempt (default: the latest)
//   task_index  one task (default: all of them)
//   tail        only the last N lines (of the merge)
//   since_ms    only lines received at or after this time (ms since the epoch)
//   from        a cursor: one byte offset per task listed, as `next` gave them
// Answer: {"attempt", "tasks": [task indexes], "lines": [[task_index, time_ms, text],
// ...], "next": [offset per task], "truncated", "complete": every task listed is over
// and all its output was returned}.
#include <charconv>
#include <nlohmann/json.hpp>

#include "head/api_routes.h"
#include "head/log_lines.h"
#include "head/route_helpers.h"

namespace ag::head {
namespace {

constexpr int64_t kMaxTailLines = 100000;
// Bytes one answer reads from the logs, shared among the tasks it covers.
constexpr int64_t kMaxLinesBytes = 4 << 20;
constexpr int64_t kMinLinesBytesPerTask = 4 << 10;

// "12,0,7" as offsets, exactly `count` of them; nullopt when it is not that.
std::optional<std::vector<int64_t>> parse_cursor(const std::string& text, size_t count) {
  std::vector<int64_t> out;
  size_t start = 0;
  while (start <= text.size() && out.size() <= count) {
    size_t comma = text.find(',', start);
    const size_t stop = comma == std::string::npos ? text.size() : comma;
    int64_t v = 0;
    auto [end, ec] = std::from_chars(text.data() + start, text.data() + stop, v);
    if (stop == start || ec != std::errc() || end != text.data() + stop || v < 0) return std::nullopt;
    out.push_back(v);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (out.size() != count) return std::nullopt;
  return out;
}

}  // namespace

void ApiRoutes::handle_lines(const net::HttpRequest& req, const std::string& job_id, net::Respond respond) {
  const Job* job = deps_.jobs.find(job_id);
  const int64_t last_attempt = std::max<int64_t>(0, static_cast<int64_t>(job->attempts.size()) - 1);
  int64_t attempt = last_attempt, task_index = -1, tail = 0, since_ms = -1;
  if (!query_int(req, "attempt", 0, last_attempt, &attempt, respond) ||
      !query_int(req, "task_index", 0, job->spec.num_workers - 1, &task_index, respond) ||
      !query_int(req, "tail", 1, kMaxTailLines, &tail, respond) ||
      !query_int(req, "since_ms", 0, INT64_MAX, &since_ms, respond)) {
    return;
  }
  std::vector<int> tasks;
  if (task_index >= 0) {
    tasks.push_back(static_cast<int>(task_index));
  } else {
    for (int i = 0; i < job->spec.num_workers; ++i) tasks.push_back(i);
  }
  std::vector<int64_t> from(tasks.size(), 0);
  if (auto it = req.query.find("from"); it != req.query.end()) {
    auto cursor = parse_cursor(it->second, tasks.size());
    if (!cursor) {
      return respond(error_response(400, "query parameter 'from' must list one byte offset per task (" +
                                             std::to_string(tasks.size()) + "), as 'next' gave them; got '" +
                                             it->second.substr(0, 64) + "'"));
    }
    from = std::move(*cursor);
  }
  const int64_t budget =
      std::max(kMinLinesBytesPerTask, kMaxLinesBytes / static_cast<int64_t>(tasks.size()));
  std::vector<TaskLinePage> pages;
  bool complete = true;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const api::TaskKey key{job_id, static_cast<int>(attempt), tasks[i]};
    LogStore::LineQuery query;
    query.from = from[i];
    if (since_ms >= 0) query.since_ms = since_ms;
    query.tail = tail;
    query.max_bytes = budget;
    auto page = deps_.logs.lines(key, query);
    if (!page.ok()) return respond(error_response(page.error()));
    complete = complete && job->task_over(key.attempt, key.task_index) && page->next >= deps_.logs.size(key);
    pages.push_back({tasks[i], std::move(page.value())});
  }
  nlohmann::json body = merge_lines(pages, tail);
  body["attempt"] = attempt;
  body["tasks"] = tasks;
  body["complete"] = complete;
  respond(json_response(200, body));
}

}  // namespace ag::head
