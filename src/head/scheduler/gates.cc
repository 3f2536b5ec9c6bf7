// Gates before the queue. See gates.h.
#include "head/scheduler/gates.h"

#include <ctime>

namespace ag::sched {
namespace {

const char* outcome_word(Outcome outcome) {
  switch (outcome) {
    case Outcome::kUnfinished: return "unfinished";
    case Outcome::kSucceeded: return "SUCCEEDED";
    case Outcome::kFailed: return "FAILED";
    case Outcome::kStopped: return "STOPPED";
    case Outcome::kGone: return "deleted";
  }
  return "unknown";
}

// What a dependency waits for, as the end of "waiting for JOB to ...".
const char* awaited(DependencyKind kind) {
  switch (kind) {
    case DependencyKind::kAfterOk: return "succeed";
    case DependencyKind::kAfterAny: return "end";
    case DependencyKind::kAfterFailed: return "fail or be stopped";
  }
  return "end";
}

bool met(const Dependency& dep) {
  switch (dep.kind) {
    case DependencyKind::kAfterOk: return dep.outcome == Outcome::kSucceeded;
    case DependencyKind::kAfterAny: return dep.outcome != Outcome::kUnfinished && dep.outcome != Outcome::kGone;
    case DependencyKind::kAfterFailed: return dep.outcome == Outcome::kFailed || dep.outcome == Outcome::kStopped;
  }
  return false;
}

}  // namespace

const char* flag_name(DependencyKind kind) {
  switch (kind) {
    case DependencyKind::kAfterOk: return "after";
    case DependencyKind::kAfterAny: return "after-any";
    case DependencyKind::kAfterFailed: return "after-failed";
  }
  return "after";
}

std::string format_utc(int64_t epoch_ms) {
  const std::time_t seconds = static_cast<std::time_t>(epoch_ms / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buf[48];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

GateDecision check_gates(const Gates& gates, int64_t now_ms) {
  using Verdict = GateDecision::Verdict;
  for (const Dependency& dep : gates.dependencies) {
    if (dep.outcome == Outcome::kUnfinished || met(dep)) continue;
    return {Verdict::kNever, PendingKind::kDependency,
            std::string("dependency ") + dep.job_id + (dep.outcome == Outcome::kGone ? " was " : " ended ") +
                outcome_word(dep.outcome) + "; --" +
                flag_name(dep.kind) + " waits for it to " + awaited(dep.kind) + ", so this job can never start",
            0};
  }
  if (!gates.held_by.empty()) {
    return {Verdict::kWait, PendingKind::kHeld,
            "held by " + gates.held_by + "; `ag release " + gates.job_id + "` lets it run", 0};
  }
  if (gates.begin_ms > now_ms) {
    return {Verdict::kWait, PendingKind::kBeginTime, "starts no earlier than " + format_utc(gates.begin_ms) + " (--begin)",
            gates.begin_ms};
  }
  const Dependency* first = nullptr;
  int waiting = 0;
  for (const Dependency& dep : gates.dependencies) {
    if (met(dep)) continue;
    if (!first) first = &dep;
    ++waiting;
  }
  if (first) {
    std::string reason = "waiting for " + first->job_id + " to " + awaited(first->kind) + " (--" +
                         flag_name(first->kind) + ")";
    if (waiting > 1) reason += " and " + std::to_string(waiting - 1) + " more " + (waiting == 2 ? "dependency" : "dependencies");
    return {Verdict::kWait, PendingKind::kDependency, reason, 0};
  }
  if (gates.array_limit > 0 && !gates.holds_array_slot && gates.array_admitted >= gates.array_limit) {
    return {Verdict::kWait, PendingKind::kArrayLimit,
            "array " + gates.array_id + " runs at most " + std::to_string(gates.array_limit) +
                " elements at once (--array ...%" + std::to_string(gates.array_limit) + "); " +
                std::to_string(gates.array_admitted) + " are queued or running",
            0};
  }
  return {};
}

}  // namespace ag::sched
