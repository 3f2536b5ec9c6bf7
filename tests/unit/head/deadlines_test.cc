// Deadlines over a fake clock: a deadline fires once at its time; arming the same one
// again keeps its timer, a new one replaces it, none or disarm cancels it; nothing
// fires after the Deadlines are gone.
#include "head/jobs/deadlines.h"

#include <gtest/gtest.h>

#include "fakes/fake_clock.h"

namespace ag::head {
namespace {

using testing::FakeClock;

struct Fired {
  std::string job_id;
  Deadline deadline;
};

TEST(DeadlinesTest, ADeadlineFiresOnceAtItsTime) {
  FakeClock clock;
  std::vector<Fired> fired;
  Deadlines deadlines(clock, clock, [&](const std::string& id, const Deadline& d) { fired.push_back({id, d}); });
  const Deadline at{clock.now_ms() + 5000, std::nullopt};
  deadlines.arm("job_a", at);
  deadlines.arm("job_a", at);  // the same: one timer
  clock.advance(4999);
  EXPECT_TRUE(fired.empty());
  clock.advance(1);
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(fired[0].job_id, "job_a");
  EXPECT_EQ(fired[0].deadline, at);
  EXPECT_EQ(deadlines.armed(), 0u);
  clock.advance(60'000);
  EXPECT_EQ(fired.size(), 1u);
}

TEST(DeadlinesTest, ANewDeadlineReplacesTheOldAndNoneOrDisarmCancels) {
  FakeClock clock;
  std::vector<Fired> fired;
  Deadlines deadlines(clock, clock, [&](const std::string& id, const Deadline& d) { fired.push_back({id, d}); });
  const int64_t now = clock.now_ms();
  deadlines.arm("job_a", Deadline{now + 1000, 0});
  deadlines.arm("job_a", Deadline{now + 3000, 1});  // the next attempt's
  deadlines.arm("job_b", Deadline{now + 2000, std::nullopt});
  deadlines.arm("job_c", Deadline{now + 2000, std::nullopt});
  deadlines.disarm("job_b");
  deadlines.arm("job_c", std::nullopt);
  deadlines.disarm("job_unknown");
  clock.advance(10'000);
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(fired[0].job_id, "job_a");
  EXPECT_EQ(fired[0].deadline.attempt, 1);
}

TEST(DeadlinesTest, NothingFiresAfterTheDeadlinesAreGone) {
  FakeClock clock;
  int fired = 0;
  {
    Deadlines deadlines(clock, clock, [&](const std::string&, const Deadline&) { ++fired; });
    deadlines.arm("job_a", Deadline{clock.now_ms() + 1000, std::nullopt});
  }
  clock.advance(5000);
  EXPECT_EQ(fired, 0);
}

}  // namespace
}  // namespace ag::head
