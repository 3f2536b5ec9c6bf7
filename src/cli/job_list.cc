// ag list-jobs: the job list as the head pages it (GET /api/jobs, newest first), with
// its filters, in a table or as JSON. Rows are never hidden silently: when more jobs
// match than are shown, stderr says how many and how to see them.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <iostream>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "cli/api_client.h"
#include "cli/commands.h"
#include "cli/session.h"
#include "cli/table.h"
#include "cli/time_args.h"
#include "net/http_types.h"

namespace ag::cli {
namespace {

using nlohmann::json;

// The head's largest page.
constexpr int64_t kPage = 1000;

std::string text_of(const json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

// A table cell: "-" for nothing, so that every row has every column.
std::string cell(std::string text) { return text.empty() ? "-" : text; }

// "PENDING #2", "PENDING (held)", "PENDING (array)", ...
std::string state_column(const json& j) {
  std::string state = text_of(j, "state");
  if (j.contains("queue_position")) state += " #" + j["queue_position"].dump();
  const std::string kind = text_of(j, "pending_kind");
  if (kind == "held") state += " (held)";
  if (kind == "dependency") state += " (after)";
  if (kind == "begin_time") state += " (begin)";
  if (kind == "preempting") state += " (preempting)";
  if (kind == "array_limit") state += " (array)";
  return state;
}

// Why it waits or how it ended, in a few words.
std::string message_column(const json& j) {
  const std::string state = text_of(j, "state");
  if (state == "RUNNING" || state == "SUCCEEDED") return "";
  std::string message = text_of(j, "message");
  if (message.size() > 40) message = message.substr(0, 37) + "...";
  return message;
}

// The query of the filters asked, or the error that says which flag is wrong.
Result<std::string> filter_query(const Connection& conn, const ListJobsOptions& options) {
  std::string query;
  const auto add = [&query](const std::string& name, const std::string& value) {
    if (!value.empty()) query += (query.empty() ? "?" : "&") + name + "=" + net::url_encode(value);
  };
  if (options.mine && !options.user.empty()) return invalid_argument("give --mine or --user, not both");
  std::string user = options.user;
  if (options.mine) {
    auto me = call_json(conn, "GET", "/api/whoami");
    if (!me.ok()) return me.error();
    user = me.value().value("name", "");
  }
  add("state", options.state);
  add("owner", user);
  add("name", options.name);
  add("queue", options.queue);
  if (!options.since.empty()) {
    const auto now_ms = static_cast<int64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                 std::chrono::system_clock::now().time_since_epoch())
                                                 .count());
    auto since_ms = parse_since(options.since, now_ms);
    if (!since_ms.ok()) return since_ms.error();
    if (since_ms.value() > now_ms) {
      return invalid_argument("--since " + options.since + " is in the future: give a time ago (1d) or a UTC time "
                                                           "already past");
    }
    add("since_ms", std::to_string(since_ms.value()));
  }
  return query;
}

// The matching jobs, newest first: pages of up to 1000, each after the last one's
// `next`, until `want` of them. `total`: how many match in all.
Result<json> fetch_jobs(const Connection& conn, const std::string& query, int64_t want, int64_t* total) {
  json jobs = json::array();
  std::string next;
  do {
    const int64_t page = std::min<int64_t>(kPage, want - static_cast<int64_t>(jobs.size()));
    std::string target = "/api/jobs" + query + (query.empty() ? "?" : "&") + "limit=" + std::to_string(page) +
                         (next.empty() ? "" : "&after=" + net::url_encode(next));
    auto answer = call_json(conn, "GET", target);
    if (!answer.ok()) return answer.error();
    if (next.empty()) *total = answer.value().value("total", int64_t{0});
    for (auto& job : answer.value()["jobs"]) jobs.push_back(std::move(job));
    next = answer.value()["next"].is_string() ? answer.value()["next"].get<std::string>() : "";
  } while (!next.empty() && static_cast<int64_t>(jobs.size()) < want);
  return jobs;
}

int refused(const Error& error) {
  return error.code == ErrorCode::kInvalidArgument ? usage_error(error.message) : fail(error);
}

}  // namespace

int list_jobs(const ConnectionOptions& options, const ListJobsOptions& asked) {
  if (asked.all && asked.limit != kPage) return usage_error("give --all or --limit, not both");
  auto conn = resolve_connection(options);
  if (!conn.ok()) return fail(conn.error());
  auto query = filter_query(conn.value(), asked);
  if (!query.ok()) return refused(query.error());
  int64_t total = 0;
  auto fetched = fetch_jobs(conn.value(), query.value(), asked.all ? INT64_MAX : asked.limit, &total);
  if (!fetched.ok()) return fail(fetched.error());
  const json& jobs = fetched.value();
  const auto shown = static_cast<int64_t>(jobs.size());
  if (options.output == "json") {
    std::cout << json{{"jobs", jobs}, {"total", total}}.dump(2) << "\n";
  } else {
    Table table({"JOB", "NAME", "OWNER", "QUEUE", "STATE", "PRIORITY", "TASKS", "SUBMITTED", "DURATION", "MESSAGE",
                 "ENTRYPOINT"});
    for (const auto& j : jobs) {
      const int64_t started = j["started_ms"].get<int64_t>(), finished = j["finished_ms"].get<int64_t>();
      std::string entry = text_of(j, "entrypoint");
      if (entry.size() > 48) entry = entry.substr(0, 45) + "...";
      const std::string queue = text_of(j, "queue");
      table.add({text_of(j, "job_id"), cell(text_of(j, "name")), cell(text_of(j, "owner")), cell(queue),
                 state_column(j), j.contains("priority") ? j["priority"].dump() : "0", j["num_workers"].dump(),
                 format_time_ms(j["submitted_ms"].get<int64_t>()),
                 started && finished ? format_duration_ms(finished - started) : "-", cell(message_column(j)), entry});
    }
    table.print(std::cout);
  }
  // Never a silent cut: say what was left out (on stderr, so that a pipe gets rows only).
  if (shown < total) {
    std::cerr << "showing " << shown << " of " << total << " jobs (--all for every job, --limit N for more)\n";
  }
  return 0;
}

int stop_jobs(const ConnectionOptions& options, const StopJobsOptions& asked) {
  const bool chosen = asked.mine || !asked.state.empty();
  if (chosen && !asked.job_ids.empty()) return usage_error("give job ids, or --mine / --state to choose them, not both");
  if (!chosen && asked.job_ids.empty()) {
    return usage_error("give a job id (or several), or --mine / --state to choose the jobs to stop");
  }
  if (!chosen) {
    int rc = 0;
    for (const auto& id : asked.job_ids) rc = std::max(rc, stop_job(options, id));
    return rc;
  }
  std::string state = asked.state;
  for (auto& c : state) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (!state.empty() && state != "PENDING" && state != "RUNNING") {
    return usage_error("--state " + asked.state + ": only PENDING or RUNNING jobs can be stopped");
  }
  auto conn = resolve_connection(options);
  if (!conn.ok()) return fail(conn.error());
  ListJobsOptions filter;
  filter.mine = asked.mine;
  filter.state = state;
  auto query = filter_query(conn.value(), filter);
  if (!query.ok()) return refused(query.error());
  int64_t total = 0;
  auto fetched = fetch_jobs(conn.value(), query.value(), INT64_MAX, &total);
  if (!fetched.ok()) return fail(fetched.error());
  std::vector<std::string> ids;
  for (const auto& job : fetched.value()) {
    const std::string s = text_of(job, "state");
    if (s == "PENDING" || s == "RUNNING") ids.push_back(text_of(job, "job_id"));
  }
  const std::string which = (state.empty() ? "unfinished" : state) + " job(s)" + (asked.mine ? " of yours" : "");
  if (ids.empty()) {
    std::cerr << "no " << which << " to stop; nothing was stopped\n";
    return 0;
  }
  if (!asked.yes) {
    if (!::isatty(STDIN_FILENO)) {
      return usage_error("this stops " + std::to_string(ids.size()) + " " + which + ": add -y to do so without being "
                                                                                    "asked");
    }
    std::cerr << "Stop " << ids.size() << " " << which << "? [y/N] " << std::flush;
    std::string answer;
    std::getline(std::cin, answer);
    if (answer != "y" && answer != "Y" && answer != "yes") {
      std::cerr << "nothing was stopped\n";
      return 1;
    }
  }
  int rc = 0;
  for (const auto& id : ids) rc = std::max(rc, stop_job(options, id));
  if (options.output != "json") std::cout << "Stop requested for " << ids.size() << " " << which << "\n";
  return rc;
}

}  // namespace ag::cli
