// Interactive work: `ag alloc` (a gang that holds its resources; commands run in its
// tasks with `ag exec`), `ag release-alloc`, and what `ag submit -it` does once the job
// is submitted (task 0 holds its place, and this terminal runs the command there).
#include <signal.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "api/job_spec.h"
#include "cli/api_client.h"
#include "cli/commands.h"
#include "common/ids.h"

namespace ag::cli {
namespace {

using nlohmann::json;

std::atomic<bool> interrupted{false};

// Ctrl-C (and SIGTERM, SIGHUP) while waiting for the gang: the caller stops the job.
class InterruptWatch {
 public:
  InterruptWatch() {
    interrupted = false;
    struct sigaction action {};
    action.sa_handler = [](int) { interrupted = true; };
    sigemptyset(&action.sa_mask);
    for (int i = 0; i < 3; ++i) ::sigaction(kSignals[i], &action, &saved_[i]);
  }
  ~InterruptWatch() {
    for (int i = 0; i < 3; ++i) ::sigaction(kSignals[i], &saved_[i], nullptr);
  }
  InterruptWatch(const InterruptWatch&) = delete;
  InterruptWatch& operator=(const InterruptWatch&) = delete;

 private:
  static constexpr int kSignals[3] = {SIGINT, SIGTERM, SIGHUP};
  struct sigaction saved_[3];
};

const json& latest_tasks(const json& job) {
  static const json none = json::array();
  const json& attempts = job.contains("attempts") ? job["attempts"] : none;
  if (!attempts.is_array() || attempts.empty()) return none;
  return attempts.back().contains("tasks") ? attempts.back()["tasks"] : none;
}

// Waits until every task of the job's latest attempt (or task 0 only) runs, saying
// why the job waits whenever that changes. Errors: the job ended, it could not be
// read, or the wait was interrupted (kConflict with "interrupted").
Result<json> wait_for_tasks(const Connection& conn, const std::string& job_id, bool only_task_0) {
  std::string said;
  for (;;) {
    if (interrupted) return Error{ErrorCode::kConflict, "interrupted"};
    auto job = call_json(conn, "GET", "/api/jobs/" + net::url_encode(job_id));
    if (!job.ok()) return job.error();
    const std::string state = job.value().value("state", "");
    if (state == "SUCCEEDED" || state == "FAILED" || state == "STOPPED") {
      return Error{ErrorCode::kConflict, "job " + job_id + " ended " + state + " before it was ready: " +
                                             job.value().value("message", "") + " (ag status " + job_id + " -v)"};
    }
    const json& tasks = latest_tasks(job.value());
    bool ready = state == "RUNNING" && !tasks.empty();
    for (const auto& task : tasks) {
      if (only_task_0 && task.value("task_index", -1) != 0) continue;
      ready = ready && task.value("state", "") == "RUNNING";
    }
    if (ready) return job;
    const std::string why = state == "PENDING" ? job.value().value("message", "") : "";
    if (!why.empty() && why != said) std::cerr << "Waiting: " << why << "\n";
    said = why.empty() ? said : why;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

void stop_quietly(const Connection& conn, const std::string& job_id) {
  auto stopped = call_json(conn, "POST", "/api/jobs/" + net::url_encode(job_id) + "/stop");
  if (!stopped.ok()) std::cerr << "warning: could not stop job " << job_id << ": " << stopped.error().message << "\n";
}

std::string where(const json& job) {
  std::string nodes;
  for (const auto& task : latest_tasks(job)) {
    const std::string node = task.value("node_id", "") + " (" + task.value("node_address", "") + ")";
    if (nodes.find(node) == std::string::npos) nodes += (nodes.empty() ? "" : ", ") + node;
  }
  return nodes;
}

}  // namespace

int alloc(const ConnectionOptions& options, const AllocOptions& o) {
  auto conn = resolve_connection(options);
  if (!conn.ok()) return fail(conn.error());
  SubmitOptions as_job;
  as_job.command = {api::kHoldingEntrypoint};
  as_job.num_workers = o.num_workers;
  as_job.num_cpus = o.num_cpus;
  as_job.num_gpus = o.num_gpus;
  as_job.memory_gb = o.memory_gb;
  as_job.placement = o.placement;
  as_job.name = o.name;
  as_job.queue = o.queue;
  as_job.constraints = o.constraints;
  as_job.image = o.image;
  as_job.timeout_s = o.time_s;
  if (auto usage = check_submit_usage(as_job)) return usage_error(usage->message);
  auto spec = spec_from_submit_options(as_job, 0);
  if (!spec.ok()) return fail(spec.error());
  spec->allocation = true;
  spec->submission_id = "cli-" + random_hex(12);
  InterruptWatch watch;
  auto created = call_json(conn.value(), "POST", "/api/jobs", api::to_json(spec.value()).dump());
  if (!created.ok()) return fail(created.error());
  const std::string job_id = created.value()["job_id"].get<std::string>();
  std::cerr << "Allocation " << job_id << " submitted (" << o.num_workers << " task(s)); waiting for its nodes "
            << "(Ctrl-C gives it up).\n";
  auto ready = wait_for_tasks(conn.value(), job_id, false);
  if (!ready.ok()) {
    if (interrupted) {
      stop_quietly(conn.value(), job_id);
      std::cerr << "Allocation " << job_id << " given up before it was ready.\n";
      return 130;
    }
    return fail(ready.error());
  }
  std::cerr << "Allocation " << job_id << ": " << o.num_workers << " task(s) on " << where(ready.value())
            << (o.time_s ? ", for " + std::to_string(static_cast<int64_t>(*o.time_s)) + " s at most (--time)" : "")
            << ".\n  Run in it:  ag exec " << job_id << " --task-index N -- CMD   (a shell: ag exec -it " << job_id
            << " -- bash)\n  Release it: ag release-alloc " << job_id << "\n";
  std::cout << job_id << "\n";
  return 0;
}

int release_alloc(const ConnectionOptions& options, const std::string& job_id) {
  auto conn = resolve_connection(options);
  if (!conn.ok()) return fail(conn.error());
  auto job = call_json(conn.value(), "GET", "/api/jobs/" + net::url_encode(job_id));
  if (!job.ok()) return fail(job.error());
  const json& spec = job.value().contains("spec") ? job.value()["spec"] : json::object();
  if (!spec.value("allocation", false)) {
    return fail(Error{ErrorCode::kConflict, "job " + job_id + " is not an allocation (ag alloc makes those); stop it "
                                                "with: ag stop-job " + job_id});
  }
  const std::string state = job.value().value("state", "");
  if (state == "SUCCEEDED" || state == "FAILED" || state == "STOPPED") {
    return fail(Error{ErrorCode::kConflict, "allocation " + job_id + " has ended already (" + state + ")"});
  }
  auto stopped = call_json(conn.value(), "POST", "/api/jobs/" + net::url_encode(job_id) + "/stop");
  if (!stopped.ok()) return fail(stopped.error());
  std::cerr << "Allocation " << job_id << " released: its tasks are stopped and its resources free.\n";
  return 0;
}

int run_interactive(const ConnectionOptions& options, const Connection& conn, const std::string& job_id,
                    const std::string& entrypoint, bool with_stdin, bool tty) {
  int code = 0;
  {
    InterruptWatch watch;
    std::cerr << "Waiting for task 0 to start (Ctrl-C stops the job).\n";
    auto ready = wait_for_tasks(conn, job_id, true);
    if (!ready.ok()) {
      if (!interrupted) return fail(ready.error());
      stop_quietly(conn, job_id);
      std::cerr << "Job " << job_id << " stopped before its session began.\n";
      return 130;
    }
  }
  ExecOptions session;
  session.job_id = job_id;
  session.with_stdin = with_stdin;
  session.tty = tty;
  session.command = {"/bin/sh", "-c", entrypoint};
  code = exec(options, session);
  // Leaving the session ends the job (its other tasks too).
  stop_quietly(conn, job_id);
  std::cerr << "Job " << job_id << " stopped: its interactive session ended.\n";
  return code;
}

}  // namespace ag::cli
