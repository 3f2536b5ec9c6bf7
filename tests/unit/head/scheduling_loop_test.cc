// SchedulingLoop over a fake clock: requests coalesce into one posted pass; the retry
// timer keeps the earliest time; the window widens while passes place most of it and
// chains a pass when full, and narrows again; set-aside jobs come back when the
// cluster changes; nothing runs once the loop is gone.
#include "head/jobs/scheduling_loop.h"

#include <gtest/gtest.h>

#include "fakes/fake_clock.h"

namespace ag::head {
namespace {

using testing::FakeClock;

TEST(SchedulingLoopTest, RequestsCoalesceIntoOnePass) {
  FakeClock clock;
  int passes = 0;
  SchedulingLoop loop(clock, clock, [&] { ++passes; });
  loop.request();
  loop.request();
  loop.request();
  clock.run_ready();
  EXPECT_EQ(passes, 1);
  loop.request();
  clock.run_ready();
  EXPECT_EQ(passes, 2);
}

TEST(SchedulingLoopTest, ThePassAtARetryTimeKeepsTheEarliest) {
  FakeClock clock;
  std::vector<int64_t> ran_at;
  SchedulingLoop loop(clock, clock, [&] { ran_at.push_back(clock.now_ms()); });
  const int64_t now = clock.now_ms();
  loop.at(now + 5000);
  loop.at(now + 2000);
  loop.at(now + 9000);  // later than the armed one: nothing changes
  clock.advance(10'000);
  EXPECT_EQ(ran_at, std::vector<int64_t>{now + 2000});
}

TEST(SchedulingLoopTest, TheWindowWidensWhilePassesPlaceMostOfItAndNarrowsAgain) {
  FakeClock clock;
  int passes = 0;
  SchedulingLoop loop(clock, clock, [&] { ++passes; });
  EXPECT_EQ(loop.window(), SchedulingLoop::kMaxJobsPerPass);
  loop.passed(64, 60);  // full, mostly placed: wider, and another pass
  EXPECT_EQ(loop.window(), 256u);
  clock.run_ready();
  EXPECT_EQ(passes, 1);
  loop.passed(256, 256);
  loop.passed(1024, 1024);
  EXPECT_EQ(loop.window(), SchedulingLoop::kWidestPass);
  loop.passed(4096, 4096);
  EXPECT_EQ(loop.window(), SchedulingLoop::kWidestPass) << "no wider than the widest";
  loop.passed(4096, 10);  // full but mostly blocked: narrow again, still chained
  EXPECT_EQ(loop.window(), SchedulingLoop::kMaxJobsPerPass);
  clock.run_ready();
  passes = 0;
  loop.passed(64, 0);  // placed nothing: the chain ends
  loop.passed(10, 10);  // not full: no chain either
  clock.run_ready();
  EXPECT_EQ(passes, 0);
}

TEST(SchedulingLoopTest, SetAsideJobsComeBackWhenTheClusterChanges) {
  FakeClock clock;
  SchedulingLoop loop(clock, clock, [] {});
  loop.set_aside_job("job_a");
  loop.set_aside_job("job_b");
  loop.take_back("job_b");
  EXPECT_TRUE(loop.set_aside("job_a"));
  EXPECT_FALSE(loop.set_aside("job_b"));
  loop.cluster_changed();
  EXPECT_FALSE(loop.set_aside("job_a"));
}

TEST(SchedulingLoopTest, NothingRunsOnceTheLoopIsGone) {
  FakeClock clock;
  int passes = 0;
  {
    SchedulingLoop loop(clock, clock, [&] { ++passes; });
    loop.request();
    loop.at(clock.now_ms() + 1000);
  }
  clock.advance(5000);
  EXPECT_EQ(passes, 0);
}

}  // namespace
}  // namespace ag::head
