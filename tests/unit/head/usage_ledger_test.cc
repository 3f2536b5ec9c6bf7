// UsageLedger over a fake clock and a memory store: a job's owner is charged for its
// gang from the first charge to the last, running jobs count in every answer, the tick
// stores the usage and a new ledger reads it back; weights divide usage for the order.
#include "head/sharing/usage_ledger.h"

#include <gtest/gtest.h>

#include "fakes/fake_clock.h"
#include "head/store/memory_store.h"

namespace ag::head {
namespace {

using testing::FakeClock;

// A running job of `owner` with `tasks` tasks of one GPU each (one GPU-second per
// second each).
Gang gpu_job(const std::string& id, const std::string& owner, int tasks) {
  Gang gang{id, owner, {}};
  gang.holds.gpus = tasks;
  return gang;
}

constexpr int64_t kHalfLife = int64_t{1000} * 24 * 3600 * 1000;  // no decay to speak of

double usage_of(const std::vector<sched::ShareLine>& lines, const std::string& user) {
  for (const auto& line : lines) {
    if (line.user == user) return line.usage;
  }
  return 0;
}

TEST(UsageLedgerTest, AnOwnerIsChargedForTheGangFromPlacementToEnd) {
  FakeClock clock;
  store::MemoryStore store;
  UsageLedger ledger(clock, clock, store, kHalfLife);
  ASSERT_TRUE(ledger.recover().ok());
  Gang two = gpu_job("job_a", "alice", 2);
  ledger.charge(two, false);
  clock.advance(10'000);
  // Running: counted in every answer before any tick.
  EXPECT_NEAR(usage_of(ledger.report({}), "alice"), 20.0, 0.01);
  ledger.charge(two, true);
  clock.advance(10'000);
  EXPECT_NEAR(usage_of(ledger.report({}), "alice"), 20.0, 0.01) << "nothing after its end";
  ledger.charge(two, true);  // a second end charges nothing
  EXPECT_NEAR(usage_of(ledger.report({}), "alice"), 20.0, 0.01);
}

TEST(UsageLedgerTest, TheTickStoresUsageAndANewLedgerReadsItBack) {
  FakeClock clock;
  store::MemoryStore store;
  {
    UsageLedger ledger(clock, clock, store, kHalfLife);
    ASSERT_TRUE(ledger.recover().ok());
    ledger.charge(gpu_job("job_a", "alice", 1), false);
    ledger.charge(gpu_job("job_b", "bob", 3), false);
    clock.advance(UsageLedger::kUsageTickMs);
    clock.run_ready();
  }
  UsageLedger after(clock, clock, store, kHalfLife);
  ASSERT_TRUE(after.recover().ok());
  auto lines = after.report({});
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].user, "bob");  // most used first
  EXPECT_NEAR(lines[0].usage, 90.0, 0.01);
  EXPECT_NEAR(usage_of(lines, "alice"), 30.0, 0.01);
}

TEST(UsageLedgerTest, AStoredRecordThatDoesNotParseIsSkipped) {
  FakeClock clock;
  store::MemoryStore store;
  bool written = false;
  store.write({{store::kMetaTable, "usage", R"({"alice": [5, 1700000000000], "bob": "lots", "carol": [1]})"}},
              [&](const Status& s) { written = s.ok(); });
  ASSERT_TRUE(written);
  UsageLedger ledger(clock, clock, store, kHalfLife);
  ASSERT_TRUE(ledger.recover().ok());
  auto lines = ledger.report({});
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].user, "alice");
}

TEST(UsageLedgerTest, UsageNowIsDividedByTheOwnersWeight) {
  FakeClock clock;
  store::MemoryStore store;
  UsageLedger ledger(clock, clock, store, kHalfLife);
  ASSERT_TRUE(ledger.recover().ok());
  ledger.charge(gpu_job("job_a", "alice", 2), false);
  ledger.charge(gpu_job("job_b", "bob", 2), false);
  clock.advance(1000);
  auto usage = ledger.usage_now({{"bob", 4.0}});
  EXPECT_NEAR(usage("alice"), 2.0, 0.01);
  EXPECT_NEAR(usage("bob"), 0.5, 0.01);
  EXPECT_EQ(usage("carol"), 0.0);
}

}  // namespace
}  // namespace ag::head
