// JobEvents: a watcher hears once, of its own job only, and may watch again from inside;
// a cancelled watcher hears nothing; observers hear every change and removal observers
// every removal.
#include "head/jobs/job_events.h"

#include <gtest/gtest.h>

namespace ag::head {
namespace {

Job job_with_id(const std::string& id) {
  Job job;
  job.id = id;
  return job;
}

TEST(JobEventsTest, AWatcherHearsOnceOfItsOwnJobAndMayWatchAgainFromInside) {
  JobEvents events;
  int a_heard = 0;
  int b_heard = 0;
  std::function<void()> rewatch = [&] {
    ++a_heard;
    if (a_heard < 2) events.watch("job_a", rewatch);
  };
  events.watch("job_a", rewatch);
  events.watch("job_b", [&] { ++b_heard; });
  events.changed(job_with_id("job_a"));
  EXPECT_EQ(a_heard, 1);
  EXPECT_EQ(b_heard, 0);
  EXPECT_EQ(events.watching(), 2u);  // job_a's again, and job_b's
  events.changed(job_with_id("job_a"));
  events.changed(job_with_id("job_a"));
  EXPECT_EQ(a_heard, 2);
  events.removed("job_b");
  EXPECT_EQ(b_heard, 1);
  EXPECT_EQ(events.watching(), 0u);
}

TEST(JobEventsTest, ACancelledWatcherHearsNothing) {
  JobEvents events;
  bool heard = false;
  uint64_t id = events.watch("job_a", [&] { heard = true; });
  EXPECT_NE(id, 0u);
  events.cancel_watch(id);
  events.changed(job_with_id("job_a"));
  EXPECT_FALSE(heard);
}

TEST(JobEventsTest, ObserversHearEveryChangeAndRemovalObserversEveryRemoval) {
  JobEvents events;
  std::vector<std::string> seen;
  std::vector<std::string> removed;
  events.add_observer([&](const Job& job) { seen.push_back(job.id); });
  events.add_removal_observer([&](const std::string& id) { removed.push_back(id); });
  events.added(job_with_id("job_a"));
  events.changed(job_with_id("job_a"));
  events.changed(job_with_id("job_b"));
  events.removed("job_a");
  EXPECT_EQ(seen, (std::vector<std::string>{"job_a", "job_a", "job_b"}));
  EXPECT_EQ(removed, std::vector<std::string>{"job_a"});
}

}  // namespace
}  // namespace ag::head
