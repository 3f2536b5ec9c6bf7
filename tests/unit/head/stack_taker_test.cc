#include "head/exec/stack_taker.h"

#include <gtest/gtest.h>

#include "fakes/fake_clock.h"
#include "fakes/fake_worker_channel.h"

namespace ag::head {
namespace {

using api::StackReport;
using api::StackRequest;

class StackTakerTest : public ::testing::Test {
 protected:
  // Takes the stacks of `targets`; the answers land in `taken_` (once).
  void take(const std::vector<StackTaker::Target>& targets) {
    taker_.take(targets, [this](std::vector<StackTaker::Stacks> stacks) {
      ++answers_;
      taken_ = std::move(stacks);
    });
  }

  testing::FakeClock clock_;
  testing::FakeWorkerChannel channel_;
  StackTaker taker_{clock_, channel_};
  int answers_ = 0;
  std::vector<StackTaker::Stacks> taken_;
};

TEST_F(StackTakerTest, EachTaskIsAskedOnItsNodeAndTheAnswersComeInOrder) {
  take({{{"job_a", 0, 0}, "node_1"}, {{"job_a", 0, 1}, "node_2"}});
  auto sent = channel_.take<StackRequest>();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0].first, "node_1");
  EXPECT_EQ(sent[1].second.task, (api::TaskKey{"job_a", 0, 1}));
  // Answers in any order; the callback runs once, when both are in.
  taker_.on_report("node_2", StackReport{sent[1].second.request, sent[1].second.task, false, "tree", ""});
  EXPECT_EQ(answers_, 0);
  taker_.on_report("node_1", StackReport{sent[0].second.request, sent[0].second.task, true, "Thread 0x1", ""});
  ASSERT_EQ(answers_, 1);
  ASSERT_EQ(taken_.size(), 2u);
  EXPECT_TRUE(taken_[0].python);
  EXPECT_EQ(taken_[0].text, "Thread 0x1");
  EXPECT_EQ(taken_[1].node_id, "node_2");
  EXPECT_EQ(taken_[1].text, "tree");
  EXPECT_EQ(taker_.waiting(), 0u);
  // A late duplicate changes nothing.
  taker_.on_report("node_1", StackReport{sent[0].second.request, sent[0].second.task, true, "again", ""});
  EXPECT_EQ(answers_, 1);
}

TEST_F(StackTakerTest, AnotherNodesOrAnotherTasksAnswerIsIgnored) {
  take({{{"job_a", 0, 0}, "node_1"}});
  auto sent = channel_.take<StackRequest>();
  ASSERT_EQ(sent.size(), 1u);
  taker_.on_report("node_9", StackReport{sent[0].second.request, sent[0].second.task, true, "forged", ""});
  taker_.on_report("node_1", StackReport{sent[0].second.request, {"job_b", 0, 0}, true, "forged", ""});
  EXPECT_EQ(answers_, 0);
  taker_.on_report("node_1", StackReport{sent[0].second.request, sent[0].second.task, true, "real", ""});
  ASSERT_EQ(answers_, 1);
  EXPECT_EQ(taken_[0].text, "real");
}

TEST_F(StackTakerTest, AnUnreachableOrSilentNodeIsReportedAsSuch) {
  channel_.unreachable.insert("node_gone");
  take({{{"job_a", 0, 0}, "node_gone"}, {{"job_a", 0, 1}, "node_mute"}});
  EXPECT_EQ(answers_, 0);
  clock_.advance(StackTaker::kAnswerMs - 1);
  EXPECT_EQ(answers_, 0);
  clock_.advance(1);
  ASSERT_EQ(answers_, 1);
  EXPECT_NE(taken_[0].error.find("node node_gone is not connected"), std::string::npos) << taken_[0].error;
  EXPECT_NE(taken_[1].error.find("node node_mute did not answer within 10 s"), std::string::npos) << taken_[1].error;
  EXPECT_EQ(taker_.waiting(), 0u);
}

TEST_F(StackTakerTest, AWorkersErrorIsPassedOn) {
  take({{{"job_a", 0, 0}, "node_1"}});
  auto sent = channel_.take<StackRequest>();
  taker_.on_report("node_1", StackReport{sent[0].second.request, sent[0].second.task, false, "", "task gone"});
  ASSERT_EQ(answers_, 1);
  EXPECT_EQ(taken_[0].error, "task gone");
}

}  // namespace
}  // namespace ag::head
