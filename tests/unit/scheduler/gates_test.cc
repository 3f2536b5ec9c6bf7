// check_gates (head/scheduler/gates.h): which gate a user hears about first, and when a
// dependency can never be met.
#include "head/scheduler/gates.h"

#include <gtest/gtest.h>

namespace ag::sched {
namespace {

using Verdict = GateDecision::Verdict;
constexpr int64_t kNow = 1'796'153'400'000;  // 2026-12-01 19:30:00 UTC

Dependency dep(const char* id, DependencyKind kind, Outcome outcome) { return {id, kind, outcome}; }

TEST(GatesTest, NoGatesIsOpen) {
  EXPECT_EQ(check_gates({"job_a", "", 0, {}}, kNow).verdict, Verdict::kOpen);
  EXPECT_EQ(check_gates({"job_a", "", kNow, {}}, kNow).verdict, Verdict::kOpen);  // its time has come
}

TEST(GatesTest, EachKindOfDependencyIsMetByItsOutcomes) {
  struct Case {
    DependencyKind kind;
    Outcome outcome;
    Verdict verdict;
  };
  const Case cases[] = {
      {DependencyKind::kAfterOk, Outcome::kUnfinished, Verdict::kWait},
      {DependencyKind::kAfterOk, Outcome::kSucceeded, Verdict::kOpen},
      {DependencyKind::kAfterOk, Outcome::kFailed, Verdict::kNever},
      {DependencyKind::kAfterOk, Outcome::kStopped, Verdict::kNever},
      {DependencyKind::kAfterOk, Outcome::kGone, Verdict::kNever},
      {DependencyKind::kAfterAny, Outcome::kUnfinished, Verdict::kWait},
      {DependencyKind::kAfterAny, Outcome::kSucceeded, Verdict::kOpen},
      {DependencyKind::kAfterAny, Outcome::kFailed, Verdict::kOpen},
      {DependencyKind::kAfterAny, Outcome::kStopped, Verdict::kOpen},
      {DependencyKind::kAfterAny, Outcome::kGone, Verdict::kNever},
      {DependencyKind::kAfterFailed, Outcome::kUnfinished, Verdict::kWait},
      {DependencyKind::kAfterFailed, Outcome::kSucceeded, Verdict::kNever},
      {DependencyKind::kAfterFailed, Outcome::kFailed, Verdict::kOpen},
      {DependencyKind::kAfterFailed, Outcome::kStopped, Verdict::kOpen},
  };
  for (const Case& c : cases) {
    const GateDecision d = check_gates({"job_b", "", 0, {dep("job_a", c.kind, c.outcome)}}, kNow);
    EXPECT_EQ(d.verdict, c.verdict) << flag_name(c.kind) << " " << static_cast<int>(c.outcome);
  }
}

TEST(GatesTest, AnUnmetDependencyWinsOverAHoldAndAHoldOverTheRest) {
  const Dependency failed = dep("job_a", DependencyKind::kAfterOk, Outcome::kFailed);
  const Dependency running = dep("job_c", DependencyKind::kAfterAny, Outcome::kUnfinished);
  GateDecision d = check_gates({"job_b", "alice", kNow + 60'000, {running, failed}}, kNow);
  EXPECT_EQ(d.verdict, Verdict::kNever);
  EXPECT_EQ(d.reason, "dependency job_a ended FAILED; --after waits for it to succeed, so this job can never start");

  d = check_gates({"job_b", "alice", kNow + 60'000, {running}}, kNow);
  EXPECT_EQ(d.verdict, Verdict::kWait);
  EXPECT_EQ(d.kind, PendingKind::kHeld);
  EXPECT_EQ(d.reason, "held by alice; `ag release job_b` lets it run");
  EXPECT_EQ(d.wake_at_ms, 0);

  d = check_gates({"job_b", "", kNow + 60'000, {running}}, kNow);
  EXPECT_EQ(d.kind, PendingKind::kBeginTime);
  EXPECT_EQ(d.reason, "starts no earlier than 2026-12-01 19:31:00 UTC (--begin)");
  EXPECT_EQ(d.wake_at_ms, kNow + 60'000);

  d = check_gates({"job_b", "", 0, {running}}, kNow);
  EXPECT_EQ(d.kind, PendingKind::kDependency);
  EXPECT_EQ(d.reason, "waiting for job_c to end (--after-any)");
}

TEST(GatesTest, ADeletedDependencyIsSaidSo) {
  const GateDecision d = check_gates({"job_b", "", 0, {dep("job_a", DependencyKind::kAfterAny, Outcome::kGone)}}, kNow);
  EXPECT_EQ(d.reason, "dependency job_a was deleted; --after-any waits for it to end, so this job can never start");
}

}  // namespace
}  // namespace ag::sched
