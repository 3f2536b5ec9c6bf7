// LogWaiters and LogSyncer alone. A waiter is woken only once the log passes its offset
// (all of them once it closes), a cancelled one never; a deleted job's waiters are
// handed back. A sync's after_synced waits for every sync under way of that log, on
// the io queue when the syncer has a thread; a deleted job's waiting callbacks are
// handed back.
#include "head/logs/log_syncer.h"
#include "head/logs/log_waiters.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "fakes/fake_clock.h"

namespace ag::head {
namespace {

const api::TaskKey kTask{"job_a", 0, 0};
const api::TaskKey kOther{"job_a", 0, 1};

TEST(LogWaitersTest, AWaiterWakesOnlyOnceTheLogPassesItsOffsetOrCloses) {
  LogWaiters waiters;
  std::vector<std::string> woke;
  waiters.add(kTask, 10, [&] { woke.push_back("at 10"); });
  waiters.add(kTask, 100, [&] { woke.push_back("at 100"); });
  const uint64_t cancelled = waiters.add(kTask, 0, [&] { woke.push_back("cancelled"); });
  waiters.add(kOther, 0, [&] { woke.push_back("other task"); });
  waiters.cancel(cancelled);
  waiters.wake(kTask, 10, false);
  EXPECT_TRUE(woke.empty()) << "10 bytes do not pass offset 10";
  waiters.wake(kTask, 11, false);
  EXPECT_EQ(woke, std::vector<std::string>{"at 10"});
  waiters.wake(kTask, 11, true);
  EXPECT_EQ(woke, (std::vector<std::string>{"at 10", "at 100"})) << "a closed log wakes everyone";
  EXPECT_EQ(waiters.count(), 1u);
  auto taken = waiters.take_job("job_a");
  ASSERT_EQ(taken.size(), 1u);
  taken[0]();
  EXPECT_EQ(woke.back(), "other task");
  EXPECT_EQ(waiters.count(), 0u);
}

// An unnamed file to sync (the syncer closes it).
int scratch_fd() { return ::open(std::filesystem::temp_directory_path().c_str(), O_TMPFILE | O_RDWR, 0600); }

TEST(LogSyncerTest, AfterSyncedWaitsForEverySyncOfThatLogOnTheIoQueue) {
  testing::FakeClock io;
  LogSyncer syncer(&io);
  bool now = false;
  syncer.after_synced(kTask, [&] { now = true; });
  EXPECT_TRUE(now) << "no sync under way: at once";
  syncer.sync(kTask, scratch_fd());
  syncer.sync(kTask, scratch_fd());
  bool durable = false;
  syncer.after_synced(kTask, [&] { durable = true; });
  for (int i = 0; i < 200 && !durable; ++i) {
    ::usleep(5000);
    io.run_ready();
  }
  EXPECT_TRUE(durable);
}

TEST(LogSyncerTest, WithoutAThreadItSyncsInlineAndADeletedJobsCallbacksAreHandedBack) {
  LogSyncer inline_syncer(nullptr);
  bool done = false;
  inline_syncer.sync(kTask, scratch_fd());
  inline_syncer.after_synced(kTask, [&] { done = true; });
  EXPECT_TRUE(done);
  bool ran = false;
  inline_syncer.run([&] { ran = true; });
  EXPECT_TRUE(ran);
  EXPECT_TRUE(inline_syncer.take_job("job_a").empty());
}

}  // namespace
}  // namespace ag::head
