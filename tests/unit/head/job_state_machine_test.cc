// Tests for the job state machine, through its public event functions only.
#include "head/jobs/job_state_machine.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <csignal>
#include <string>
#include <vector>

#include "head/job_fixtures.h"

namespace ag::head {
namespace {

using namespace ag::head::testing;  // NOLINT: fixture builders keep tests short.
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::StartsWith;

// --- Placement -------------------------------------------------------------------

TEST(PlacementTest, StartsAttemptZeroAndLaunchesEveryTask) {
  Job job = make_job(3);

  const Effects fx = place(job, 1'234);

  EXPECT_EQ(job.state, JobState::kRunning);
  ASSERT_EQ(job.attempts.size(), 1u);
  EXPECT_EQ(job.attempts[0].number, 0);
  EXPECT_EQ(job.attempts[0].started_ms, 1'234);
  EXPECT_EQ(job.started_ms, 1'234);
  ASSERT_EQ(fx.launch.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(fx.launch[i].task.attempt, 0);
    EXPECT_EQ(fx.launch[i].task.task_index, i);
    EXPECT_EQ(fx.launch[i].node_id, node_id_for(i));
  }
  EXPECT_THAT(fx.kill, IsEmpty());
  EXPECT_TRUE(fx.changed);
  EXPECT_FALSE(fx.finished);
  EXPECT_FALSE(fx.requeue);
  EXPECT_TRUE(has_event_containing(fx, "attempt 0 placed"));
}

TEST(PlacementTest, MasterIsTaskZerosNodeAddressAndGivenPort) {
  Job job = make_job(2);

  place(job);

  EXPECT_EQ(job.attempts[0].master_addr, "10.0.0.1");
  EXPECT_EQ(job.attempts[0].master_port, kMasterPort);
}

TEST(PlacementTest, TasksRecordTheirNodeAndGpusAndStartAsStarting) {
  Job job = make_job(2);

  place(job);

  const auto& tasks = job.attempts[0].tasks;
  ASSERT_EQ(tasks.size(), 2u);
  EXPECT_EQ(tasks[1].index, 1);
  EXPECT_EQ(tasks[1].node_id, "node_1");
  EXPECT_EQ(tasks[1].node_address, "10.0.0.2");
  EXPECT_EQ(tasks[1].gpu_ids, std::vector<int>({1}));
  EXPECT_EQ(tasks[0].state, TaskState::kStarting);
  EXPECT_EQ(tasks[1].state, TaskState::kStarting);
}

TEST(TaskStartedTest, RecordsPidAndRunningStateWithoutKilling) {
  Job job = make_job(2);
  place(job);

  const Effects fx = on_task_started(job, 0, 1, 4242, 2'000);

  const TaskRecord& task = job.attempts[0].tasks[1];
  EXPECT_EQ(task.state, TaskState::kRunning);
  EXPECT_EQ(task.pid, 4242);
  EXPECT_EQ(task.started_ms, 2'000);
  EXPECT_TRUE(fx.changed);
  EXPECT_THAT(fx.kill, IsEmpty());
}

// --- Success ---------------------------------------------------------------------

TEST(SuccessTest, JobSucceedsOnlyOnceEveryTaskExitedZero) {
  Job job = make_job(3);
  place_and_start(job);

  const Effects first = on_task_exited(job, 0, 0, exit_code(0), 5'000);
  const Effects second = on_task_exited(job, 0, 2, exit_code(0), 5'001);
  const Effects last = on_task_exited(job, 0, 1, exit_code(0), 5'002);

  EXPECT_FALSE(first.finished);
  EXPECT_FALSE(second.finished);
  EXPECT_TRUE(last.finished);
  EXPECT_EQ(job.state, JobState::kSucceeded);
  EXPECT_EQ(job.finished_ms, 5'002);
  EXPECT_EQ(job.message, "");
  EXPECT_THAT(last.kill, IsEmpty());
  EXPECT_TRUE(has_event_containing(last, "job SUCCEEDED"));
}

TEST(SuccessTest, TasksAreMarkedSucceededWithTheirExitCode) {
  Job job = make_job(1);
  place_and_start(job);

  on_task_exited(job, 0, 0, exit_code(0), 5'000);

  const TaskRecord& task = job.attempts[0].tasks[0];
  EXPECT_EQ(task.state, TaskState::kSucceeded);
  EXPECT_EQ(task.exit_code, 0);
  EXPECT_EQ(task.finished_ms, 5'000);
}

// --- Gang failure ----------------------------------------------------------------

TEST(GangFailureTest, OneFailedTaskKillsEveryOtherLiveTask) {
  Job job = make_job(3);
  place_and_start(job);

  const Effects fx = on_task_exited(job, 0, 1, exit_code(1), 5'000);

  EXPECT_THAT(indexes(fx.kill), ElementsAre(0, 2));
  EXPECT_EQ(fx.kill[0].task.attempt, 0);
  EXPECT_EQ(fx.kill[0].node_id, "node_0");
  EXPECT_EQ(fx.kill[1].node_id, "node_2");
  EXPECT_FALSE(fx.finished);
  EXPECT_EQ(job.state, JobState::kRunning);
  EXPECT_EQ(job.attempts[0].tasks[1].state, TaskState::kFailed);
}

TEST(HoldOnFailureTest, AFailedAttemptKeepsItsLiveTasksUntilTheHoldEndsThenRetries) {
  Job job = make_job(3, 1);
  job.spec.hold_on_failure_s = 60;
  place_and_start(job);

  const Effects failed = on_task_exited(job, 0, 1, exit_code(1), 5'000);

  EXPECT_THAT(failed.kill, IsEmpty()) << "the others are kept for a look";
  EXPECT_EQ(job.state, JobState::kRunning);
  EXPECT_EQ(job.attempts[0].held_until_ms, 65'000);
  EXPECT_THAT(job.message, HasSubstr("its running tasks (0, 2) are kept until 00:01:05 UTC for a look: ag exec"));
  EXPECT_TRUE(has_event_containing(failed, "holding its running tasks (0, 2) until 00:01:05 UTC"));
  const auto deadline = next_deadline(job);
  ASSERT_TRUE(deadline.has_value());
  EXPECT_EQ(*deadline, (Deadline{65'000, 0, true}));

  // A deadline of another kind or attempt changes nothing; the hold's own ends it.
  EXPECT_FALSE(on_deadline(job, Deadline{65'000, 0, false}, 65'000).changed);
  const Effects over = on_deadline(job, *deadline, 65'000);
  EXPECT_THAT(indexes(over.kill), ElementsAre(0, 2));
  EXPECT_TRUE(has_event_containing(over, "the hold of attempt 0 is over; stopping its 2 running task(s)"));
  EXPECT_FALSE(next_deadline(job).has_value());
  on_task_exited(job, 0, 0, killed_by(SIGTERM), 65'100);
  const Effects last = on_task_exited(job, 0, 2, killed_by(SIGTERM), 65'200);
  EXPECT_TRUE(last.requeue) << "retried as any failure is";
  EXPECT_EQ(job.state, JobState::kPending);
}

TEST(HoldOnFailureTest, APerAttemptTimeoutWaitsOutTheHoldAndTheRetryGetsItsOwn) {
  Job job = make_job(2, 1, 3600.0);
  job.spec.timeout_per_attempt = true;
  job.spec.hold_on_failure_s = 1800;
  place_and_start(job);
  ASSERT_TRUE(timeout_deadline(job).has_value());
  on_task_exited(job, 0, 0, exit_code(1), 2'700'000);
  // Held: the hold, not the attempt's timeout, ends it (a timeout would cancel the retry).
  EXPECT_FALSE(timeout_deadline(job).has_value());
  const auto deadline = next_deadline(job);
  ASSERT_TRUE(deadline.has_value());
  EXPECT_TRUE(deadline->hold);
  on_deadline(job, *deadline, deadline->at_ms);
  const Effects last = on_task_exited(job, 0, 1, killed_by(SIGTERM), deadline->at_ms + 100);
  EXPECT_TRUE(last.requeue);
  EXPECT_FALSE(job.timed_out);
}

TEST(HoldOnFailureTest, NothingIsHeldWhenNoTaskIsLeftAndAStopEndsAHold) {
  Job single = make_job(1);
  single.spec.hold_on_failure_s = 60;
  place_and_start(single);
  const Effects fx = on_task_exited(single, 0, 0, exit_code(2), 5'000);
  EXPECT_TRUE(fx.finished);
  EXPECT_EQ(single.attempts[0].held_until_ms, 0);

  Job job = make_job(2);
  job.spec.hold_on_failure_s = 60;
  place_and_start(job);
  on_task_exited(job, 0, 0, exit_code(1), 5'000);
  const Effects stop = on_stop_requested(job, 6'000, "alice");
  EXPECT_THAT(indexes(stop.kill), ElementsAre(1));
}

TEST(GangFailureTest, AlreadyFinishedTasksAreNotKilled) {
  Job job = make_job(3);
  place_and_start(job);
  on_task_exited(job, 0, 0, exit_code(0), 4'000);

  const Effects fx = on_task_exited(job, 0, 1, exit_code(1), 5'000);

  EXPECT_THAT(indexes(fx.kill), ElementsAre(2));
}

TEST(GangFailureTest, JobFailsOnlyAfterEveryTaskReportedItsExit) {
  Job job = make_job(3);
  place_and_start(job);
  on_task_exited(job, 0, 1, exit_code(1), 5'000);

  const Effects after_first_kill = on_task_exited(job, 0, 0, killed_by(SIGTERM), 5'100);
  const Effects after_last_kill = on_task_exited(job, 0, 2, killed_by(SIGTERM), 5'200);

  EXPECT_FALSE(after_first_kill.finished);
  EXPECT_EQ(job.state, JobState::kFailed);
  EXPECT_TRUE(after_last_kill.finished);
  EXPECT_FALSE(after_last_kill.requeue);
  EXPECT_EQ(job.finished_ms, 5'200);
  EXPECT_EQ(job.message, "task 1 exited with code 1");
}

TEST(GangFailureTest, KilledTasksEndStoppedAndOnlyTheCulpritFailed) {
  Job job = make_job(2);
  place_and_start(job);
  on_task_exited(job, 0, 1, exit_code(1), 5'000);

  on_task_exited(job, 0, 0, killed_by(SIGTERM), 5'100);

  EXPECT_EQ(job.attempts[0].tasks[0].state, TaskState::kStopped);
  EXPECT_EQ(job.attempts[0].tasks[1].state, TaskState::kFailed);
  EXPECT_EQ(job.attempts[0].tasks[1].reason, "exited with code 1");
}

TEST(GangFailureTest, TaskExitingZeroWhileAttemptEndsDoesNotSucceedTheJob) {
  Job job = make_job(2);
  place_and_start(job);
  on_task_exited(job, 0, 1, exit_code(1), 5'000);

  const Effects fx = on_task_exited(job, 0, 0, exit_code(0), 5'100);

  EXPECT_TRUE(fx.finished);
  EXPECT_EQ(job.state, JobState::kFailed);
  EXPECT_EQ(job.message, "task 1 exited with code 1");
}

TEST(OutOfMemoryTest, TheReasonNamesTheNodeAndTheLimit) {
  Job job = make_job(2);
  place_and_start(job);
  api::TaskExit oom = killed_by(SIGKILL);
  oom.out_of_memory = true;
  oom.memory_limit_bytes = int64_t{4} << 30;

  on_task_exited(job, 0, 1, oom, 5'000);

  EXPECT_EQ(job.attempts[0].failure_reason, "task 1 on node_1 was killed: out of memory (limit 4 GiB)");
  EXPECT_EQ(job.attempts[0].tasks[1].reason, "was killed: out of memory (limit 4 GiB)");
}

TEST(OutOfMemoryTest, AShellWhoseChildTheKernelKilledCountsAsKilled) {
  api::TaskExit shell = exit_code(137);
  shell.out_of_memory = true;
  shell.memory_limit_bytes = int64_t{512} << 20;
  EXPECT_EQ(describe_exit(shell), "was killed: out of memory (limit 512 MiB)");
  api::TaskExit caught = exit_code(1);
  caught.out_of_memory = true;
  EXPECT_EQ(describe_exit(caught), "exited with code 1 after the kernel killed one of its processes: out of memory");
}

TEST(GangFailureTest, FirstFailureIsTheReasonEvenWhenOthersFailLater) {
  Job job = make_job(2);
  place_and_start(job);
  on_task_exited(job, 0, 1, exit_code(3), 5'000);

  on_task_exited(job, 0, 0, exit_code(7), 5'100);

  EXPECT_EQ(job.message, "task 1 exited with code 3");
  // The task whose lines explain the failure is the first one, not the one after it.
  EXPECT_EQ(job.attempts[0].failed_task, 1);
}

TEST(GangFailureTest, AStopOrTimeoutNamesNoFailedTask) {
  Job job = make_job(2);
  place_and_start(job);
  EXPECT_EQ(job.attempts[0].failed_task, -1);
  on_stop_requested(job, 5'000);
  on_task_exited(job, 0, 0, killed_by(SIGTERM), 5'100);
  on_task_exited(job, 0, 1, killed_by(SIGTERM), 5'100);
  EXPECT_EQ(job.state, JobState::kStopped);
  EXPECT_EQ(job.attempts[0].failed_task, -1);
}

TEST(GangFailureTest, ExitCode127ReasonSaysCommandNotFound) {
  Job job = make_job(1);
  place_and_start(job);

  const Effects fx = on_task_exited(job, 0, 0, exit_code(127), 5'000);

  EXPECT_TRUE(fx.finished);
  EXPECT_EQ(job.state, JobState::kFailed);
  EXPECT_THAT(job.message, HasSubstr("command not found"));
  EXPECT_EQ(job.message, "task 0 exited with code 127 (command not found)");
}

TEST(GangFailureTest, SignalExitReasonNamesTheSignal) {
  Job job = make_job(1);
  place_and_start(job);

  on_task_exited(job, 0, 0, killed_by(SIGKILL), 5'000);

  EXPECT_EQ(job.state, JobState::kFailed);
  EXPECT_THAT(job.message, HasSubstr("SIGKILL"));
  EXPECT_EQ(job.attempts[0].tasks[0].signal, SIGKILL);
}

TEST(GangFailureTest, StartErrorReasonSaysCouldNotStart) {
  Job job = make_job(2);
  place(job);

  const Effects fx = on_task_exited(job, 0, 0, start_error("working directory could not be created"), 5'000);

  EXPECT_THAT(indexes(fx.kill), ElementsAre(1));
  on_task_exited(job, 0, 1, killed_by(SIGTERM), 5'100);
  EXPECT_EQ(job.state, JobState::kFailed);
  EXPECT_EQ(job.message, "task 0 could not start: working directory could not be created");
}

TEST(GangFailureTest, TaskThatStartsAfterTheAttemptBeganEndingIsKilled) {
  Job job = make_job(2);
  place(job);
  on_task_started(job, 0, 0, 100, 1'100);
  const Effects failure = on_task_exited(job, 0, 0, exit_code(1), 1'200);

  const Effects late_start = on_task_started(job, 0, 1, 101, 1'300);

  EXPECT_THAT(indexes(failure.kill), ElementsAre(1));  // still STARTING: killed by ref
  ASSERT_EQ(late_start.kill.size(), 1u);
  EXPECT_EQ(late_start.kill[0].task.attempt, 0);
  EXPECT_EQ(late_start.kill[0].task.task_index, 1);
  EXPECT_EQ(late_start.kill[0].node_id, "node_1");
  EXPECT_EQ(job.attempts[0].tasks[1].pid, 101);
}

TEST(GangFailureTest, DuplicateExitReportIsIgnored) {
  Job job = make_job(2);
  place_and_start(job);
  on_task_exited(job, 0, 0, exit_code(0), 5'000);

  const Effects dup = on_task_exited(job, 0, 0, exit_code(1), 5'100);

  EXPECT_FALSE(dup.changed);
  EXPECT_THAT(dup.kill, IsEmpty());
  EXPECT_EQ(job.attempts[0].tasks[0].state, TaskState::kSucceeded);
  EXPECT_FALSE(job.attempts[0].ending);
}

// --- Retries ---------------------------------------------------------------------

// Fails attempt `attempt` of a two-task job: task 0 exits 1, task 1 is then killed.
Effects fail_attempt(Job& job, int attempt, int64_t now_ms) {
  on_task_exited(job, attempt, 0, exit_code(1), now_ms);
  return on_task_exited(job, attempt, 1, killed_by(SIGTERM), now_ms + 10);
}

TEST(RetryTest, FailureWithRetriesLeftRequeuesAsPending) {
  Job job = make_job(2, /*max_retries=*/1);
  place_and_start(job);

  const Effects fx = fail_attempt(job, 0, 5'000);

  EXPECT_TRUE(fx.requeue);
  EXPECT_FALSE(fx.finished);
  EXPECT_TRUE(fx.changed);
  EXPECT_EQ(job.state, JobState::kPending);
  EXPECT_EQ(job.finished_ms, 0);
  EXPECT_EQ(job.message, "retrying after: task 0 exited with code 1; attempt 1 of 2 starts in 3s");
  EXPECT_EQ(job.retry_at_ms, 5'010 + 3'000);  // the default delay after the attempt's last task ended
  EXPECT_TRUE(has_event_containing(fx, "retrying as attempt 1 of 2 in 3s"));
}

TEST(RetryTest, EachRetryWaitsTwiceAsLongAsTheOneBeforeUpToTenMinutes) {
  Job job = make_job(1, /*max_retries=*/12);
  job.spec.retry_delay_s = 2;
  std::vector<int64_t> delays;
  int64_t now = kPlacedAtMs;
  for (int attempt = 0; attempt < 12; ++attempt) {
    place_and_start(job, now);
    fail_attempt(job, attempt, now + 100);
    delays.push_back(job.retry_at_ms - (now + 100));
    now = job.retry_at_ms;
  }
  EXPECT_EQ(delays, (std::vector<int64_t>{2'000, 4'000, 8'000, 16'000, 32'000, 64'000, 128'000, 256'000, 512'000,
                                          600'000, 600'000, 600'000}));
  // Placing the retry clears the wait.
  place(job, now);
  EXPECT_EQ(job.retry_at_ms, 0);
}

TEST(RetryTest, NoDelayStartsTheRetryNow) {
  Job job = make_job(1, /*max_retries=*/1);
  job.spec.retry_delay_s = 0;
  place_and_start(job);
  fail_attempt(job, 0, 5'000);
  EXPECT_EQ(job.retry_at_ms, 5'000);
  EXPECT_EQ(job.message, "retrying after: task 0 exited with code 1; attempt 1 of 2 starts now");
}

TEST(RetryTest, RetryOnNodeLostRetriesALostNodeButNotAFailingProgram) {
  Job lost = make_job(2, /*max_retries=*/1);
  lost.spec.retry_on.kind = api::RetryOn::Kind::kNodeLost;
  place_and_start(lost);
  on_node_lost(lost, node_id_for(1), "n1", 5'000);
  on_task_exited(lost, 0, 0, killed_by(SIGTERM), 5'100);
  EXPECT_EQ(lost.state, JobState::kPending);

  Job failing = make_job(2, /*max_retries=*/1);
  failing.spec.retry_on.kind = api::RetryOn::Kind::kNodeLost;
  place_and_start(failing);
  on_task_exited(failing, 0, 1, exit_code(2), 5'000);
  on_task_exited(failing, 0, 0, killed_by(SIGTERM), 5'100);
  EXPECT_EQ(failing.state, JobState::kFailed);
  EXPECT_EQ(failing.message,
            "task 1 exited with code 2 (not retried: retry_on is node_lost and no node was lost)");
}

TEST(RetryTest, RetryOnExitCodesRetriesThoseCodesSignalsAs128PlusNAndLostNodes) {
  auto run = [](const api::TaskExit& exit) {
    Job job = make_job(1, /*max_retries=*/1);
    job.spec.retry_on = {api::RetryOn::Kind::kExitCodes, {3, 137}};
    place_and_start(job);
    on_task_exited(job, 0, 0, exit, 5'000);
    return job;
  };
  EXPECT_EQ(run(exit_code(3)).state, JobState::kPending);
  EXPECT_EQ(run(killed_by(SIGKILL)).state, JobState::kPending);  // 128 + 9
  Job other = run(exit_code(1));
  EXPECT_EQ(other.state, JobState::kFailed);
  EXPECT_EQ(other.message, "task 0 exited with code 1 (not retried: retry_on lists exit codes 3, 137)");
  EXPECT_EQ(run(start_error("no such file")).state, JobState::kFailed);

  Job lost = make_job(1, /*max_retries=*/1);
  lost.spec.retry_on = {api::RetryOn::Kind::kExitCodes, {3}};
  place_and_start(lost);
  on_node_lost(lost, node_id_for(0), "n0", 5'000);
  EXPECT_EQ(lost.state, JobState::kPending);
}

TEST(RetryTest, SecondPlacementStartsAttemptOneAndLaunchesItsTasks) {
  Job job = make_job(2, /*max_retries=*/1);
  place_and_start(job);
  fail_attempt(job, 0, 5'000);

  const Effects fx = place(job, 6'000);

  EXPECT_EQ(job.state, JobState::kRunning);
  ASSERT_EQ(job.attempts.size(), 2u);
  EXPECT_EQ(job.attempts[1].number, 1);
  ASSERT_EQ(fx.launch.size(), 2u);
  EXPECT_EQ(fx.launch[0].task.attempt, 1);
  EXPECT_EQ(fx.launch[1].task.attempt, 1);
  EXPECT_EQ(job.started_ms, kPlacedAtMs);  // the job's first start is kept
  EXPECT_EQ(job.message, "");
}

TEST(RetryTest, FailureOfLastAttemptFailsTheJobMentioningAttempts) {
  Job job = make_job(2, /*max_retries=*/1);
  place_and_start(job);
  fail_attempt(job, 0, 5'000);
  place_and_start(job, 6'000);

  const Effects fx = fail_attempt(job, 1, 7'000);

  EXPECT_TRUE(fx.finished);
  EXPECT_FALSE(fx.requeue);
  EXPECT_EQ(job.state, JobState::kFailed);
  EXPECT_EQ(job.message, "task 0 exited with code 1 (after 2 attempts)");
}

TEST(RetryTest, SuccessOnRetrySucceedsTheJob) {
  Job job = make_job(2, /*max_retries=*/1);
  place_and_start(job);
  fail_attempt(job, 0, 5'000);
  place_and_start(job, 6'000);

  on_task_exited(job, 1, 0, exit_code(0), 7'000);
  const Effects fx = on_task_exited(job, 1, 1, exit_code(0), 7'001);

  EXPECT_TRUE(fx.finished);
  EXPECT_EQ(job.state, JobState::kSucceeded);
}

TEST(RetryTest, StaleExitForAnOldAttemptIsIgnored) {
  Job job = make_job(2, /*max_retries=*/1);
  place_and_start(job);
  fail_attempt(job, 0, 5'000);
  place_and_start(job, 6'000);

  const Effects fx = on_task_exited(job, /*attempt=*/0, 0, exit_code(1), 6'500);

  EXPECT_FALSE(fx.changed);
  EXPECT_THAT(fx.kill, IsEmpty());
  EXPECT_THAT(fx.events, IsEmpty());
  EXPECT_EQ(job.state, JobState::kRunning);
  EXPECT_FALSE(job.attempts[1].ending);
  EXPECT_EQ(job.attempts[1].tasks[0].state, TaskState::kRunning);
}

TEST(RetryTest, StaleStartForAnOldAttemptIsIgnored) {
  Job job = make_job(2, /*max_retries=*/1);
  place_and_start(job);
  fail_attempt(job, 0, 5'000);
  place(job, 6'000);

  const Effects fx = on_task_started(job, /*attempt=*/0, 0, 999, 6'500);

  EXPECT_FALSE(fx.changed);
  EXPECT_THAT(fx.kill, IsEmpty());
  EXPECT_EQ(job.attempts[1].tasks[0].state, TaskState::kStarting);
  EXPECT_EQ(job.attempts[1].tasks[0].pid, 0);
}

TEST(RetryTest, MessagesWhilePendingForRetryAreIgnored) {
  Job job = make_job(2, /*max_retries=*/1);
  place_and_start(job);
  fail_attempt(job, 0, 5'000);

  const Effects fx = on_task_exited(job, 0, 0, exit_code(0), 5'500);

  EXPECT_FALSE(fx.changed);
  EXPECT_EQ(job.state, JobState::kPending);
}

TEST(StaleMessageTest, OutOfRangeTaskIndexIsIgnored) {
  Job job = make_job(2);
  place_and_start(job);

  const Effects exited = on_task_exited(job, 0, 7, exit_code(1), 5'000);
  const Effects started = on_task_started(job, 0, -1, 1, 5'000);

  EXPECT_FALSE(exited.changed);
  EXPECT_FALSE(started.changed);
  EXPECT_EQ(job.state, JobState::kRunning);
  EXPECT_FALSE(job.attempts[0].ending);
}

TEST(StaleMessageTest, MessagesForAnAttemptNeverPlacedAreIgnored) {
  Job job = make_job(2);
  place_and_start(job);

  const Effects fx = on_task_exited(job, /*attempt=*/1, 0, exit_code(1), 5'000);

  EXPECT_FALSE(fx.changed);
  EXPECT_FALSE(job.attempts[0].ending);
}

// --- Stop ------------------------------------------------------------------------

TEST(StopTest, PendingJobStopsAtOnce) {
  Job job = make_job(2);

  const Effects fx = on_stop_requested(job, 2'000);

  EXPECT_TRUE(fx.finished);
  EXPECT_TRUE(fx.changed);
  EXPECT_THAT(fx.kill, IsEmpty());
  EXPECT_EQ(job.state, JobState::kStopped);
  EXPECT_EQ(job.finished_ms, 2'000);
  EXPECT_EQ(job.message, "stopped by user");
}

TEST(StopTest, RunningJobKillsEveryTaskAndWaitsForThem) {
  Job job = make_job(2);
  place_and_start(job);

  const Effects fx = on_stop_requested(job, 3'000);

  EXPECT_THAT(indexes(fx.kill), ElementsAre(0, 1));
  EXPECT_FALSE(fx.finished);
  EXPECT_EQ(job.state, JobState::kRunning);
  EXPECT_TRUE(has_event_containing(fx, "stop requested by user"));
}

TEST(StopTest, RunningJobIsStoppedOnlyAfterAllTasksExited) {
  Job job = make_job(2);
  place_and_start(job);
  on_stop_requested(job, 3'000);

  const Effects first = on_task_exited(job, 0, 0, killed_by(SIGTERM), 3'100);
  const Effects last = on_task_exited(job, 0, 1, exit_code(0), 3'200);

  EXPECT_FALSE(first.finished);
  EXPECT_TRUE(last.finished);
  EXPECT_FALSE(last.requeue);
  EXPECT_EQ(job.state, JobState::kStopped);
  EXPECT_EQ(job.finished_ms, 3'200);
  EXPECT_EQ(job.message, "stopped by user");
}

TEST(StopTest, StoppedJobIsNotRetriedEvenWithRetriesLeft) {
  Job job = make_job(1, /*max_retries=*/3);
  place_and_start(job);
  on_stop_requested(job, 3'000);

  const Effects fx = on_task_exited(job, 0, 0, killed_by(SIGTERM), 3'100);

  EXPECT_FALSE(fx.requeue);
  EXPECT_EQ(job.state, JobState::kStopped);
}

TEST(StopTest, StopOnFinishedJobHasNoEffects) {
  Job job = make_job(1);
  place_and_start(job);
  on_task_exited(job, 0, 0, exit_code(0), 3'000);

  const Effects fx = on_stop_requested(job, 4'000);

  EXPECT_FALSE(fx.changed);
  EXPECT_FALSE(fx.finished);
  EXPECT_THAT(fx.kill, IsEmpty());
  EXPECT_THAT(fx.events, IsEmpty());
  EXPECT_EQ(job.state, JobState::kSucceeded);
  EXPECT_FALSE(job.stop_requested);
}

// --- Preemption -------------------------------------------------------------------

TEST(PreemptionTest, TasksGetTheGraceThenTheJobIsRequeuedWithoutSpendingARetry) {
  Job job = make_job(2, /*max_retries=*/0);
  place_and_start(job);

  const Effects fx = on_preempted(job, "preempted by job job_b (priority 100)", 30'000, 3'000);
  EXPECT_THAT(indexes(fx.kill), ElementsAre(0, 1));
  EXPECT_EQ(fx.kill_grace_ms, 30'000);
  EXPECT_TRUE(has_event_containing(fx, "preempted by job job_b (priority 100); stopping its tasks (SIGTERM, then "
                                       "SIGKILL after 30s)"));
  on_task_exited(job, 0, 0, killed_by(SIGTERM), 3'100);
  const Effects last = on_task_exited(job, 0, 1, exit_code(143), 3'200);

  EXPECT_TRUE(last.requeue);
  EXPECT_FALSE(last.finished);
  EXPECT_EQ(job.state, JobState::kPending);
  EXPECT_EQ(job.retry_at_ms, 3'200);
  EXPECT_TRUE(job.attempts[0].preempted);
  EXPECT_THAT(job.message, StartsWith("preempted by job job_b (priority 100); back in the queue"));
  // Its one attempt is still to come: a failure now ends it, naming one attempt.
  place_and_start(job, 4'000);
  on_task_exited(job, 1, 0, exit_code(1), 5'000);
  on_task_exited(job, 1, 1, killed_by(SIGTERM), 5'100);
  EXPECT_EQ(job.state, JobState::kFailed);
  EXPECT_THAT(job.message, Not(HasSubstr("after")));
}

TEST(PreemptionTest, ARetryAfterAPreemptionCountsOnlyRealAttempts) {
  Job job = make_job(1, /*max_retries=*/1);
  place_and_start(job);
  on_preempted(job, "preempted by job job_b", 1'000, 2'000);
  on_task_exited(job, 0, 0, killed_by(SIGTERM), 2'100);
  place_and_start(job, 3'000);

  const Effects fx = on_task_exited(job, 1, 0, exit_code(1), 4'000);

  EXPECT_TRUE(fx.requeue);
  EXPECT_TRUE(has_event_containing(fx, "retrying as attempt 2 (try 2 of 2; preempted attempts do not count)"));
}

TEST(PreemptionTest, AJobStoppingAlreadyOrNotRunningIsNotPreempted) {
  Job pending = make_job(1);
  EXPECT_FALSE(on_preempted(pending, "x", 1'000, 2'000).changed);
  Job stopping = make_job(1);
  place_and_start(stopping);
  on_stop_requested(stopping, 2'000);
  EXPECT_FALSE(on_preempted(stopping, "x", 1'000, 2'100).changed);
  EXPECT_FALSE(stopping.attempts[0].preempted);
}

TEST(PreemptionTest, AStopDuringTheGraceStopsTheJobForGood) {
  Job job = make_job(1, /*max_retries=*/3);
  place_and_start(job);
  on_preempted(job, "preempted by job job_b", 1'000, 2'000);
  on_stop_requested(job, 2'100);

  const Effects fx = on_task_exited(job, 0, 0, killed_by(SIGTERM), 2'200);

  EXPECT_TRUE(fx.finished);
  EXPECT_EQ(job.state, JobState::kStopped);
}

// --- Timeout ---------------------------------------------------------------------

TEST(TimeoutTest, RunningJobIsKilledThenFailsWithTimedOut) {
  Job job = make_job(2, /*max_retries=*/2, /*timeout_s=*/30);
  place_and_start(job);

  const Effects timeout = on_timed_out(job, 31'000);
  on_task_exited(job, 0, 0, killed_by(SIGTERM), 31'100);
  const Effects last = on_task_exited(job, 0, 1, killed_by(SIGKILL), 31'200);

  EXPECT_THAT(indexes(timeout.kill), ElementsAre(0, 1));
  EXPECT_FALSE(timeout.finished);
  EXPECT_TRUE(last.finished);
  EXPECT_FALSE(last.requeue);  // a timeout is not retried
  EXPECT_EQ(job.state, JobState::kFailed);
  EXPECT_THAT(job.message, StartsWith("timed out after"));
  EXPECT_EQ(job.message, "timed out after 30s");
}

TEST(TimeoutTest, PendingJobFailsAtOnce) {
  Job job = make_job(2, 0, /*timeout_s=*/1.5);

  const Effects fx = on_timed_out(job, 2'000);

  EXPECT_TRUE(fx.finished);
  EXPECT_EQ(job.state, JobState::kFailed);
  EXPECT_EQ(job.message, "timed out after 1.5s");
}

TEST(TimeoutTest, FinishedJobHasNoEffects) {
  Job job = make_job(1, 0, 30);
  place_and_start(job);
  on_task_exited(job, 0, 0, exit_code(0), 3'000);

  const Effects fx = on_timed_out(job, 31'000);

  EXPECT_FALSE(fx.changed);
  EXPECT_THAT(fx.events, IsEmpty());
  EXPECT_EQ(job.state, JobState::kSucceeded);
}

// A long timeout is written in plain seconds, not scientific notation.
TEST(TimeoutTest, LongTimeoutIsWrittenInPlainSeconds) {
  Job job = make_job(1, 0, /*timeout_s=*/1'209'600);

  on_timed_out(job, 2'000);

  EXPECT_EQ(job.message, "timed out after 1209600s");
}

// --- Node lost -------------------------------------------------------------------

TEST(NodeLostTest, TaskOnLostNodeFailsAndOthersAreKilled) {
  Job job = make_job(3);
  place_and_start(job);

  const Effects fx = on_node_lost(job, "node_1", "worker-b", 5'000);

  const TaskRecord& lost = job.attempts[0].tasks[1];
  EXPECT_EQ(lost.state, TaskState::kFailed);
  EXPECT_THAT(lost.reason, HasSubstr("worker-b"));
  EXPECT_THAT(indexes(fx.kill), ElementsAre(0, 2));
  EXPECT_FALSE(fx.finished);
}

TEST(NodeLostTest, JobFailsNamingTheNodeOnceTheOthersExited) {
  Job job = make_job(3);
  place_and_start(job);
  on_node_lost(job, "node_1", "worker-b", 5'000);

  on_task_exited(job, 0, 0, killed_by(SIGTERM), 5'100);
  const Effects fx = on_task_exited(job, 0, 2, killed_by(SIGTERM), 5'200);

  EXPECT_TRUE(fx.finished);
  EXPECT_EQ(job.state, JobState::kFailed);
  EXPECT_EQ(job.message, "task 1 lost: node worker-b stopped responding");
}

TEST(NodeLostTest, SingleTaskJobOnLostNodeFailsAtOnce) {
  Job job = make_job(1);
  place_and_start(job);

  const Effects fx = on_node_lost(job, "node_0", "worker-a", 5'000);

  EXPECT_TRUE(fx.finished);
  EXPECT_TRUE(fx.changed);
  EXPECT_EQ(job.state, JobState::kFailed);
  EXPECT_THAT(job.message, HasSubstr("node worker-a"));
}

TEST(NodeLostTest, EveryTaskOnTheLostNodeEndsAndTasksElsewhereAreKilled) {
  Job job = make_job(3);
  const std::vector<PlacedTask> tasks = {
      {"node_a", "10.0.0.1", {}}, {"node_a", "10.0.0.1", {}}, {"node_b", "10.0.0.2", {}}};
  on_placed(job, tasks, kMasterPort, kPlacedAtMs);
  for (int i = 0; i < 3; ++i) on_task_started(job, 0, i, 100 + i, kPlacedAtMs + 1);

  const Effects fx = on_node_lost(job, "node_a", "worker-a", 5'000);

  EXPECT_EQ(job.attempts[0].tasks[0].state, TaskState::kFailed);
  EXPECT_EQ(job.attempts[0].tasks[1].state, TaskState::kStopped);
  EXPECT_EQ(job.attempts[0].tasks[1].reason, "node worker-a lost");
  EXPECT_THAT(indexes(fx.kill), Contains(2));
  EXPECT_FALSE(fx.finished);
}

TEST(NodeLostTest, UnrelatedNodeChangesNothing) {
  Job job = make_job(2);
  place_and_start(job);

  const Effects fx = on_node_lost(job, "node_9", "worker-z", 5'000);

  EXPECT_FALSE(fx.changed);
  EXPECT_THAT(fx.kill, IsEmpty());
  EXPECT_FALSE(job.attempts[0].ending);
}

TEST(NodeLostTest, NodeLostWhileStoppingMarksItsTasksStopped) {
  Job job = make_job(2);
  place_and_start(job);
  on_stop_requested(job, 3'000);

  const Effects lost = on_node_lost(job, "node_0", "worker-a", 3'100);
  const Effects last = on_task_exited(job, 0, 1, killed_by(SIGTERM), 3'200);

  EXPECT_TRUE(lost.changed);
  EXPECT_EQ(job.attempts[0].tasks[0].state, TaskState::kStopped);
  EXPECT_TRUE(last.finished);
  EXPECT_EQ(job.state, JobState::kStopped);
}

// A node loss that fails a task while others still run changes the job, so watchers
// of the job must be told (JobController notifies on `changed`).
TEST(NodeLostTest, FailingATaskMarksTheJobChanged) {
  Job job = make_job(3);
  place_and_start(job);

  const Effects fx = on_node_lost(job, "node_1", "worker-b", 5'000);

  EXPECT_TRUE(fx.changed);
}

// --- describe_exit ---------------------------------------------------------------

TEST(DescribeExitTest, ExitCodes) {
  EXPECT_EQ(describe_exit(exit_code(0)), "exited with code 0");
  EXPECT_EQ(describe_exit(exit_code(1)), "exited with code 1");
  EXPECT_EQ(describe_exit(exit_code(126)), "exited with code 126 (command not executable)");
  EXPECT_EQ(describe_exit(exit_code(127)), "exited with code 127 (command not found)");
}

TEST(DescribeExitTest, SignalsAreNamed) {
  EXPECT_EQ(describe_exit(killed_by(SIGKILL)), "was killed by signal 9 (SIGKILL)");
  EXPECT_EQ(describe_exit(killed_by(SIGSEGV)), "was killed by signal 11 (SIGSEGV)");
}

TEST(DescribeExitTest, StartErrorWinsOverEverythingElse) {
  api::TaskExit exit = start_error("no such user");
  exit.exit_code = 1;
  exit.signal = SIGKILL;

  EXPECT_EQ(describe_exit(exit), "could not start: no such user");
}

TEST(DescribeExitTest, MissingExitCodeReadsAsMinusOne) { EXPECT_EQ(describe_exit(api::TaskExit{}), "exited with code -1"); }

// --- timeouts ----------------------------------------------------------------------

TEST(TimeoutDeadlineTest, NoneWithoutATimeoutOrBeforeTheFirstPlacement) {
  Job job = make_job(2);
  EXPECT_EQ(timeout_deadline(job), std::nullopt);
  job = make_job(2, 0, 30.0);
  EXPECT_EQ(timeout_deadline(job), std::nullopt);  // PENDING: the clock has not started
}

TEST(TimeoutDeadlineTest, WholeRunCountsFromTheFirstPlacementAcrossRetries) {
  Job job = make_job(1, 2, 30.0);
  place_and_start(job, 1'000);
  EXPECT_EQ(timeout_deadline(job), (Deadline{31'000, std::nullopt}));
  on_task_exited(job, 0, 0, exit_code(1), 5'000);
  place(job, 6'000);
  EXPECT_EQ(timeout_deadline(job), (Deadline{31'000, std::nullopt}));
}

TEST(TimeoutDeadlineTest, PerAttemptBelongsToTheCurrentAttempt) {
  Job job = make_job(1, 2, 30.0);
  job.spec.timeout_per_attempt = true;
  place_and_start(job, 1'000);
  const Deadline first{31'000, 0};
  EXPECT_EQ(timeout_deadline(job), first);
  on_task_exited(job, 0, 0, exit_code(1), 5'000);
  EXPECT_EQ(timeout_deadline(job), std::nullopt);  // between attempts
  place(job, 6'000);
  EXPECT_EQ(timeout_deadline(job), (Deadline{36'000, 1}));
  // The first attempt's deadline firing late changes nothing.
  Effects fx = on_deadline(job, first, 31'000);
  EXPECT_FALSE(fx.changed);
  EXPECT_TRUE(fx.kill.empty());
  EXPECT_FALSE(job.timed_out);
}

TEST(TimeoutDeadlineTest, ADeadlineThatStillAppliesTimesTheJobOut) {
  Job job = make_job(2, 0, 30.0);
  place_and_start(job, 1'000);
  Effects fx = on_deadline(job, *timeout_deadline(job), 31'000);
  EXPECT_TRUE(job.timed_out);
  EXPECT_EQ(indexes(fx.kill), (std::vector<int>{0, 1}));
  EXPECT_EQ(timeout_deadline(job), std::nullopt) << "one timeout per run";
}

// --- pending reasons -----------------------------------------------------------------

TEST(OnPendingTest, LoggedWhenTheKindChangesNotWhenOnlyTheWordsDo) {
  Job job = make_job(1);
  Effects fx = on_pending(job, sched::PendingKind::kWaitingBehind, "waiting behind job job_a (resources reserved for it)", 1);
  EXPECT_TRUE(fx.changed);
  EXPECT_EQ(fx.events, std::vector<std::string>{"pending: waiting behind job job_a (resources reserved for it)"});
  fx = on_pending(job, sched::PendingKind::kWaitingBehind, "waiting behind job job_b (resources reserved for it)", 2);
  EXPECT_FALSE(fx.changed);
  EXPECT_TRUE(fx.events.empty());
  EXPECT_EQ(job.message, "waiting behind job job_b (resources reserved for it)");  // shown as it is now
  fx = on_pending(job, sched::PendingKind::kInfeasible, "needs 8 GPUs per task; largest node has 4", 3);
  EXPECT_EQ(fx.events, std::vector<std::string>{"pending: cannot be placed: needs 8 GPUs per task; largest node has 4"});
  EXPECT_EQ(job.pending_kind, sched::PendingKind::kInfeasible);
}

TEST(OnPendingTest, IgnoredForAJobThatIsNotPending) {
  Job job = make_job(1);
  place(job);
  Effects fx = on_pending(job, sched::PendingKind::kNoNodes, "no alive nodes", 1);
  EXPECT_FALSE(fx.changed);
  EXPECT_EQ(job.message, "");
}

TEST(OnPendingTest, PlacementClearsTheReasonAndItsKind) {
  Job job = make_job(1);
  on_pending(job, sched::PendingKind::kNoNodes, "no alive nodes", 1);
  place(job);
  EXPECT_EQ(job.message, "");
  EXPECT_EQ(job.pending_kind, std::nullopt);
}

}  // namespace
}  // namespace ag::head
