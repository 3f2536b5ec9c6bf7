// The daemons' scheduling policy (common/scheduling.h): every thread of the process,
// those started before the call and after it.
#include "common/scheduling.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>

namespace ag {
namespace {

pid_t this_thread() { return static_cast<pid_t>(::syscall(SYS_gettid)); }

TEST(SchedulingTest, EveryThreadYieldsToTasksAndSoDoThoseStartedLater) {
  ASSERT_EQ(::sched_getscheduler(0), SCHED_OTHER);
  EXPECT_FALSE(runs_as_daemon());
  std::atomic<pid_t> earlier{0};
  std::atomic<bool> done{false};
  std::thread before([&] {
    earlier = this_thread();
    while (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  while (earlier == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));

  EXPECT_EQ(yield_to_tasks(), "");

  EXPECT_EQ(::sched_getscheduler(0), SCHED_BATCH);
  EXPECT_TRUE(runs_as_daemon());
  EXPECT_EQ(::sched_getscheduler(earlier), SCHED_BATCH) << "a thread already running";
  int later = -1;
  std::thread after([&] { later = ::sched_getscheduler(0); });
  after.join();
  EXPECT_EQ(later, SCHED_BATCH) << "a thread started afterwards";
  done = true;
  before.join();

  const sched_param normal{};
  ASSERT_EQ(::sched_setscheduler(0, SCHED_OTHER, &normal), 0) << "back, for what else runs in this process";
}

// Only the policy the daemon set is reset for its tasks: one it was started under
// (an operator's `chrt --idle`) is theirs too.
TEST(SchedulingTest, OnlyTheDaemonsOwnPolicyIsOneToReset) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const sched_param none{};
    int failed = 0;
    if (::sched_setscheduler(0, SCHED_IDLE, &none) != 0 || runs_as_daemon()) failed |= 1;
    if (::sched_setscheduler(0, SCHED_BATCH, &none) != 0 || !runs_as_daemon()) failed |= 2;
    ::_exit(failed);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status) & 1, 0) << "SCHED_IDLE, set by whoever started the daemon, is not reset";
  EXPECT_EQ(WEXITSTATUS(status) & 2, 0) << "SCHED_BATCH, the daemon's own, is";
}

}  // namespace
}  // namespace ag
