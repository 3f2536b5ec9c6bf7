// ag submit, status, list-nodes, list-jobs, logs, stop-job: the commands that talk to
// a running head over its REST API.
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <thread>

#include "api/job_spec.h"
#include "api/job_state.h"
#include "cli/api_client.h"
#include "cli/array_view.h"
#include "cli/commands.h"
#include "cli/package_builder.h"
#include "cli/time_args.h"
#include "cli/table.h"
#include "cli/units.h"
#include "common/ids.h"
#include "net/http_types.h"
#include "net/tls.h"

namespace ag::cli {
namespace {

using nlohmann::json;

// How long a command that has reached the head keeps retrying while it restarts.
constexpr double kReconnectWindowS = 30;

// The head took the request and went away before it answered (a refused connection
// never reached it): whether it acted is unknown, and a call safe to repeat asks again.
bool cut_off_before_answer(const Error& error) {
  return error.code == ErrorCode::kUnavailable && error.message.find("refused") == std::string::npos;
}

bool json_output(const ConnectionOptions& conn) { return conn.output == "json"; }

std::string str(const json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return "-";
  if (j[key].is_string()) return j[key].get<std::string>().empty() ? "-" : j[key].get<std::string>();
  return j[key].dump();
}

// The state a job document reports; nullopt when it names none this CLI knows (a newer
// head), which callers treat as not finished yet.
std::optional<api::JobState> job_state(const json& job) {
  auto it = job.find("state");
  if (it == job.end() || !it->is_string()) return std::nullopt;
  return api::parse_job_state(it->get_ref<const std::string&>());
}

bool is_terminal(const json& job) {
  std::optional<api::JobState> state = job_state(job);
  return state && api::is_terminal(*state);
}

std::string cpus_text(double cpus) {
  char buf[32];
  std::snprintf(buf, sizeof buf, cpus == std::floor(cpus) ? "%.0f" : "%.2f", cpus);
  return buf;
}

// While the attempt's tasks wait for their image (pulled on their nodes), the job's
// events say how the pulls go: printed here until every task has started or ended.
// Returns false when the head cannot be reached.
bool show_image_pulls(const Connection& conn, const std::string& job_id, int attempt, size_t* events_seen) {
  for (;;) {
    auto events = call_json(conn, "GET", "/api/jobs/" + job_id + "/events");
    if (!events.ok()) return false;
    const json& list = events.value()["events"];
    for (size_t i = *events_seen; i < list.size(); ++i) {
      const std::string message = list[i]["message"].get<std::string>();
      if (message.find(": pulling ") != std::string::npos) std::cerr << terminal_safe(message, false) << "\n";
    }
    *events_seen = list.size();
    auto job = call_json(conn, "GET", "/api/jobs/" + job_id);
    if (!job.ok()) return false;
    const json& attempts = job.value()["attempts"];
    if (is_terminal(job.value()) || static_cast<int>(attempts.size()) <= attempt) return true;
    bool starting = false;
    for (const auto& task : attempts[static_cast<size_t>(attempt)]["tasks"]) {
      starting = starting || task["state"].get<std::string>() == "STARTING";
    }
    if (!starting) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
}

// A one-line progress bar on stderr while a large package uploads; only on a
// terminal, so that logs and pipes get the single "Uploading ..." line.
class UploadProgress {
 public:
  explicit UploadProgress(size_t total) : total_(total), shown_(total >= (8u << 20) && ::isatty(2)) {}

  void update(size_t sent) {
    if (!shown_) return;
    int percent = static_cast<int>(100.0 * static_cast<double>(sent) / static_cast<double>(total_));
    if (percent == last_percent_) return;
    last_percent_ = percent;
    constexpr int kWidth = 30;
    int filled = percent * kWidth / 100;
    std::fprintf(stderr, "\r  [%s%s] %3d%%  %.1f / %.1f MiB", std::string(filled, '#').c_str(),
                 std::string(kWidth - filled, '.').c_str(), percent, static_cast<double>(sent) / (1 << 20),
                 static_cast<double>(total_) / (1 << 20));
    std::fflush(stderr);
  }

  void finish() {
    if (shown_ && last_percent_ >= 0) std::fputc('\n', stderr);
  }

 private:
  size_t total_;
  bool shown_;
  int last_percent_ = -1;
};

// Packs and uploads a working_dir unless the head already has it; returns the
// runtime_env reference ("sha256:<hex>").
Result<std::string> upload_working_dir(const Connection& conn, const std::string& dir,
                                       const std::vector<std::string>& excludes) {
  auto package = pack_directory(dir, excludes);
  if (!package.ok()) return package.error();
  std::string hash = package->sha256;
  auto limits = call_json(conn, "GET", "/api/packages");
  if (!limits.ok()) return limits.error();
  int64_t limit = limits.value().value("max_package_bytes", int64_t{0});
  if (limit > 0 && static_cast<int64_t>(package->bytes.size()) > limit) {
    std::string biggest;
    for (const auto& [name, size] : package->biggest) {
      biggest += "\n  " + name + " (" + std::to_string(size >> 20) + " MiB)";
    }
    return invalid_argument("working_dir '" + dir + "' packs to " + std::to_string(package->bytes.size() >> 20) +
                            " MiB; the head accepts at most " + std::to_string(limit >> 20) +
                            " MiB. Exclude what the job does not need (--exclude PATTERN or .gitignore). "
                            "Largest files:" + biggest);
  }
  const std::string what = std::to_string(package->files) + " files, " +
                           format_size(static_cast<int64_t>(package->bytes.size()));
  const std::string skipped = package->skipped_files == 0
                                  ? ""
                                  : "; skipped " + std::to_string(package->skipped_files) + " files (" +
                                        format_size(package->skipped_bytes) + ") by .gitignore/--exclude";
  auto present = call_raw(conn, "HEAD", "/api/packages/" + hash);
  if (present.ok()) {  // uploaded before: nothing to send
    std::cerr << "working_dir " << dir << " unchanged: reusing sha256:" << hash.substr(0, 12) << " (" << what
              << skipped << ")\n";
    return "sha256:" + hash;
  }
  if (present.error().code != ErrorCode::kNotFound) return present.error();
  std::cerr << "Uploading working_dir " << dir << " (" << what << ", sha256:" << hash.substr(0, 12) << skipped
            << ")\n";
  UploadProgress bar(package->bytes.size());
  auto stored = upload_json(conn, "PUT", "/api/packages/" + hash, package->bytes, 10 * 60 * 1000,
                            [&bar](size_t sent) { bar.update(sent); });
  bar.finish();
  if (!stored.ok()) return stored.error();
  return "sha256:" + hash;
}

// A FAILED job's failing task and its last lines of output, indented, unless there
// are none or `streamed_task` (whose whole log was just shown) is the one.
void print_failure(std::ostream& out, const json& job, const std::string& indent, int streamed_task = -1) {
  if (!job.contains("failure") || !job["failure"].is_object()) return;
  const json& failure = job["failure"];
  const std::string lines = failure.value("last_lines", "");
  if (lines.empty() || failure["task_index"].get<int>() == streamed_task) return;
  out << indent << "Last lines of task " << failure["task_index"] << " (attempt " << failure["attempt"] << ", node "
      << terminal_safe(failure["node_id"].get<std::string>(), false) << "):\n";
  std::istringstream in(lines);
  for (std::string line; std::getline(in, line);) out << indent << "  " << terminal_safe(line, false) << "\n";
}

}  // namespace

int submit(const ConnectionOptions& options, const SubmitOptions& submit) {
  auto conn = resolve_connection(options);
  if (!conn.ok()) return fail(conn.error());
  if (auto usage = check_submit_usage(submit)) {
    return usage_error(usage->message);
  }
  if (submit.interactive_tty && (!::isatty(0) || !::isatty(1))) {
    return usage_error("-t needs a terminal here (stdin and stdout), and this ag runs without one; drop -t "
                       "(-i alone passes input through a pipe)");
  }
  // Checked before anything is uploaded: a value the head would refuse fails here,
  // with the head's message.
  auto spec = spec_from_submit_options(
      submit, std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
                  .count());
  if (!spec.ok()) return fail(spec.error());
  if (!submit.working_dir.empty()) {
    auto ref = upload_working_dir(conn.value(), submit.working_dir, submit.excludes);
    if (!ref.ok()) return fail(ref.error());
    spec->runtime_env.working_dir = ref.value();
  }

  // A client-chosen id makes the submit safe to repeat: if the head restarts while the
  // request is in flight, the retry finds the job the first try created.
  spec->submission_id = "cli-" + random_hex(12);
  const std::string body = api::to_json(spec.value()).dump();
  auto created = call_json(conn.value(), "POST", "/api/jobs", body);
  if (!created.ok() && cut_off_before_answer(created.error())) {
    created = call_json_retrying(conn.value(), "POST", "/api/jobs", body, 30000, kReconnectWindowS);
  }
  if (!created.ok()) return fail(created.error());
  std::string job_id = created.value()["job_id"].get<std::string>();
  if (json_output(options) && (submit.no_wait || spec->array)) {
    std::cout << created.value().dump() << "\n";
    return 0;
  }
  if (spec->array) {
    // Many jobs: one id for all of them, and where to look.
    const auto& indices = spec->array->indices;
    std::cerr << "Array " << job_id << " submitted: " << indices.size() << " jobs, " << job_id << "_"
              << indices.front() << " to " << job_id << "_" << indices.back()
              << (spec->array->max_running > 0 ? ", at most " + std::to_string(spec->array->max_running) + " at once" : "")
              << ". See them with `ag status " << job_id << "`, their output with `ag logs " << job_id << "`.\n";
    std::cout << job_id << "\n";
    return 0;
  }
  std::cerr << "Job " << job_id << " submitted (" << submit.num_workers << " task(s)).\n";
  if (spec->interactive) {
    return run_interactive(options, conn.value(), job_id, spec->entrypoint, submit.interactive_stdin,
                           submit.interactive_tty);
  }
  if (submit.no_wait) {
    std::cout << job_id << "\n";
    return 0;
  }
  std::cerr << (submit.all_ranks ? "Streaming every task's log" : "Streaming task 0's log")
            << "; Ctrl-C stops watching (the job keeps running; stop it with `ag stop-job "
            << job_id << "`).\n";
  // Follow task 0 of every attempt until the job ends.
  json job;
  int streamed = -1;  // the last attempt whose task-0 log was printed
  // While the job waits, why: said once a job has waited half a second (one placed at
  // once says nothing), and again each time the reason changes.
  std::optional<std::string> shown_reason;
  size_t events_seen = 0;  // of the job's events, those show_image_pulls looked at
  for (int attempt = 0;;) {
    std::string query = "/wait?attempts_at_least=" + std::to_string(attempt + 1);
    if (shown_reason) {
      query += "&timeout_ms=25000&changed_from=";
      query += net::url_encode(*shown_reason);
    } else {
      query += "&timeout_ms=500";
    }
    std::string path = "/api/jobs/" + job_id;
    path += query;
    auto waited = call_json_retrying(conn.value(), "GET", path, "", 40000, kReconnectWindowS);
    if (!waited.ok()) return fail(waited.error());
    job = waited.value();
    bool terminal = is_terminal(job);
    int attempts = job["num_attempts"].get<int>();
    if (attempts <= attempt) {
      if (terminal) break;  // stopped before it was ever placed
      const std::string reason = job["message"].get<std::string>();
      if (!shown_reason || *shown_reason != reason) {
        std::cerr << "Pending: " << terminal_safe(reason, false) << "\n";
        shown_reason = reason;
      }
      continue;
    }
    shown_reason.reset();
    if (streamed < attempt && !spec->runtime_env.image.empty() &&
        !show_image_pulls(conn.value(), job_id, attempt, &events_seen)) {
      return fail(Error{ErrorCode::kUnavailable, "lost the head while the job's image was being pulled"});
    }
    if (streamed < attempt) {
      // With -o json, stdout carries only the job's JSON at the end.
      std::ostream& log_out = json_output(options) ? std::cerr : std::cout;
      if (submit.all_ranks) {
        LinesOptions all;
        all.attempt = attempt;
        all.follow = true;
        if (print_job_logs(conn.value(), job_id, all, log_out) == LogsPrinted::kFailed) return 1;
      } else if (LimitedOutput whole(log_out, 0); !stream_task_log(conn.value(), job_id, 0, attempt, true, false, whole)) {
        return 1;
      }
      streamed = attempt;
    }
    // This attempt's log is complete: either the job ended or a retry follows.
    auto after = call_json_retrying(conn.value(), "GET", "/api/jobs/" + job_id +
                                        "/wait?timeout_ms=25000&attempts_at_least=" + std::to_string(attempt + 2),
                                    "", 40000, kReconnectWindowS);
    if (!after.ok()) return fail(after.error());
    job = after.value();
    terminal = is_terminal(job);
    if (job["num_attempts"].get<int>() > attempt + 1) {
      std::cerr << "Attempt " << attempt << " failed; following attempt " << attempt + 1 << ".\n";
      ++attempt;
      continue;
    }
    if (terminal) break;
  }
  std::string state = job["state"].get<std::string>();
  if (json_output(options)) {
    std::cout << job.dump() << "\n";
  } else {
    std::cerr << "Job " << job_id << " " << state;
    if (!job["message"].get<std::string>().empty()) {
      std::cerr << ": " << terminal_safe(job["message"].get<std::string>(), false);
    }
    std::cerr << "\n";
    print_failure(std::cerr, job, "  ", submit.all_ranks ? -1 : 0);
    if (job.contains("failure") && job["failure"].is_object()) {
      auto hint = working_dir_hint(submit, job["failure"].value("last_lines", ""), [](const std::string& path) {
        std::error_code ec;
        return std::filesystem::is_regular_file(path, ec);
      });
      if (hint) std::cerr << "hint: " << *hint << "\n";
    }
  }
  return job_state(job) == api::JobState::kSucceeded ? 0 : 1;
}

int cluster_status(const ConnectionOptions& options) {
  auto conn = resolve_connection(options);
  if (!conn.ok()) return fail(conn.error());
  auto summary = call_json(conn.value(), "GET", "/api/cluster");
  if (!summary.ok()) return fail(summary.error());
  const json& s = summary.value();
  if (json_output(options)) {
    std::cout << s.dump(2) << "\n";
    return 0;
  }
  // Clear text where it can be read: a head without TLS, or this connection to another
  // machine without it.
  const bool head_tls = s.value("tls", true);
  const bool clear_here = !conn->endpoint.tls() && !net::is_loopback_host(conn->endpoint.host);
  std::string security = !head_tls ? "OFF: the head runs --insecure; tokens and data travel in clear text between machines"
                         : clear_here ? "OFF on this connection (--insecure): your token travels in clear text"
                         : conn->endpoint.tls() ? "on (verified against the cluster CA)"
                                                : "on for other machines (this connection stays on this machine)";
  bool warn = !head_tls || clear_here;
  const bool color = warn && ::isatty(1);
  std::string role;
  if (s.contains("head") && s["head"].value("store", "") == "postgresql") {
    // Heads sharing a store: the one that answered leads (standbys refuse this call).
    role = " (leads, epoch " + std::to_string(s["head"].value("epoch", int64_t{0})) + "; store shared with standby heads, lease " +
           format_duration(s["head"].value("lease_ms", int64_t{0}) / 1000.0) + ")";
  }
  std::cout << "Head: " << conn->endpoint.to_string() << role
            << (s.contains("version") ? ", " + str(s, "version") : "") << "\n"
            << "TLS: " << (color ? "\033[1;31m" : "") << security << (color ? "\033[0m" : "") << "\n"
            << "Nodes: " << s["nodes_alive"] << " alive of " << s["nodes_total"] << "\n"
            << "CPUs: " << cpus_text(s["allocated"]["num_cpus"].get<double>()) << " / "
            << cpus_text(s["resources"]["num_cpus"].get<double>()) << " allocated\n"
            << "GPUs: " << s["allocated"]["num_gpus"] << " / " << s["resources"]["num_gpus"] << " allocated\n"
            << "Memory: " << (s["allocated"]["memory_bytes"].get<int64_t>() >> 30) << " / "
            << (s["resources"]["memory_bytes"].get<int64_t>() >> 30) << " GiB allocated\n"
            << "Jobs:";
  for (api::JobState st : api::kJobStates) {
    std::cout << " " << api::to_string(st) << " " << s["jobs"][api::to_string(st)];
  }
  std::cout << "\n";
  for (const auto& n : s.value("unhealthy_nodes", json::array())) {
    std::cout << "UNHEALTHY: " << str(n, "node_id") << ": " << terminal_safe(str(n, "reason"), false)
              << " (`ag list-nodes`; `ag resume " << str(n, "node_id") << "` clears it)\n";
  }
  return 0;
}

int job_status(const ConnectionOptions& options, const std::string& job_id, bool verbose) {
  auto conn = resolve_connection(options);
  if (!conn.ok()) return fail(conn.error());
  auto job = call_json(conn.value(), "GET", "/api/jobs/" + net::url_encode(job_id));
  if (!job.ok()) return fail(job.error());
  if (is_array_view(job.value()) && !json_output(options)) {
    print_array_status(std::cout, job.value());
    return 0;
  }
  json events;
  if (verbose && !is_array_view(job.value())) {
    auto ev = call_json(conn.value(), "GET", "/api/jobs/" + net::url_encode(job_id) + "/events");
    if (!ev.ok()) return fail(ev.error());
    events = ev.value()["events"];
  }
  const json& j = job.value();
  if (json_output(options)) {
    json out = j;
    if (verbose) out["events"] = events;
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  // What users wrote (names, commands) and what tasks caused (messages) is shown, not
  // obeyed by the terminal.
  const std::string name = terminal_safe(j["name"].get<std::string>(), false);
  std::cout << "Job " << j["job_id"].get<std::string>() << (name.empty() ? "" : " (" + name + ")") << ": "
            << j["state"].get<std::string>() << "\n";
  if (!j["message"].get<std::string>().empty()) {
    std::cout << "  " << terminal_safe(j["message"].get<std::string>(), false) << "\n";
  }
  print_failure(std::cout, j, "  ");
  std::cout << "  Owner: " << str(j, "owner") << "\n";
  std::cout << "  Entrypoint: " << terminal_safe(j["entrypoint"].get<std::string>(), false) << "\n"
            << "  Tasks: " << j["num_workers"] << " x {" << cpus_text(j["num_cpus"].get<double>()) << " CPU, "
            << j["num_gpus"] << " GPU}\n"
            << "  Submitted: " << format_time_ms(j["submitted_ms"].get<int64_t>())
            << "  Started: " << format_time_ms(j["started_ms"].get<int64_t>())
            << "  Finished: " << format_time_ms(j["finished_ms"].get<int64_t>()) << "\n";
  for (const auto& a : j["attempts"]) {
    std::cout << "  Attempt " << a["attempt"] << " (master " << a["master_addr"].get<std::string>() << ":"
              << a["master_port"] << ")"
              << (a["failure_reason"].get<std::string>().empty() ? "" : ": " + a["failure_reason"].get<std::string>())
              << "\n";
    Table table({"    TASK", "STATE", "NODE", "ADDRESS", "GPUS", "PID", "EXIT", "REASON"});
    for (const auto& t : a["tasks"]) {
      std::string gpus;
      for (const auto& g : t["gpu_ids"]) gpus += (gpus.empty() ? "" : ",") + g.dump();
      std::string exit = !t["signal"].is_null() ? "signal " + t["signal"].dump() : str(t, "exit_code");
      table.add({"    " + t["task_index"].dump(), t["state"].get<std::string>(), t["node_id"].get<std::string>(),
                 t["node_address"].get<std::string>(), gpus.empty() ? "-" : gpus, t["pid"].dump(), exit, str(t, "reason")});
    }
    table.print(std::cout);
  }
  if (verbose) {
    std::cout << "  Events:\n";
    for (const auto& e : events) {
      std::cout << "    " << format_time_ms(e["time_ms"].get<int64_t>()) << "  " << terminal_safe(e["message"].get<std::string>(), false) << "\n";
    }
  }
  return 0;
}

namespace {

// "gpu=a100,zone=b", or "-".
std::string labels_text(const json& labels) {
  std::string out;
  for (const auto& [key, value] : labels.items()) out += (out.empty() ? "" : ",") + key + "=" + value.get<std::string>();
  return out.empty() ? "-" : terminal_safe(out, false);
}

// "memory, cpu (cgroup v1)" -> "memory,cpu"; "not enforced: ..." -> "none".
std::string limits_text(const std::string& summary) {
  if (summary.empty()) return "-";
  if (summary.rfind("not enforced", 0) == 0) return "none";
  std::string out;
  for (char c : summary.substr(0, summary.find(" ("))) {
    if (c != ' ') out.push_back(c);
  }
  return out;
}

}  // namespace

int list_nodes(const ConnectionOptions& options, bool verbose) {
  auto conn = resolve_connection(options);
  if (!conn.ok()) return fail(conn.error());
  auto nodes = call_json(conn.value(), "GET", "/api/nodes");
  if (!nodes.ok()) return fail(nodes.error());
  if (json_output(options)) {
    std::cout << nodes.value().dump(2) << "\n";
    return 0;
  }
  std::vector<std::string> columns = {"NODE", "STATE", "ADDRESS", "HOSTNAME", "CPUS", "GPUS", "MEMORY", "LIMITS",
                                      "CONTAINERS", "LABELS"};
  if (verbose) columns.insert(columns.begin() + 3, "INTERFACE");
  Table table(columns);
  for (const auto& n : nodes.value()["nodes"]) {
    const json& r = n["resources"];
    const json& a = n["allocated"];
    const bool unhealthy = n.contains("unhealthy") && n["unhealthy"].is_object();
    const std::string state = n["state"].get<std::string>() + (n.value("draining", false) ? ", draining" : "") +
                              (unhealthy ? ", UNHEALTHY" : "");
    std::vector<std::string> row = {n["node_id"].get<std::string>(), state, n["address"].get<std::string>(),
               n["hostname"].get<std::string>(),
               cpus_text(a["num_cpus"].get<double>()) + "/" + cpus_text(r["num_cpus"].get<double>()),
               a["num_gpus"].dump() + "/" + r["num_gpus"].dump(),
               std::to_string(a["memory_bytes"].get<int64_t>() >> 30) + "/" + std::to_string(r["memory_bytes"].get<int64_t>() >> 30) + " GiB",
               limits_text(str(n, "limits")), terminal_safe(str(n, "container_engine"), false),
               labels_text(n.value("labels", json::object()))};
    if (verbose) row.insert(row.begin() + 3, str(n, "network_interface"));
    table.add(std::move(row));
  }
  table.print(std::cout);
  // Why each unhealthy node is: what its check said, or its GPU's error.
  for (const auto& n : nodes.value()["nodes"]) {
    if (!n.contains("unhealthy") || !n["unhealthy"].is_object()) continue;
    std::cout << "\n" << str(n, "node_id") << " is UNHEALTHY since "
              << format_time_ms(n["unhealthy"].value("since_ms", int64_t{0})) << ": "
              << terminal_safe(n["unhealthy"].value("reason", ""), true) << "\n";
  }
  return 0;
}

int logs(const ConnectionOptions& options, const std::string& job_id, const LinesOptions& lines,
         const std::string& since) {
  LinesOptions asked = lines;
  if (!since.empty()) {
    const auto now_ms = static_cast<int64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count());
    auto since_ms = parse_since(since, now_ms);
    if (!since_ms.ok()) return usage_error(since_ms.error().message);
    if (since_ms.value() > now_ms) {
      return usage_error("--since " + since + " is in the future: give a time ago (10m) or a UTC time already past");
    }
    asked.since_ms = since_ms.value();
  }
  auto conn = resolve_connection(options);
  if (!conn.ok()) return fail(conn.error());
  // A whole array: each element's output in turn.
  if (looks_like_job_id(job_id) && job_id.size() == 16) {
    auto answer = call_json(conn.value(), "GET", "/api/jobs/" + job_id);
    if (answer.ok() && is_array_view(answer.value())) {
      const LogsPrinted printed = print_array_lines(conn.value(), answer.value(), asked, std::cout);
      return printed == LogsPrinted::kWhole ? 0 : printed == LogsPrinted::kCut ? 3 : 1;
    }
  }
  switch (print_job_logs(conn.value(), job_id, asked, std::cout)) {
    case LogsPrinted::kWhole:
      return 0;
    case LogsPrinted::kCut:
      return 3;
    case LogsPrinted::kFailed:
      break;
  }
  return 1;
}

int head_logs() {
  auto session = read_session();
  if (!session) {
    return fail(Error{ErrorCode::kNotFound, "no head was started from this machine (session " + session_dir() + ")"});
  }
  std::ifstream in(session->data_dir + "/head.log");
  if (!in) {
    return fail(Error{ErrorCode::kNotFound, "cannot read " + session->data_dir + "/head.log"});
  }
  std::cout << in.rdbuf();
  return 0;
}

int stop_job(const ConnectionOptions& options, const std::string& job_id) {
  auto conn = resolve_connection(options);
  if (!conn.ok()) return fail(conn.error());
  const std::string target = "/api/jobs/" + net::url_encode(job_id) + "/stop";
  auto res = call_json(conn.value(), "POST", target);
  if (!res.ok() && cut_off_before_answer(res.error())) {
    // The head went away before it answered (it may be restarting): whether it stored
    // the stop is unknown, and asking again is safe. A job it ended answers as finished.
    res = call_json_retrying(conn.value(), "POST", target, "", 30000, kReconnectWindowS);
    if (!res.ok() && res.error().code == ErrorCode::kConflict) {
      auto job = call_json(conn.value(), "GET", "/api/jobs/" + net::url_encode(job_id));
      if (job.ok() && job.value().value("state", "") == "STOPPED") res = json{{"job_id", job_id}, {"state", "STOPPED"}};
    }
  }
  if (!res.ok()) return fail(res.error());
  if (json_output(options)) {
    std::cout << res.value().dump() << "\n";
  } else {
    if (res.value().contains("array_id")) {
      std::cout << "Stop requested for " << res.value()["jobs"].get<int64_t>() << " unfinished job(s) of array " << job_id
                << "\n";
    } else {
      std::cout << "Stop requested for job " << job_id << " (now " << res.value()["state"].get<std::string>() << ")\n";
    }
  }
  return 0;
}

int set_held(const ConnectionOptions& options, const std::vector<std::string>& job_ids, bool hold) {
  auto conn = resolve_connection(options);
  if (!conn.ok()) return fail(conn.error());
  int rc = 0;
  for (const auto& job_id : job_ids) {
    auto res = call_json(conn.value(), "POST", "/api/jobs/" + net::url_encode(job_id) + (hold ? "/hold" : "/release"));
    if (!res.ok()) {
      fail(res.error());
      rc = 1;
      continue;
    }
    if (json_output(options)) {
      std::cout << res.value().dump() << "\n";
    } else {
      if (res.value().contains("array_id")) {
        std::cout << (hold ? "Held " : "Released ") << res.value()["jobs"].get<int64_t>() << " job(s) of array "
                  << job_id << "\n";
      } else {
        std::cout << (hold ? "Held job " : "Released job ") << job_id << ": "
                  << res.value()["message"].get<std::string>() << "\n";
      }
    }
  }
  return rc;
}

int delete_job(const ConnectionOptions& options, const std::string& job_id) {
  auto conn = resolve_connection(options);
  if (!conn.ok()) return fail(conn.error());
  auto res = call_json(conn.value(), "DELETE", "/api/jobs/" + net::url_encode(job_id));
  if (!res.ok()) return fail(res.error());
  if (json_output(options)) {
    std::cout << res.value().dump() << "\n";
  } else {
    if (res.value().contains("array_id")) {
      std::cout << "Deleted " << res.value()["jobs"].get<int64_t>() << " job(s) of array " << job_id << "\n";
      return 0;
    }
    std::cout << "Deleted job " << res.value()["job_id"].get<std::string>()
              << (res.value()["package_removed"].get<bool>() ? " and its working_dir package" : "") << "\n";
  }
  return 0;
}

}  // namespace ag::cli
