// Holds, begin times and dependencies through the job controller: a gated
// job stays out of the queue and gives its reason; it joins the queue the moment its
// gates open, or fails when a dependency can no longer be met; all of it survives a
// head restart.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "head/job_layer_fixture.h"

namespace ag::head {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;

class JobGatesTest : public JobLayerTest {
 protected:
  // A job that waits for `deps` in the way `field` says.
  api::JobSpec after(std::vector<std::string> api::JobSpec::*field, std::vector<std::string> deps) {
    api::JobSpec s = spec();
    s.*field = std::move(deps);
    return s;
  }

  Error submit_error(api::JobSpec s) {
    std::optional<Result<std::string>> result;
    jobs_->controller.submit(std::move(s), [&](Result<std::string> id) { result = std::move(id); });
    clock_.run_ready();
    EXPECT_TRUE(result.has_value() && !result->ok());
    return result && !result->ok() ? result->error() : Error{};
  }

  Status set_hold(const std::string& id, bool hold, const std::string& by = "alice") {
    std::optional<Status> status;
    jobs_->controller.set_hold(id, hold, by, [&](Status s) { status = std::move(s); });
    clock_.advance(100);  // it answers once stored
    EXPECT_TRUE(status.has_value());
    return status.value_or(Status{});
  }

  bool queued(const std::string& id) { return queue_positions(*jobs_).count(job(id).queue_seq) > 0; }
};

TEST_F(JobGatesTest, AfterWaitsForSuccessThenJoinsTheQueue) {
  add_node("node_a", 4);
  const std::string first = submit(spec());
  const std::string second = submit(after(&api::JobSpec::after, {first}));
  // Room is free, yet it waits for the first job, out of the queue, saying so.
  EXPECT_EQ(job(second).state, JobState::kPending);
  EXPECT_EQ(job(second).pending_kind, sched::PendingKind::kDependency);
  EXPECT_EQ(job(second).message, "waiting for " + first + " to succeed (--after)");
  EXPECT_FALSE(queued(second));

  exit_all(first, 0, 1, 0);
  EXPECT_EQ(job(second).state, JobState::kRunning);
  EXPECT_THAT(event_texts(second), Contains("dependency " + first + " ended SUCCEEDED; queued"));
}

TEST_F(JobGatesTest, ADependencyThatFailsFailsItsDependentsDownTheChain) {
  add_node("node_a", 4);
  const std::string first = submit(spec());
  const std::string second = submit(after(&api::JobSpec::after, {first}));
  const std::string third = submit(after(&api::JobSpec::after, {second}));
  exit_all(first, 0, 1, 3);
  EXPECT_EQ(job(first).state, JobState::kFailed);
  EXPECT_EQ(job(second).state, JobState::kFailed);
  EXPECT_EQ(job(second).message,
            "dependency " + first + " ended FAILED; --after waits for it to succeed, so this job can never start");
  EXPECT_EQ(job(third).state, JobState::kFailed);
  EXPECT_THAT(job(third).message, HasSubstr("dependency " + second + " ended FAILED"));
  // What failed them is stored: a restart does not bring them back.
  clock_.advance(100);
  EXPECT_EQ(stored(third).state, JobState::kFailed);
}

TEST_F(JobGatesTest, AfterAnyAndAfterFailedRunOnAStopAndAfterDoesNot) {
  add_node("node_a", 8);
  const std::string first = submit(spec());
  const std::string any = submit(after(&api::JobSpec::after_any, {first}));
  const std::string on_failure = submit(after(&api::JobSpec::after_failed, {first}));
  const std::string on_success = submit(after(&api::JobSpec::after, {first}));
  EXPECT_EQ(job(on_failure).message, "waiting for " + first + " to fail or be stopped (--after-failed)");
  ASSERT_TRUE(stop(first, "alice").ok());
  exit_all(first, 0, 1, 143);
  EXPECT_EQ(job(first).state, JobState::kStopped);
  EXPECT_EQ(job(any).state, JobState::kRunning);
  EXPECT_EQ(job(on_failure).state, JobState::kRunning);
  EXPECT_EQ(job(on_success).state, JobState::kFailed);
}

TEST_F(JobGatesTest, AfterFailedFailsWhenTheDependencySucceeds) {
  add_node("node_a", 4);
  const std::string first = submit(spec());
  const std::string cleanup = submit(after(&api::JobSpec::after_failed, {first}));
  exit_all(first, 0, 1, 0);
  EXPECT_EQ(job(cleanup).state, JobState::kFailed);
  EXPECT_THAT(job(cleanup).message, HasSubstr("ended SUCCEEDED; --after-failed waits for it to fail or be stopped"));
}

TEST_F(JobGatesTest, SeveralDependenciesAreCountedInTheReason) {
  add_node("node_a", 4);
  const std::string a = submit(spec()), b = submit(spec()), c = submit(spec());
  const std::string last = submit(after(&api::JobSpec::after, {a, b, c}));
  EXPECT_EQ(job(last).message, "waiting for " + a + " to succeed (--after) and 2 more dependencies");
  exit_all(a, 0, 1, 0);
  exit_all(b, 0, 1, 0);
  EXPECT_EQ(job(last).state, JobState::kPending);
  exit_all(c, 0, 1, 0);
  EXPECT_EQ(job(last).state, JobState::kRunning);
}

TEST_F(JobGatesTest, SubmitRefusesAnUnknownDependencyAndOneAlreadyUnmet) {
  add_node("node_a", 4);
  Error unknown = submit_error(after(&api::JobSpec::after, {"job_0123456789ab"}));
  EXPECT_EQ(unknown.code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(unknown.message, HasSubstr("--after names job job_0123456789ab, which does not exist"));

  const std::string failed = submit(spec());
  exit_all(failed, 0, 1, 1);
  Error unmet = submit_error(after(&api::JobSpec::after, {failed}));
  EXPECT_THAT(unmet.message, HasSubstr("dependency " + failed + " ended FAILED; --after waits for it to succeed"));
  // A dependency that already ended the right way is no reason to wait.
  const std::string runs = submit(after(&api::JobSpec::after_failed, {failed}));
  EXPECT_EQ(job(runs).state, JobState::kRunning);
  EXPECT_EQ(jobs_->table.list().size(), 2u);  // nothing else was kept
}

TEST_F(JobGatesTest, AHeldJobWaitsUntilReleased) {
  add_node("node_a", 4);
  api::JobSpec held = spec();
  held.hold = true;
  const std::string id = submit(held);
  EXPECT_EQ(job(id).state, JobState::kPending);
  EXPECT_EQ(job(id).pending_kind, sched::PendingKind::kHeld);
  EXPECT_EQ(job(id).message, "held by user; `ag release " + id + "` lets it run");
  EXPECT_FALSE(queued(id));

  ASSERT_TRUE(set_hold(id, false).ok());
  EXPECT_EQ(job(id).state, JobState::kRunning);
  EXPECT_THAT(event_texts(id), Contains("released by alice"));
  EXPECT_EQ(stored(id).held_by, "");
}

TEST_F(JobGatesTest, HoldTakesAQueuedJobOutAndReleaseKeepsItsPlace) {
  add_node("node_a", 1);
  const std::string running = submit(spec());
  const std::string first = submit(spec()), second = submit(spec());
  ASSERT_TRUE(set_hold(first, true).ok());
  EXPECT_EQ(stored(first).held_by, "alice");
  EXPECT_FALSE(queued(first));
  EXPECT_EQ(queue_positions(*jobs_).at(job(second).queue_seq), 1);
  ASSERT_TRUE(set_hold(first, false).ok());
  EXPECT_EQ(queue_positions(*jobs_).at(job(first).queue_seq), 1);  // submitted first, placed first
  exit_all(running, 0, 1, 0);
  EXPECT_EQ(job(first).state, JobState::kRunning);
  EXPECT_EQ(job(second).state, JobState::kPending);
}

TEST_F(JobGatesTest, OnlyAPendingJobIsHeldAndOnlyAHeldOneReleased) {
  add_node("node_a", 4);
  const std::string running = submit(spec());
  Status hold_running = set_hold(running, true);
  ASSERT_FALSE(hold_running.ok());
  EXPECT_EQ(hold_running.error().code, ErrorCode::kConflict);
  EXPECT_EQ(hold_running.error().message, "job " + running + " is RUNNING; only a pending job can be held (stop it with `ag stop-job " + running + "`)");
  api::JobSpec big = spec(1, 8);
  big.allow_unschedulable = true;
  const std::string waiting = submit(big);
  Status release_unheld = set_hold(waiting, false);
  ASSERT_FALSE(release_unheld.ok());
  EXPECT_THAT(release_unheld.error().message, HasSubstr("job " + waiting + " is not held; it is pending: cannot be placed"));
  EXPECT_EQ(set_hold("job_0123456789ab", true).error().code, ErrorCode::kNotFound);
  // Holding twice is no error and changes nothing.
  ASSERT_TRUE(set_hold(waiting, true).ok());
  ASSERT_TRUE(set_hold(waiting, true, "bob").ok());
  EXPECT_EQ(job(waiting).held_by, "alice");
}

TEST_F(JobGatesTest, BeginTimeKeepsAJobOutUntilItComes) {
  add_node("node_a", 4);
  api::JobSpec later = spec();
  later.begin_ms = clock_.now_ms() + 60'000;
  const std::string id = submit(later);
  EXPECT_EQ(job(id).pending_kind, sched::PendingKind::kBeginTime);
  EXPECT_THAT(job(id).message, HasSubstr("starts no earlier than " + sched::format_utc(later.begin_ms)));
  clock_.advance(59'000);
  EXPECT_EQ(job(id).state, JobState::kPending);
  clock_.advance(1'000);
  EXPECT_EQ(job(id).state, JobState::kRunning);
}

TEST_F(JobGatesTest, GatedJobsDoNotTakeTheSchedulersWindow) {
  add_node("node_a", 4);
  api::JobSpec held = spec();
  held.hold = true;
  for (int i = 0; i < 200; ++i) submit(held);
  const std::string free_to_run = submit(spec());
  EXPECT_EQ(job(free_to_run).state, JobState::kRunning);
}

TEST_F(JobGatesTest, GatesHoldAcrossARestart) {
  add_node("node_a", 4);
  const std::string first = submit(spec());
  const std::string dependent = submit(after(&api::JobSpec::after, {first}));
  api::JobSpec held = spec();
  held.hold = true;
  const std::string held_id = submit(held);
  api::JobSpec later = spec();
  later.begin_ms = clock_.now_ms() + 60'000;
  const std::string later_id = submit(later);
  clock_.advance(1000);

  make_manager();
  ASSERT_TRUE(jobs_->recover().ok());
  clock_.run_ready();
  EXPECT_EQ(job(dependent).pending_kind, sched::PendingKind::kDependency);
  EXPECT_EQ(job(held_id).pending_kind, sched::PendingKind::kHeld);
  EXPECT_EQ(job(later_id).pending_kind, sched::PendingKind::kBeginTime);
  // The first job's node reconnects and the job ends: its dependent runs.
  jobs_->controller.on_node_registered("node_a", {{{first, 0, 0}, 1000}}, {});
  exit_all(first, 0, 1, 0);
  EXPECT_EQ(job(dependent).state, JobState::kRunning);
  clock_.advance(60'000);
  EXPECT_EQ(job(later_id).state, JobState::kRunning);
  EXPECT_EQ(job(held_id).state, JobState::kPending);
}

TEST_F(JobGatesTest, ADependencyOfAWaitingJobIsNotDeleted) {
  add_node("node_a", 4);
  const std::string first = submit(spec());
  api::JobSpec held = after(&api::JobSpec::after, {first});
  held.hold = true;
  const std::string dependent = submit(held);
  exit_all(first, 0, 1, 0);
  EXPECT_EQ(job(dependent).pending_kind, sched::PendingKind::kHeld);  // met, but still held
  std::optional<Status> deleted;
  jobs_->retention.delete_job(first, [&](Status s) { deleted = std::move(s); });
  clock_.run_ready();
  ASSERT_TRUE(deleted.has_value());
  ASSERT_FALSE(deleted->ok());
  EXPECT_THAT(deleted->error().message, HasSubstr("is a dependency of pending job " + dependent));
  EXPECT_EQ(jobs_->retention.delete_finished_before(clock_.now_ms() + 1), 0);
  ASSERT_TRUE(set_hold(dependent, false).ok());
  EXPECT_EQ(job(dependent).state, JobState::kRunning);
}

TEST_F(JobGatesTest, StoppingAGatedJobEndsIt) {
  add_node("node_a", 4);
  const std::string first = submit(spec());
  const std::string dependent = submit(after(&api::JobSpec::after, {first}));
  ASSERT_TRUE(stop(dependent, "alice").ok());
  EXPECT_EQ(job(dependent).state, JobState::kStopped);
  exit_all(first, 0, 1, 0);
  EXPECT_EQ(job(dependent).state, JobState::kStopped);
}

TEST_F(JobGatesTest, AnArrayRunsAtMostItsLimitAndEachElementKnowsItsIndex) {
  add_node("node_a", 16);
  api::JobSpec s = spec();
  s.array = api::parse_array_spec("0-5%2").value();
  const std::string array_id = submit(s);
  const JobArray* array = jobs_->arrays.find(array_id);
  ASSERT_NE(array, nullptr);
  ASSERT_EQ(array->elements.size(), 6u);
  EXPECT_EQ(array->elements[0], array_id + "_0");
  EXPECT_EQ(job(array_id + "_0").state, JobState::kRunning);
  EXPECT_EQ(job(array_id + "_1").state, JobState::kRunning);
  EXPECT_EQ(job(array_id + "_2").pending_kind, sched::PendingKind::kArrayLimit);
  EXPECT_EQ(job(array_id + "_2").message,
            "array " + array_id + " runs at most 2 elements at once (--array ...%2); 2 are queued or running");
  auto launches = channel_.take<api::Launch>();
  ASSERT_EQ(launches.size(), 2u);
  EXPECT_EQ(launches[1].second.env.at("AG_ARRAY_ID"), array_id);
  EXPECT_EQ(launches[1].second.env.at("AG_ARRAY_INDEX"), "1");
  EXPECT_EQ(launches[1].second.env.at("AG_ARRAY_SIZE"), "6");

  // One ends (however): the lowest waiting index takes its place.
  exit_all(array_id + "_1", 0, 1, 1);
  EXPECT_EQ(job(array_id + "_2").state, JobState::kRunning);
  EXPECT_EQ(job(array_id + "_3").state, JobState::kPending);
  // A held element gives its place up; released, it waits for one again.
  ASSERT_TRUE(set_hold(array_id + "_3", true).ok());
  ASSERT_TRUE(set_hold(array_id + "_4", true).ok());
  exit_all(array_id + "_0", 0, 1, 0);
  EXPECT_EQ(job(array_id + "_5").state, JobState::kRunning);
  ASSERT_TRUE(set_hold(array_id + "_3", false).ok());
  EXPECT_EQ(job(array_id + "_3").pending_kind, sched::PendingKind::kArrayLimit);

  // After a restart the limit still holds, counting the elements that run.
  make_manager();
  ASSERT_TRUE(jobs_->recover().ok());
  clock_.run_ready();
  EXPECT_EQ(job(array_id + "_3").pending_kind, sched::PendingKind::kArrayLimit);
  EXPECT_EQ(jobs_->arrays.find(array_id)->admitted.size(), 2u);
}

TEST_F(JobGatesTest, AJobAfterAnArrayWaitsForEveryElement) {
  add_node("node_a", 16);
  api::JobSpec s = spec();
  s.array = api::parse_array_spec("0-2").value();
  const std::string array_id = submit(s);
  const std::string merge = submit(after(&api::JobSpec::after, {array_id}));
  EXPECT_EQ(job(merge).message, "waiting for " + array_id + "_0 to succeed (--after) and 2 more dependencies");
  exit_all(array_id + "_0", 0, 1, 0);
  exit_all(array_id + "_2", 0, 1, 0);
  EXPECT_EQ(job(merge).state, JobState::kPending);
  exit_all(array_id + "_1", 0, 1, 0);
  EXPECT_EQ(job(merge).state, JobState::kRunning);
}

TEST_F(JobGatesTest, OneSubmitMakesAtMostTenThousandJobs) {
  add_node("node_a", 16);
  api::JobSpec s = spec();
  s.array = api::parse_array_spec("0-9999").value();
  std::vector<api::JobSpec> two{s, spec()};
  std::optional<Result<std::vector<std::string>>> result;
  jobs_->controller.submit_all(two, [&](Result<std::vector<std::string>> ids) { result = std::move(ids); });
  clock_.run_ready();
  ASSERT_TRUE(result.has_value() && !result->ok());
  EXPECT_EQ(result->error().message, "this submit would make 10001 jobs; one submit makes at most 10000 (no job was submitted)");
  EXPECT_TRUE(jobs_->table.list().empty());
}

TEST_F(JobGatesTest, AmongEqualPrioritiesTheUserWhoUsedLeastGoesFirst) {
  add_node("node_a", 4);
  auto owned_by = [&](const std::string& owner, double cpus) {
    std::optional<Result<std::string>> result;
    jobs_->controller.submit(spec(1, cpus), [&](Result<std::string> id) { result = std::move(id); }, {owner, ""});
    clock_.run_ready();
    return result && result->ok() ? result->value() : "";
  };
  // Alice holds the whole node for a minute.
  const std::string busy = owned_by("alice", 4);
  clock_.advance(60'000);
  const std::string hers = owned_by("alice", 4), his = owned_by("bob", 4);
  EXPECT_EQ(queue_positions(*jobs_).at(job(his).queue_seq), 1);  // submitted after hers
  exit_all(busy, 0, 1, 0);
  EXPECT_EQ(job(his).state, JobState::kRunning);
  EXPECT_EQ(job(hers).state, JobState::kPending);
  const auto report = share_report(*jobs_);
  ASSERT_EQ(report.size(), 2u);
  EXPECT_EQ(report[0].user, "alice");
  EXPECT_NEAR(report[0].usage, 60 * 4.0 / 16, 1);  // 4 CPUs for a minute: a quarter GPU-minute
}

}  // namespace
}  // namespace ag::head
