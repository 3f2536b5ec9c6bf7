// Gates: what must be true before a pending job may enter the scheduler's queue at
// all, as opposed to what it waits for there (capacity). A job is gated by
//
//   a hold       `ag submit --hold`, `ag hold JOB`            until `ag release JOB`
//   a begin time `ag submit --begin TIME`                     until that time
//   dependencies `--after J` (J succeeded), `--after-any J` (J ended, however),
//                `--after-failed J` (J ended without success: FAILED or STOPPED)
//   an array's limit `--array 0-99%8`: at most 8 of its elements queued or running
//
// check_gates() is a pure function of the job's gates, its dependencies' outcomes and
// the time; the head calls it whenever one of those changes (a dependency ends, a
// release, the begin time) and moves the job into the queue once every gate is open.
// A dependency that can no longer be met (J failed and the job waits for it to
// succeed) ends the job FAILED with that reason, hold or not.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "head/scheduler/scheduler.h"

namespace ag::sched {

enum class DependencyKind {
  kAfterOk,      // --after: the job succeeded
  kAfterAny,     // --after-any: the job ended, in any state
  kAfterFailed,  // --after-failed: the job ended FAILED or STOPPED
};

// "after", "after-any", "after-failed": the flag that asks for it, without dashes.
const char* flag_name(DependencyKind kind);

// How a dependency stands now.
// kGone: no such job any more (deleted), so it can never be met.
enum class Outcome { kUnfinished, kSucceeded, kFailed, kStopped, kGone };

struct Dependency {
  std::string job_id;
  DependencyKind kind = DependencyKind::kAfterOk;
  Outcome outcome = Outcome::kUnfinished;
};

struct Gates {
  std::string job_id;    // the gated job, named in the reasons' advice
  std::string held_by;   // who holds the job ("" when not held)
  int64_t begin_ms = 0;  // wall time before which it may not start (0: none)
  std::vector<Dependency> dependencies;
  // An array element: its array, how many of the array's elements may be queued or
  // running at once (0: any number), how many are, and whether this job is one of them.
  std::string array_id;
  int array_limit = 0;
  int array_admitted = 0;
  bool holds_array_slot = false;
};

struct GateDecision {
  enum class Verdict {
    kOpen,   // every gate is open: the job joins the queue
    kWait,   // it waits, for `kind`, said in `reason`
    kNever,  // a dependency can no longer be met: the job fails with `reason`
  };
  Verdict verdict = Verdict::kOpen;
  PendingKind kind = PendingKind::kHeld;  // kWait: kHeld, kBeginTime, kDependency or kArrayLimit
  std::string reason;
  // kWait on a begin time: when to look again (0 otherwise).
  int64_t wake_at_ms = 0;
};

// Weighs the gates in order of what a user must act on first: a dependency that can
// never be met, then a hold, then the begin time, then dependencies still running, then
// the array's limit (a slot goes only to an element nothing else holds back).
GateDecision check_gates(const Gates& gates, int64_t now_ms);

// "2026-12-01 20:00:00 UTC".
std::string format_utc(int64_t epoch_ms);

}  // namespace ag::sched
