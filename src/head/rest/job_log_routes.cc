// GET /api/jobs/{id}/logs: one task's bytes from an offset (head/rest/job_log_routes.h).
//
// GET /api/jobs/{id}/lines: a job's output as lines with the time the head received
// each, one task's or all tasks' merged in the order they arrived, page after page.
//   attempt     which attempt (default: the latest)
//   task_index  one task (default: all of them)
//   tail        only the last N lines (of the merge): the first page starts there
//   since_ms    only lines received at or after this time (ms since the epoch)
//   from        a cursor: one byte offset per task listed, as `next` gave them; the
//               next page of a read (not with tail or since: `next` is past them)
//   format      json (default), text ("[rank N] line" with several tasks, the bytes as
//               the task wrote them with one) or jsonl ({"rank", "ts", "line"} a line)
//   timestamps  1: with format=text, each line after the UTC time it was received
//   wait_ms     when there is nothing to give yet, wait up to this long on the head for
//               the next line (or the tasks' end) before answering
// Answer (json): {"attempt", "tasks": [task indexes], "lines": [[task_index, time_ms,
// text], ... (a 4th element, true, on a piece of a line longer than a page)], "next": [offset per task], "more": reading on from next gives more now
// ("truncated" says the same), "complete": every task listed is over and all its
// output was returned}. With text and jsonl the body is the lines, and the headers
// X-AG-Next (the cursor, "12,0,7"), X-AG-More, X-AG-Log-Complete and X-AG-Attempt say
// the rest. A read is whole when it goes on until `more` is false (or, to follow the
// tasks, until `complete`).
#include <boost/asio/steady_timer.hpp>
#include <charconv>
#include <nlohmann/json.hpp>

#include "head/rest/job_log_routes.h"

#include "head/jobs/job_layer.h"
#include "head/logs/log_line_reader.h"
#include "head/logs/log_lines.h"
#include "head/rest/route_helpers.h"

namespace ag::head {
namespace {

using net::HttpResponse;

constexpr int64_t kMaxTailLines = 1'000'000;
// About how many bytes of lines one answer gives, read from each task's log a window at
// a time (the answer's share of a task, within these bounds).
constexpr int64_t kMaxLinesBytes = 4 << 20;
constexpr int64_t kMinLinesBytesPerTask = 4 << 10;
constexpr int64_t kMaxWindowBytes = 256 << 10;
constexpr int64_t kMaxWaitMs = 60000;
// The most one answer of GET .../logs holds.
constexpr int64_t kMaxLogChunk = 4 << 20;

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

std::string join(const std::vector<int64_t>& values) {
  std::string out;
  for (int64_t v : values) out += (out.empty() ? "" : ",") + std::to_string(v);
  return out;
}

}  // namespace

void JobLogRoutes::handle_logs(const net::HttpRequest& req, const std::string& job_id, net::Respond respond) {
  const Job* job = deps_.jobs.table.find(job_id);
  int64_t task_index = 0, offset = 0, max_bytes = kMaxLogChunk, wait_ms = 0, tail_bytes = -1;
  int64_t attempt = job->attempts.empty() ? 0 : job->attempts.back().number;
  if (!query_int(req, "task_index", 0, job->spec.num_workers - 1, &task_index, respond) ||
      !query_int(req, "attempt", 0, std::max<int64_t>(0, static_cast<int64_t>(job->attempts.size()) - 1), &attempt, respond) ||
      !query_int(req, "offset", 0, INT64_MAX, &offset, respond) ||
      !query_int(req, "max_bytes", 1, kMaxLogChunk, &max_bytes, respond) ||
      !query_int(req, "wait_ms", 0, kMaxWaitMs, &wait_ms, respond) ||
      !query_int(req, "tail_bytes", 0, kMaxLogChunk, &tail_bytes, respond)) {
    return;
  }
  api::TaskKey key{job_id, static_cast<int>(attempt), static_cast<int>(task_index)};
  if (auto it = req.query.find("download"); it != req.query.end() && it->second == "1") {
    // The whole log (what the head's cap kept of it) as a file to save, from disk.
    HttpResponse res{200, "text/plain; charset=utf-8", ""};
    const int64_t kept_from = deps_.logs.dropped(key), size = deps_.logs.size(key);
    if (size > kept_from) {
      res.body_file = deps_.logs.path(key);
      res.body_file_offset = kept_from;
      res.body_file_length = size - kept_from;
    }
    res.headers.emplace_back("Content-Disposition", "attachment; filename=\"" + job->id + "-attempt" +
                                                        std::to_string(attempt) + "-rank" + std::to_string(task_index) +
                                                        ".log\"");
    res.headers.emplace_back("X-AG-Dropped-Bytes", std::to_string(kept_from));
    res.headers.emplace_back("X-Content-Type-Options", "nosniff");
    return respond(std::move(res));
  }
  if (tail_bytes >= 0) {
    // The end of the log, for viewers that must not load a huge log whole; with
    // wait_ms it waits only while the log is still empty.
    offset = std::max<int64_t>(0, deps_.logs.size(key) - tail_bytes);
    max_bytes = std::max<int64_t>(1, tail_bytes);
  }
  auto waiters = std::make_shared<std::pair<uint64_t, uint64_t>>(0, 0);
  auto timer = std::make_shared<boost::asio::steady_timer>(deps_.io);
  auto done = std::make_shared<bool>(false);
  auto answer = [this, key, offset, max_bytes, respond, timer, done, job_id, waiters]() {
    if (*done) return;
    *done = true;
    timer->cancel();
    deps_.logs.cancel_wait(waiters->first);
    deps_.jobs.events.cancel_watch(waiters->second);
    const int64_t size = deps_.logs.size(key);
    // The part dropped under the head's cap: a line that says so, then on from there.
    if (const int64_t dropped = deps_.logs.dropped(key); offset < dropped) {
      HttpResponse res{200, "text/plain; charset=utf-8", deps_.logs.drop_marker(key) + "\n"};
      res.headers.emplace_back("X-AG-Offset", std::to_string(offset));
      res.headers.emplace_back("X-AG-Next-Offset", std::to_string(dropped));
      res.headers.emplace_back("X-AG-Log-Size", std::to_string(size));
      res.headers.emplace_back("X-AG-Attempt", std::to_string(key.attempt));
      res.headers.emplace_back("X-Content-Type-Options", "nosniff");
      res.headers.emplace_back("X-AG-Log-Complete", "0");
      return respond(std::move(res));
    }
    // Sent from the log's file: a client that reads slowly holds no copy in memory.
    const int64_t length = std::clamp<int64_t>(size - offset, 0, max_bytes);
    const int64_t next = offset + length;
    // The log is complete once its task has ended and every byte has been read.
    const Job* j = deps_.jobs.table.find(job_id);
    bool complete = (!j || j->task_over(key.attempt, key.task_index)) && next >= size;
    HttpResponse res{200, "text/plain; charset=utf-8", ""};
    if (length > 0) {
      res.body_file = deps_.logs.path(key);
      res.body_file_offset = offset;
      res.body_file_length = length;
    }
    res.headers.emplace_back("X-AG-Offset", std::to_string(offset));
    res.headers.emplace_back("X-AG-Next-Offset", std::to_string(next));
    res.headers.emplace_back("X-AG-Log-Size", std::to_string(size));
    res.headers.emplace_back("X-Content-Type-Options", "nosniff");
    res.headers.emplace_back("X-AG-Attempt", std::to_string(key.attempt));
    res.headers.emplace_back("X-AG-Log-Complete", complete ? "1" : "0");
    respond(std::move(res));
  };
  bool job_done = job->terminal() || (static_cast<size_t>(key.attempt) < job->attempts.size() &&
                                      job->attempts[key.attempt].finished());
  if (wait_ms == 0 || deps_.logs.size(key) > offset || job_done) return answer();
  // Long poll: answer when bytes arrive, the job ends, or wait_ms passes.
  waiters->first = deps_.logs.wait(key, offset, answer);
  if (*done) return;
  waiters->second = watch_job(deps_.jobs, job_id, answer);
  if (*done) return;
  timer->expires_after(std::chrono::milliseconds(wait_ms));
  timer->async_wait([answer](const boost::system::error_code& ec) {
    if (!ec) answer();
  });
}

void JobLogRoutes::handle_lines(const net::HttpRequest& req, const std::string& job_id, net::Respond respond) {
  const Job* job = deps_.jobs.table.find(job_id);
  if (!job) return respond(error_response(404, "job " + job_id + " is gone (deleted)"));
  const int64_t last_attempt = std::max<int64_t>(0, static_cast<int64_t>(job->attempts.size()) - 1);
  int64_t attempt = last_attempt, task_index = -1, tail = 0, since_ms = -1, timestamps = 0, wait_ms = 0;
  if (!query_int(req, "attempt", 0, last_attempt, &attempt, respond) ||
      !query_int(req, "task_index", 0, job->spec.num_workers - 1, &task_index, respond) ||
      !query_int(req, "tail", 1, kMaxTailLines, &tail, respond) ||
      !query_int(req, "since_ms", 0, INT64_MAX, &since_ms, respond) ||
      !query_int(req, "timestamps", 0, 1, &timestamps, respond) ||
      !query_int(req, "wait_ms", 0, kMaxWaitMs, &wait_ms, respond)) {
    return;
  }
  std::string format = "json";
  if (auto it = req.query.find("format"); it != req.query.end()) format = it->second;
  if (format != "json" && format != "text" && format != "jsonl") {
    return respond(error_response(400, "query parameter 'format' must be json, text or jsonl; got '" +
                                           format.substr(0, 32) + "'"));
  }
  std::vector<int> tasks;
  if (task_index >= 0) {
    tasks.push_back(static_cast<int>(task_index));
  } else {
    for (int i = 0; i < job->spec.num_workers; ++i) tasks.push_back(i);
  }
  std::vector<api::TaskKey> keys;
  std::vector<bool> ended;  // the task is over: its log will not grow (closed, or before a restart)
  for (int t : tasks) {
    keys.push_back({job_id, static_cast<int>(attempt), t});
    ended.push_back(job->task_over(static_cast<int>(attempt), t));
  }
  LogLineReader reader(deps_.logs);
  std::vector<int64_t> from(tasks.size(), 0);
  if (auto it = req.query.find("from"); it != req.query.end()) {
    if (tail > 0 || since_ms >= 0) {
      return respond(error_response(400, "query parameter 'from' continues a read and takes no 'tail' or "
                                         "'since_ms': the first page's 'next' already starts after them"));
    }
    auto cursor = parse_cursor(it->second, tasks.size());
    if (!cursor) {
      return respond(error_response(400, "query parameter 'from' must list one byte offset per task (" +
                                             std::to_string(tasks.size()) + "), as 'next' gave them; got '" +
                                             it->second.substr(0, 64) + "'"));
    }
    from = std::move(*cursor);
  } else if (tail > 0 || since_ms >= 0) {
    // Where the asked-for lines begin in each log; the pages go forward from there.
    std::vector<int64_t> floors, ends;
    for (size_t i = 0; i < keys.size(); ++i) {
      const api::TaskKey& key = keys[i];
      auto span = reader.span(key, ended[i]);
      if (!span.ok()) return respond(error_response(span.error()));
      int64_t floor = span->first;
      if (since_ms >= 0) {
        auto first = reader.first_since(key, since_ms, span.value());
        if (!first.ok()) return respond(error_response(first.error()));
        floor = first.value();
      }
      floors.push_back(floor);
      ends.push_back(span->end);
    }
    from = floors;
    if (tail > 0) {
      auto starts = merged_tail_starts(tasks, floors, ends, tail, [&](size_t i, int64_t before, int64_t count) {
        return reader.starts_before(keys[i], floors[i], before, count);
      });
      if (!starts.ok()) return respond(error_response(starts.error()));
      from = std::move(starts.value());
    }
  }
  const int64_t window =
      std::clamp(kMaxLinesBytes / static_cast<int64_t>(tasks.size()), kMinLinesBytesPerTask, kMaxWindowBytes);
  auto read = read_merged(tasks, from, kMaxLinesBytes, window, [&](size_t i, int64_t at, int64_t max_bytes) {
    return reader.page(keys[i], at, max_bytes, ended[i]);
  });
  if (!read.ok()) return respond(error_response(read.error()));
  const MergedPage& merged = read.value();
  bool complete = true;
  for (size_t i = 0; i < tasks.size(); ++i) {
    complete = complete && job->task_over(keys[i].attempt, keys[i].task_index) &&
               merged.next[i] >= deps_.logs.size(keys[i]);
  }
  if (wait_ms > 0 && merged.lines.empty() && !merged.more && !complete) {
    // Only the logs that can still grow: a finished task's would answer at once.
    std::vector<api::TaskKey> growing;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (!ended[i]) growing.push_back(keys[i]);
    }
    return wait_for_lines(req, job_id, growing, wait_ms, std::move(respond));
  }
  if (format == "json") {
    nlohmann::json body = to_json(merged);
    body["attempt"] = attempt;
    body["tasks"] = tasks;
    body["complete"] = complete;
    return respond(json_response(200, body));
  }
  net::HttpResponse res{200, format == "text" ? "text/plain; charset=utf-8" : "application/x-ndjson",
                        format == "text" ? render_text(merged, tasks.size() > 1, timestamps == 1)
                                         : render_json_lines(merged)};
  res.headers.emplace_back("X-AG-Next", join(merged.next));
  res.headers.emplace_back("X-AG-More", merged.more ? "1" : "0");
  res.headers.emplace_back("X-AG-Log-Complete", complete ? "1" : "0");
  res.headers.emplace_back("X-AG-Attempt", std::to_string(attempt));
  res.headers.emplace_back("X-Content-Type-Options", "nosniff");
  respond(std::move(res));
}

void JobLogRoutes::wait_for_lines(const net::HttpRequest& req, const std::string& job_id,
                               const std::vector<api::TaskKey>& keys, int64_t wait_ms, net::Respond respond) {
  // Asked again, without waiting, once a log grows or ends, the job changes, or time is up.
  struct Waiting {
    std::vector<uint64_t> log_waits;
    uint64_t job_watch = 0;
    boost::asio::steady_timer timer;
    bool done = false;
    explicit Waiting(boost::asio::io_context& io) : timer(io) {}
  };
  auto waiting = std::make_shared<Waiting>(deps_.io);
  net::HttpRequest again = req;
  again.query.erase("wait_ms");
  auto answer = [this, waiting, again = std::move(again), job_id, respond]() {
    if (waiting->done) return;
    waiting->done = true;
    waiting->timer.cancel();
    for (uint64_t id : waiting->log_waits) deps_.logs.cancel_wait(id);
    deps_.jobs.events.cancel_watch(waiting->job_watch);
    handle_lines(again, job_id, respond);
  };
  // From each log's end: a line still without its newline must not wake it at once.
  for (const auto& key : keys) {
    waiting->log_waits.push_back(deps_.logs.wait(key, deps_.logs.size(key), answer));
    if (waiting->done) return;
  }
  waiting->job_watch = watch_job(deps_.jobs, job_id, answer);
  if (waiting->done) return;
  waiting->timer.expires_after(std::chrono::milliseconds(wait_ms));
  waiting->timer.async_wait([answer](const boost::system::error_code& ec) {
    if (!ec) answer();
  });
}

}  // namespace ag::head
