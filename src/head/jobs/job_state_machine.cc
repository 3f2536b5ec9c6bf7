#include "head/jobs/job_state_machine.h"

#include <algorithm>
#include <csignal>
#include <cstring>
#include <ctime>
#include <iomanip>
#include <iterator>
#include <sstream>

#include "common/amounts.h"

namespace ag::head {
namespace {

std::string task_label(const TaskRecord& task) {
  return "task " + std::to_string(task.index) + " on " + task.node_id + " (" + task.node_address +
         ")";
}

// "2s", "1.5s", "1209600s": plain seconds, never scientific notation.
std::string format_seconds(double s) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(s == static_cast<double>(static_cast<int64_t>(s)) ? 0 : 3) << s;
  std::string text = out.str();
  if (text.find('.') != std::string::npos) {
    while (text.back() == '0') text.pop_back();
    if (text.back() == '.') text.pop_back();
  }
  return text + "s";
}

// Kills every live task of the attempt except `except_index`.
void kill_live_tasks(const std::string& job_id, AttemptRecord& attempt, int except_index, Effects& fx) {
  for (auto& task : attempt.tasks) {
    if (task.index == except_index || task.terminal()) continue;
    fx.kill.push_back({{job_id, attempt.number, task.index}, task.node_id});
  }
}

// What a failure was, for retry_on.
struct FailureCause {
  std::optional<int> exit_code;  // a signal N as 128+N
  bool node_lost = false;
  bool out_of_memory = false;  // the reason then names the node whose memory ran out
};

// Why retry_on rules out retrying this attempt's failure ("" when it allows it).
std::string not_retried_because(const api::RetryOn& on, const AttemptRecord& attempt) {
  switch (on.kind) {
    case api::RetryOn::Kind::kAny:
      return "";
    case api::RetryOn::Kind::kNodeLost:
      return attempt.failure_node_lost ? "" : "retry_on is node_lost and no node was lost";
    case api::RetryOn::Kind::kExitCodes: {
      const auto& codes = on.exit_codes;
      if (attempt.failure_node_lost ||
          (attempt.failure_exit_code &&
           std::find(codes.begin(), codes.end(), *attempt.failure_exit_code) != codes.end())) {
        return "";
      }
      std::string list;
      for (int code : codes) list += (list.empty() ? "" : ", ") + std::to_string(code);
      return "retry_on lists exit codes " + list;
    }
  }
  return "";
}

// Called whenever a task of the current attempt became terminal: once all are, the
// attempt is over and the job either succeeds, is retried, stops or fails.
void maybe_finish_attempt(Job& job, int64_t now_ms, Effects& fx) {
  AttemptRecord& attempt = *job.current_attempt();
  if (!attempt.all_terminal() || attempt.finished()) return;
  attempt.finished_ms = now_ms;
  bool all_succeeded = true;
  for (const auto& task : attempt.tasks) {
    if (task.state != TaskState::kSucceeded) all_succeeded = false;
  }
  fx.changed = true;
  if (all_succeeded && !attempt.ending) {
    job.state = JobState::kSucceeded;
    job.finished_ms = now_ms;
    job.message.clear();
    fx.finished = true;
    fx.events.push_back("attempt " + std::to_string(attempt.number) +
                        ": all tasks succeeded; job SUCCEEDED");
    return;
  }
  if (job.timed_out) {
    job.state = JobState::kFailed;
    job.finished_ms = now_ms;
    job.message = attempt.failure_reason;
    fx.finished = true;
    fx.events.push_back("all tasks stopped; job FAILED: " + job.message);
    return;
  }
  if (job.stop_requested) {
    job.state = JobState::kStopped;
    job.finished_ms = now_ms;
    // Who stopped it, as the stop said ("stopped by alice").
    job.message = attempt.failure_reason.empty() ? "stopped by user" : attempt.failure_reason;
    fx.finished = true;
    fx.events.push_back("all tasks stopped; job STOPPED");
    return;
  }
  if (attempt.preempted) {
    job.state = JobState::kPending;
    job.retry_at_ms = now_ms;
    job.message = attempt.failure_reason + "; back in the queue (retries not spent)";
    fx.requeue = true;
    fx.events.push_back("attempt " + std::to_string(attempt.number) +
                        ": all tasks stopped; the job is back in the queue (preempted; its retries are not spent)");
    return;
  }
  // Preempted attempts are not retries.
  const int attempts_allowed = job.spec.max_retries + 1;
  const auto attempts_made = std::count_if(job.attempts.begin(), job.attempts.end(),
                                           [](const AttemptRecord& a) { return !a.preempted; });
  const bool retries_left = attempts_made < attempts_allowed;
  const std::string not_retried = retries_left ? not_retried_because(job.spec.retry_on, attempt) : "";
  if (retries_left && not_retried.empty()) {
    const int64_t delay_ms = job.spec.retry_delay_ms(attempt.number);
    const bool none_preempted = attempts_made == static_cast<std::ptrdiff_t>(job.attempts.size());
    const std::string next = "attempt " + std::to_string(attempt.number + 1) +
                             (none_preempted ? " of " + std::to_string(attempts_allowed)
                                             : " (try " + std::to_string(attempts_made + 1) + " of " +
                                                   std::to_string(attempts_allowed) + "; preempted attempts do not count)");
    const std::string when = delay_ms > 0 ? " in " + format_seconds(static_cast<double>(delay_ms) / 1000) : "";
    job.state = JobState::kPending;
    job.retry_at_ms = now_ms + delay_ms;
    job.message = "retrying after: " + attempt.failure_reason + "; " + next + " starts" + (when.empty() ? " now" : when);
    fx.requeue = true;
    fx.events.push_back("attempt " + std::to_string(attempt.number) + " failed (" +
                        attempt.failure_reason + "); all its tasks are dead; retrying as " + next + when);
    return;
  }
  job.state = JobState::kFailed;
  job.finished_ms = now_ms;
  job.message = attempt.failure_reason;
  if (!not_retried.empty()) {
    job.message += " (not retried: " + not_retried + ")";
  } else if (job.spec.max_retries > 0) {
    job.message += " (after " + std::to_string(attempts_made) + " attempts)";
  }
  fx.finished = true;
  fx.events.push_back("job FAILED: " + job.message);
}

// "14:05:09 UTC" for a wall time in ms.
std::string utc_time(int64_t ms) {
  const time_t seconds = static_cast<time_t>(ms / 1000);
  struct tm t {};
  gmtime_r(&seconds, &t);
  char text[32];
  std::strftime(text, sizeof text, "%H:%M:%S UTC", &t);
  return text;
}

// The failed attempt's live tasks stay (hold_on_failure) until its deadline: said in an
// event and in the job's message, with how to look and how to end it sooner.
void hold_for_a_look(Job& job, AttemptRecord& attempt, int64_t now_ms, Effects& fx) {
  attempt.held_until_ms = now_ms + static_cast<int64_t>(*job.spec.hold_on_failure_s * 1000);
  std::string live;
  for (const auto& task : attempt.tasks) {
    if (!task.terminal()) live += (live.empty() ? "" : ", ") + std::to_string(task.index);
  }
  const std::string until = utc_time(attempt.held_until_ms);
  job.message = "attempt " + std::to_string(attempt.number) + " failed (" + attempt.failure_reason +
                "); its running tasks (" + live + ") are kept until " + until + " for a look: ag exec " + job.id +
                " --task-index N -- CMD (ag stop-job " + job.id + " stops the whole job now, without a retry)";
  fx.events.push_back("attempt " + std::to_string(attempt.number) + " failed; holding its running tasks (" + live +
                      ") until " + until + " (hold_on_failure " + format_seconds(*job.spec.hold_on_failure_s) + ")");
}

// Marks `task` failed for `reason` and tears the rest of the gang down.
void fail_task(Job& job, AttemptRecord& attempt, TaskRecord& task, const std::string& reason,
               const FailureCause& cause, int64_t now_ms, Effects& fx) {
  fx.changed = true;
  task.state = TaskState::kFailed;
  task.reason = reason;
  task.finished_ms = now_ms;
  fx.events.push_back(task_label(task) + " " + reason);
  if (!attempt.ending) {
    attempt.ending = true;
    attempt.failure_reason = "task " + std::to_string(task.index) + " " +
                             (cause.out_of_memory ? "on " + task.node_id + " " : "") + reason;
    attempt.failed_task = task.index;
    attempt.failure_exit_code = cause.exit_code;
    attempt.failure_node_lost = cause.node_lost;
    if (job.spec.hold_on_failure_s && !attempt.all_terminal()) {
      hold_for_a_look(job, attempt, now_ms, fx);
    } else {
      kill_live_tasks(job.id, attempt, task.index, fx);
      if (!fx.kill.empty()) {
        fx.events.push_back("stopping the other " + std::to_string(fx.kill.size()) +
                            " task(s) of attempt " + std::to_string(attempt.number));
      }
    }
  }
  maybe_finish_attempt(job, now_ms, fx);
}

// The attempt a worker message refers to, or null when it is stale (an older attempt,
// or the job has no attempt).
AttemptRecord* live_attempt(Job& job, int attempt) {
  AttemptRecord* current = job.current_attempt();
  if (!current || current->number != attempt || current->finished()) return nullptr;
  return current;
}

Effects stop_with(Job& job, int64_t now_ms, const std::string& reason, const std::string& event) {
  Effects fx;
  if (job.terminal()) return fx;
  fx.changed = true;
  fx.events.push_back(event);
  AttemptRecord* attempt = job.current_attempt();
  if (job.state == JobState::kPending || !attempt || attempt->finished()) {
    job.state = job.timed_out ? JobState::kFailed : JobState::kStopped;
    job.finished_ms = now_ms;
    job.message = reason;
    fx.finished = true;
    return fx;
  }
  if (!attempt->ending) {
    attempt->ending = true;
    attempt->failure_reason = reason;
  }
  kill_live_tasks(job.id, *attempt, -1, fx);
  maybe_finish_attempt(job, now_ms, fx);
  return fx;
}

}  // namespace

bool AttemptRecord::all_terminal() const {
  for (const auto& task : tasks) {
    if (!task.terminal()) return false;
  }
  return true;
}

namespace {
// Linux's name of signal `number` without "SIG", nullptr for one without a name (the
// real-time signals). A table of our own: glibc's sigabbrev_np is 2.32's, newer than
// the portable binary's glibc (docs/adr/0009).
const char* signal_abbreviation(int number) {
  static constexpr const char* kNames[] = {
      nullptr, "HUP",  "INT",  "QUIT", "ILL",  "TRAP", "ABRT",   "BUS",  "FPE",   "KILL", "USR1",
      "SEGV",  "USR2", "PIPE", "ALRM", "TERM", "STKFLT", "CHLD", "CONT", "STOP", "TSTP",  "TTIN",
      "TTOU",  "URG",  "XCPU", "XFSZ", "VTALRM", "PROF", "WINCH", "IO",  "PWR",  "SYS"};
  if (number <= 0 || number >= static_cast<int>(std::size(kNames))) return nullptr;
  return kNames[number];
}
}  // namespace

std::string describe_exit(const api::TaskExit& exit) {
  if (!exit.start_error.empty()) return "could not start: " + exit.start_error;
  if (!exit.lost.empty()) return "was lost: " + exit.lost;
  if (exit.out_of_memory) {
    const std::string limit =
        exit.memory_limit_bytes > 0 ? " (limit " + format_memory(exit.memory_limit_bytes) + ")" : "";
    // A shell's child the OOM killer ended makes the shell exit with 128+9.
    if (exit.signal || exit.exit_code == 128 + SIGKILL) return "was killed: out of memory" + limit;
    return "exited with code " + std::to_string(exit.exit_code.value_or(-1)) +
           " after the kernel killed one of its processes: out of memory" + limit;
  }
  if (exit.signal) {
    const char* name = signal_abbreviation(*exit.signal);
    return "was killed by signal " + std::to_string(*exit.signal) +
           (name ? " (SIG" + std::string(name) + ")" : "");
  }
  int code = exit.exit_code.value_or(-1);
  std::string text = "exited with code " + std::to_string(code);
  if (code == 127) text += " (command not found)";
  if (code == 126) text += " (command not executable)";
  return text;
}

Effects on_placed(Job& job, const std::vector<PlacedTask>& tasks, int master_port,
                  int64_t now_ms) {
  Effects fx;
  fx.changed = true;
  AttemptRecord attempt;
  attempt.number = static_cast<int>(job.attempts.size());
  attempt.master_port = master_port;
  attempt.master_addr = tasks.empty() ? "" : tasks[0].node_address;
  attempt.started_ms = now_ms;
  std::string where;
  for (size_t i = 0; i < tasks.size(); ++i) {
    TaskRecord task;
    task.index = static_cast<int>(i);
    task.node_id = tasks[i].node_id;
    task.node_address = tasks[i].node_address;
    task.gpu_ids = tasks[i].gpu_ids;
    fx.launch.push_back({{job.id, attempt.number, task.index}, task.node_id});
    if (i < 8) where += (i ? ", " : "") + task_label(task);
    attempt.tasks.push_back(std::move(task));
  }
  if (tasks.size() > 8) where += ", ...";
  job.attempts.push_back(std::move(attempt));
  job.state = JobState::kRunning;
  job.message.clear();
  job.pending_kind.reset();
  job.retry_at_ms = 0;
  if (job.started_ms == 0) job.started_ms = now_ms;
  fx.events.push_back("attempt " + std::to_string(job.attempts.back().number) + " placed: " +
                      where + "; master " + job.attempts.back().master_addr + ":" +
                      std::to_string(master_port));
  return fx;
}

Effects on_task_started(Job& job, int attempt_number, int task_index, int64_t pid,
                        int64_t now_ms) {
  Effects fx;
  AttemptRecord* attempt = live_attempt(job, attempt_number);
  if (!attempt || task_index < 0 || task_index >= static_cast<int>(attempt->tasks.size())) {
    return fx;
  }
  TaskRecord& task = attempt->tasks[task_index];
  if (task.state != TaskState::kStarting) return fx;
  task.state = TaskState::kRunning;
  task.pid = pid;
  task.started_ms = now_ms;
  fx.changed = true;
  // A task that starts after its attempt began tearing down must not live on.
  if (attempt->ending) fx.kill.push_back({{job.id, attempt->number, task.index}, task.node_id});
  return fx;
}

Effects on_task_exited(Job& job, int attempt_number, int task_index, const api::TaskExit& exit,
                       int64_t now_ms) {
  Effects fx;
  AttemptRecord* attempt = live_attempt(job, attempt_number);
  if (!attempt || task_index < 0 || task_index >= static_cast<int>(attempt->tasks.size())) {
    return fx;
  }
  TaskRecord& task = attempt->tasks[task_index];
  if (task.terminal()) return fx;
  fx.changed = true;
  task.exit_code = exit.exit_code;
  task.signal = exit.signal;
  bool success = exit.start_error.empty() && exit.lost.empty() && !exit.signal && exit.exit_code == 0;
  if (attempt->ending) {
    task.state = success ? TaskState::kSucceeded : TaskState::kStopped;
    task.reason = success ? "" : describe_exit(exit);
    task.finished_ms = now_ms;
    maybe_finish_attempt(job, now_ms, fx);
    return fx;
  }
  if (success) {
    task.state = TaskState::kSucceeded;
    task.finished_ms = now_ms;
    maybe_finish_attempt(job, now_ms, fx);
    return fx;
  }
  FailureCause cause;
  cause.node_lost = !exit.lost.empty();
  cause.out_of_memory = exit.out_of_memory;
  if (exit.start_error.empty() && exit.lost.empty()) {
    cause.exit_code = exit.signal ? std::optional<int>(128 + *exit.signal) : exit.exit_code;
  }
  fail_task(job, *attempt, task, describe_exit(exit), cause, now_ms, fx);
  return fx;
}

Effects on_node_lost(Job& job, const std::string& node_id, const std::string& node_label,
                     int64_t now_ms) {
  Effects fx;
  AttemptRecord* attempt = job.current_attempt();
  if (job.terminal() || !attempt || attempt->finished()) return fx;
  for (auto& task : attempt->tasks) {
    if (task.node_id != node_id || task.terminal()) continue;
    if (attempt->ending) {
      task.state = TaskState::kStopped;
      task.reason = "node " + node_label + " lost";
      task.finished_ms = now_ms;
      fx.changed = true;
      continue;
    }
    fail_task(job, *attempt, task, "lost: node " + node_label + " stopped responding", FailureCause{std::nullopt, true},
              now_ms, fx);
  }
  if (fx.changed) maybe_finish_attempt(job, now_ms, fx);
  return fx;
}

Effects on_stop_requested(Job& job, int64_t now_ms, const std::string& by) {
  if (job.terminal()) return {};
  job.stop_requested = true;
  const std::string who = by.empty() ? "user" : by;
  return stop_with(job, now_ms, "stopped by " + who, "stop requested by " + who);
}

Effects on_preempted(Job& job, const std::string& why, int64_t grace_ms, int64_t now_ms) {
  AttemptRecord* attempt = job.current_attempt();
  if (job.state != JobState::kRunning || !attempt || attempt->ending || attempt->finished()) return {};
  Effects fx;
  fx.changed = true;
  attempt->ending = true;
  attempt->preempted = true;
  attempt->failure_reason = why;
  fx.kill_grace_ms = grace_ms;
  kill_live_tasks(job.id, *attempt, -1, fx);
  fx.events.push_back(why + "; stopping its tasks (SIGTERM, then SIGKILL after " +
                      format_seconds(static_cast<double>(grace_ms) / 1000) + ")");
  maybe_finish_attempt(job, now_ms, fx);
  return fx;
}

Effects on_hung(Job& job, int attempt, const std::string& reason, int64_t now_ms) {
  AttemptRecord* current = live_attempt(job, attempt);
  if (job.state != JobState::kRunning || !current || current->ending) return {};
  Effects fx;
  fx.changed = true;
  current->ending = true;
  current->failure_reason = reason;
  kill_live_tasks(job.id, *current, -1, fx);
  fx.events.push_back("attempt " + std::to_string(attempt) + " failed: " + reason + "; stopping its tasks");
  maybe_finish_attempt(job, now_ms, fx);
  return fx;
}

Effects on_timed_out(Job& job, int64_t now_ms) {
  if (job.terminal()) return {};
  job.timed_out = true;
  std::string reason = "timed out after " + format_seconds(job.spec.timeout_s.value_or(0));
  if (job.spec.timeout_per_attempt && job.current_attempt()) {
    reason += " in attempt " + std::to_string(job.current_attempt()->number);
  }
  return stop_with(job, now_ms, reason, reason + "; stopping all tasks");
}

std::optional<Deadline> timeout_deadline(const Job& job) {
  // Once timed out or stopped, the job is only waiting for its tasks to end.
  if (!job.spec.timeout_s || job.terminal() || job.started_ms == 0 || job.timed_out || job.stop_requested) {
    return std::nullopt;
  }
  const auto timeout_ms = static_cast<int64_t>(*job.spec.timeout_s * 1000);
  if (!job.spec.timeout_per_attempt) return Deadline{job.started_ms + timeout_ms, std::nullopt};
  const AttemptRecord* attempt = job.current_attempt();
  // A failed attempt held for a look ends with its hold; its retry gets a timeout of its own.
  if (!attempt || attempt->finished() || attempt->held_until_ms != 0) return std::nullopt;
  return Deadline{attempt->started_ms + timeout_ms, attempt->number};
}

std::optional<Deadline> hold_deadline(const Job& job) {
  const AttemptRecord* attempt = job.current_attempt();
  if (job.terminal() || !attempt || attempt->finished() || attempt->held_until_ms == 0) return std::nullopt;
  return Deadline{attempt->held_until_ms, attempt->number, true};
}

std::optional<Deadline> next_deadline(const Job& job) {
  auto timeout = timeout_deadline(job);
  auto hold = hold_deadline(job);
  if (!timeout || !hold) return timeout ? timeout : hold;
  return hold->at_ms <= timeout->at_ms ? hold : timeout;
}

Effects on_deadline(Job& job, const Deadline& deadline, int64_t now_ms) {
  if (deadline.hold) {
    if (hold_deadline(job) != deadline) return {};
    AttemptRecord& attempt = *job.current_attempt();
    Effects fx;
    fx.changed = true;
    attempt.held_until_ms = 0;
    kill_live_tasks(job.id, attempt, -1, fx);
    fx.events.push_back("the hold of attempt " + std::to_string(attempt.number) + " is over; stopping its " +
                        std::to_string(fx.kill.size()) + " running task(s)");
    maybe_finish_attempt(job, now_ms, fx);
    return fx;
  }
  if (timeout_deadline(job) != deadline) return {};
  return on_timed_out(job, now_ms);
}

Effects on_pending(Job& job, sched::PendingKind kind, const std::string& reason, int64_t now_ms) {
  Effects fx;
  if (job.state != JobState::kPending) return fx;
  std::string message = (kind == sched::PendingKind::kInfeasible ? "cannot be placed: " : "") + reason;
  if (job.message == message && job.pending_kind == kind) return fx;
  const bool new_kind = job.pending_kind != kind;
  job.message = std::move(message);
  job.pending_kind = kind;
  if (!new_kind) return fx;
  fx.changed = true;
  fx.events.push_back("pending: " + job.message);
  return fx;
}

Effects on_queued(Job& job, const std::string& event) {
  Effects fx;
  if (job.state != JobState::kPending) return fx;
  if (!event.empty()) fx.events.push_back(event);
  const bool gated = job.pending_kind == sched::PendingKind::kHeld || job.pending_kind == sched::PendingKind::kBeginTime ||
                     job.pending_kind == sched::PendingKind::kDependency;
  if (gated) {
    job.message = "queued behind jobs submitted before it";
    job.pending_kind.reset();
    fx.changed = true;
  }
  return fx;
}

Effects on_dependency_never_met(Job& job, const std::string& reason, int64_t now_ms) {
  Effects fx;
  if (job.state != JobState::kPending) return fx;
  job.state = JobState::kFailed;
  job.finished_ms = now_ms;
  job.message = reason;
  job.pending_kind.reset();
  fx.events.push_back("failed: " + reason);
  fx.changed = true;
  fx.finished = true;
  return fx;
}

}  // namespace ag::head
