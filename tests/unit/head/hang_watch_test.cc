#include "head/exec/hang_watch.h"

#include <gtest/gtest.h>

#include "job_layer_fixture.h"

namespace ag::head {
namespace {

class HangWatchTest : public JobLayerTest {
 protected:
  // A two-task job with a 10 s hang timeout, both tasks running; the watch has seen it once.
  std::string running_job(bool fail_on_hang, int max_retries = 0) {
    add_node("node_a");
    add_node("node_b");
    api::JobSpec s = spec(2);
    s.hang_timeout_s = 10;
    s.fail_on_hang = fail_on_hang;
    s.max_retries = max_retries;
    s.placement = api::Placement::kSpread;
    const std::string id = submit(s);
    start_all(channel_.take<api::Launch>());
    watch_.check();
    return id;
  }

  void write_output(const std::string& id, int task, const std::string& text) {
    const api::TaskKey key{id, job(id).attempts.back().number, task};
    ASSERT_TRUE(logs_.append(key, logs_.size(key), text).ok());
  }

  // Moves the clock on in one-second checks, as the head does.
  void pass(int seconds) {
    for (int i = 0; i < seconds; ++i) {
      clock_.advance(1000);
      watch_.check();
    }
  }

  // Answers every stack request sent so far, as the workers would.
  void answer_stacks() {
    for (const auto& [node, request] : channel_.take<api::StackRequest>()) {
      stacks_.on_report(node, {request.request, request.task, true, "Thread 0x1:\n  File \"x.py\", line 3 in wait", ""});
    }
    clock_.run_ready();
  }

  bool has_event(const std::string& id, const std::string& text) {
    for (const auto& e : event_texts(id)) {
      if (e.find(text) != std::string::npos) return true;
    }
    return false;
  }

  JobUsage usage_;
  StackTaker stacks_{clock_, channel_};
  HangWatch watch_{{clock_, clock_, *jobs_, logs_, usage_, stacks_}, std::nullopt};
};

TEST_F(HangWatchTest, NoOutputAndNoCpuForTheTimeoutIsAHangRecordedWithEveryRanksStacks) {
  const std::string id = running_job(false);
  pass(9);
  EXPECT_TRUE(channel_.take<api::StackRequest>().empty()) << "not yet: 9 s of 10";
  pass(1);
  EXPECT_TRUE(has_event(id, "hung: no progress for 10s (ranks 0-1 wrote no output"));
  auto requests = channel_.take<api::StackRequest>();
  ASSERT_EQ(requests.size(), 2u);
  for (const auto& [node, request] : requests) {
    stacks_.on_report(node, {request.request, request.task, true, "Thread 0x1:\n  File \"x.py\", line 3 in wait", ""});
  }
  clock_.run_ready();
  EXPECT_TRUE(has_event(id, "stacks of task 0 (taken by the hang watch):\nThread 0x1"));
  EXPECT_TRUE(has_event(id, "stacks of task 1 (taken by the hang watch)"));
  // Only reported: the job runs on, and the same hang is not reported again.
  EXPECT_EQ(job(id).state, JobState::kRunning);
  EXPECT_TRUE(channel_.take<api::Kill>().empty());
  pass(30);
  EXPECT_TRUE(channel_.take<api::StackRequest>().empty());
}

TEST_F(HangWatchTest, OutputOrCpuUseIsProgress) {
  const std::string id = running_job(false);
  pass(8);
  write_output(id, 1, "step 12\n");
  pass(8);
  EXPECT_TRUE(channel_.take<api::StackRequest>().empty()) << "output 8 s ago";
  // Busy without output (a long computation): not hung either.
  for (int i = 0; i < 20; ++i) {
    JobUsage::Report report;
    report.usage = {{id, 0, 0}, 50.0, 1 << 20};
    usage_.record({report}, clock_.now_ms());
    pass(1);
  }
  EXPECT_TRUE(channel_.take<api::StackRequest>().empty()) << "it used half a CPU";
  // Idle from here on: hung 10 s later.
  pass(10 + 2 * JobUsage::kBucketMs / 1000);
  EXPECT_EQ(channel_.take<api::StackRequest>().size(), 2u);
}

TEST_F(HangWatchTest, OnHangFailEndsTheAttemptAfterTheStacksAndRetriesIt) {
  const std::string id = running_job(true, 1);
  pass(10);
  EXPECT_TRUE(has_event(id, "then ending attempt 0 (on_hang: fail)"));
  EXPECT_TRUE(channel_.take<api::Kill>().empty()) << "the stacks are taken first";
  answer_stacks();
  EXPECT_EQ(channel_.take<api::Kill>().size(), 2u);
  exit_all(id, 0, 2, 143);
  EXPECT_TRUE(has_event(id, "attempt 0 failed (no progress for 10s); all its tasks are dead; retrying as attempt 1"));
  // The retry is watched afresh.
  clock_.advance(5000);
  clock_.run_ready();
  start_all(channel_.take<api::Launch>());
  ASSERT_EQ(job(id).attempts.size(), 2u);
  pass(10);  // the first check of the new attempt starts its clock
  EXPECT_TRUE(channel_.take<api::StackRequest>().empty());
  pass(1);
  EXPECT_EQ(channel_.take<api::StackRequest>().size(), 2u);
}

TEST_F(HangWatchTest, AJobWithoutAHangTimeoutIsWatchedOnlyWithTheHeadsDefault) {
  add_node("node_a");
  const std::string id = submit(spec(1));
  start_all(channel_.take<api::Launch>());
  pass(120);
  EXPECT_TRUE(channel_.take<api::StackRequest>().empty());
  HangWatch with_default({clock_, clock_, *jobs_, logs_, usage_, stacks_}, 60.0);
  with_default.check();
  clock_.advance(60000);
  with_default.check();
  EXPECT_EQ(channel_.take<api::StackRequest>().size(), 1u);
  EXPECT_TRUE(has_event(id, "hung: no progress for 1m (rank 0 wrote no output"));
}

TEST_F(HangWatchTest, AllocationsAndInteractiveJobsAreIdleByDesignAndNotWatched) {
  add_node("node_a", 8);
  api::JobSpec alloc = spec(1);
  alloc.allocation = true;
  alloc.entrypoint = api::kHoldingEntrypoint;
  api::JobSpec interactive = spec(1);
  interactive.interactive = true;
  submit(alloc);
  submit(interactive);
  start_all(channel_.take<api::Launch>());
  HangWatch with_default({clock_, clock_, *jobs_, logs_, usage_, stacks_}, 5.0);
  for (int i = 0; i < 20; ++i) {
    clock_.advance(1000);
    with_default.check();
  }
  EXPECT_TRUE(channel_.take<api::StackRequest>().empty());
}

TEST(HangWatchFormatTest, DurationsReadAsTheFlagsAreWritten) {
  EXPECT_EQ(HangWatch::format_duration(10), "10s");
  EXPECT_EQ(HangWatch::format_duration(90), "90s");
  EXPECT_EQ(HangWatch::format_duration(300), "5m");
  EXPECT_EQ(HangWatch::format_duration(5400), "1h30m");
  EXPECT_EQ(HangWatch::format_duration(3601), "1h1s");
}

}  // namespace
}  // namespace ag::head
