#include "cli/log_lines.h"

#include <charconv>
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/api_client.h"
#include "cli/table.h"
#include "common/amounts.h"
#include "common/memory.h"
#include "net/http_types.h"

namespace ag::cli {
namespace {

// How long a follow pauses after an empty answer (a head without long polls here).
constexpr int kFollowPollMs = 300;
// A head that is restarting is waited for this long.
constexpr double kReconnectWindowS = 30;
// A long poll's wait on the head, and the call's own timeout around it.
constexpr int kWaitMs = 25000;
constexpr int kCallTimeoutMs = 40000;

std::optional<int64_t> int_header(const net::HttpResponse& res, const std::string& name) {
  const std::string text = header_value(res, name);
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::string size_text(int64_t bytes) {
  if (bytes >= (int64_t{1} << 20)) return format_number("%.1f", static_cast<double>(bytes) / (1 << 20)) + " MiB";
  if (bytes >= 1024) return format_number("%.1f", static_cast<double>(bytes) / 1024) + " KiB";
  return std::to_string(bytes) + " bytes";
}

// A job that has not started has no output yet: says why on stderr. With `follow`,
// waits (on the head) until its first attempt has begun. False when it never will (it
// ended first) or on an error (printed).
bool wait_until_started(const Connection& conn, const std::string& job_id, bool follow, bool* ended_unstarted) {
  const std::string path = "/api/jobs/" + net::url_encode(job_id);
  auto job = call_json_retrying(conn, "GET", path, "", kCallTimeoutMs, kReconnectWindowS);
  if (!job.ok()) {
    fail(job.error());
    return false;
  }
  std::optional<std::string> said;
  for (;;) {
    const nlohmann::json& j = job.value();
    if (j.value("num_attempts", 0) > 0) return true;
    const std::string state = j.value("state", "");
    const std::string message = j.value("message", "");
    if (state != "PENDING") {
      std::cerr << "job " << job_id << " is " << state << " and never started: it has no output"
                << (message.empty() ? "" : " (" + terminal_safe(message, false) + ")") << "\n";
      *ended_unstarted = true;
      return true;
    }
    if (!said || *said != message) {
      std::cerr << "job " << job_id << " is PENDING" << (message.empty() ? "" : ": " + terminal_safe(message, false))
                << (follow ? "\nwaiting for it to start (Ctrl-C to stop waiting; the job stays queued)"
                           : "\nit has no output yet (ag logs -f waits for it)")
                << "\n";
      said = message;
    }
    if (!follow) {
      *ended_unstarted = true;
      return true;
    }
    job = call_json_retrying(conn, "GET",
                             path + "/wait?attempts_at_least=1&timeout_ms=" + std::to_string(kWaitMs) +
                                 "&changed_from=" + net::url_encode(message),
                             "", kCallTimeoutMs, kReconnectWindowS);
    if (!job.ok()) {
      fail(job.error());
      return false;
    }
  }
}

// Task output as a terminal may show it (control sequences escaped) unless `raw`. A
// read that ends in the lead byte of a C1 control (0xc2) keeps that byte for the next
// read, so a control split between two reads is still escaped.
class ShownOutput {
 public:
  ShownOutput(LimitedOutput& out, bool raw) : out_(out), raw_(raw) {}

  // False once the output's limit is reached.
  bool write(std::string_view bytes) {
    if (raw_) return out_.write(bytes);
    std::string joined;
    if (!carry_.empty()) {
      joined = carry_ + std::string(bytes);
      bytes = joined;
      carry_.clear();
    }
    if (!bytes.empty() && static_cast<unsigned char>(bytes.back()) == 0xc2) {
      carry_.assign(1, bytes.back());
      bytes.remove_suffix(1);
    }
    if (terminal_safe_as_is(bytes, true)) return out_.write(bytes);
    return out_.write(terminal_safe(bytes, true));
  }
  // The byte kept back, once the output is over.
  void finish() {
    if (!carry_.empty()) out_.write(terminal_safe(carry_, true));
    carry_.clear();
    out_.flush();
  }

 private:
  LimitedOutput& out_;
  bool raw_;
  std::string carry_;
};

}  // namespace

bool LimitedOutput::write(std::string_view bytes) {
  if (cut_) return false;
  if (limit_ > 0 && written_ + static_cast<int64_t>(bytes.size()) > limit_) {
    size_t fits = static_cast<size_t>(limit_ - written_);
    if (whole_lines_) {
      const size_t last = bytes.substr(0, fits).rfind('\n');
      fits = last == std::string_view::npos ? 0 : last + 1;
    }
    out_.write(bytes.data(), static_cast<std::streamsize>(fits));
    out_.flush();
    written_ = limit_;
    cut_ = true;
    std::cerr << "\n[... cut at " << size_text(limit_) << "; --limit-bytes 0 for all]\n";
    return false;
  }
  out_.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  written_ += static_cast<int64_t>(bytes.size());
  return true;
}

bool stream_task_log(const Connection& conn, const std::string& job_id, int task_index, std::optional<int> attempt,
                     bool follow, bool raw, LimitedOutput& out) {
  int64_t offset = 0;
  ShownOutput shown(out, raw);
  for (;;) {
    std::string target = "/api/jobs/" + job_id + "/logs?task_index=" + std::to_string(task_index) +
                         "&offset=" + std::to_string(offset) + (follow ? "&wait_ms=" + std::to_string(kWaitMs) : "");
    if (attempt) target += "&attempt=" + std::to_string(*attempt);
    auto res = call_raw_retrying(conn, "GET", target, kCallTimeoutMs, kReconnectWindowS);
    if (!res.ok()) {
      fail(res.error());
      return false;
    }
    if (!shown.write(res->body)) return true;
    out.flush();
    offset = int_header(res.value(), "X-AG-Next-Offset").value_or(offset + static_cast<int64_t>(res->body.size()));
    if ((!follow && res->body.empty()) || header_value(res.value(), "X-AG-Log-Complete") == "1") {
      shown.finish();
      return true;
    }
  }
}

LogsPrinted print_job_logs(const Connection& conn, const std::string& job_id, const LinesOptions& options,
                           std::ostream& out) {
  keep_freed_memory();  // a page of several MiB after another
  bool ended_unstarted = false;
  if (!options.attempt) {
    if (!wait_until_started(conn, job_id, options.follow, &ended_unstarted)) return LogsPrinted::kFailed;
    if (ended_unstarted) return LogsPrinted::kWhole;
  }
  LimitedOutput limited(out, options.limit_bytes, options.json);
  // One task's bytes as they are, unless its lines are asked for.
  if (options.task_index && options.tail == 0 && !options.since_ms && !options.timestamps && !options.json) {
    if (!stream_task_log(conn, net::url_encode(job_id), *options.task_index, options.attempt, options.follow,
                         options.raw, limited)) {
      return LogsPrinted::kFailed;
    }
    return limited.cut() ? LogsPrinted::kCut : LogsPrinted::kWhole;
  }
  std::optional<int> attempt = options.attempt;
  std::string cursor;
  ShownOutput shown(limited, options.raw || options.json);
  for (bool first = true;; first = false) {
    std::string target = "/api/jobs/" + net::url_encode(job_id) + "/lines?format=";
    target += options.json ? "jsonl" : "text";
    if (options.timestamps) target += "&timestamps=1";
    if (attempt) target += "&attempt=" + std::to_string(*attempt);
    if (options.task_index) target += "&task_index=" + std::to_string(*options.task_index);
    if (first && options.tail > 0) target += "&tail=" + std::to_string(options.tail);
    if (first && options.since_ms) target += "&since_ms=" + std::to_string(*options.since_ms);
    if (!first) target += "&from=" + cursor;
    if (options.follow) target += "&wait_ms=" + std::to_string(kWaitMs);  // the head answers when lines come
    auto page = call_raw_retrying(conn, "GET", target, kCallTimeoutMs, kReconnectWindowS);
    if (!page.ok()) {
      fail(page.error());
      return LogsPrinted::kFailed;
    }
    const std::string& body = page->body;
    if (!shown.write(body)) return LogsPrinted::kCut;
    limited.flush();
    attempt = static_cast<int>(int_header(page.value(), "X-AG-Attempt").value_or(0));  // a follow stays with it
    cursor = header_value(page.value(), "X-AG-Next");
    const bool more = header_value(page.value(), "X-AG-More") == "1";
    const bool complete = header_value(page.value(), "X-AG-Log-Complete") == "1";
    if (more) continue;
    if (!options.follow || complete) {
      shown.finish();
      return LogsPrinted::kWhole;
    }
    if (body.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(kFollowPollMs));
  }
}

}  // namespace ag::cli
