// UsageLedger over a fake clock and a memory store: a job's owner is charged for its
// gang from the first charge to the last, running jobs count in every answer, the tick
// stores the usage and a new ledger reads it back; weights divide usage for the order.
#include "head/sharing/usage_ledger.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

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

TEST(UsageLedgerTest, ManyRunningJobsAreChargedEachFromItsOwnStartAtItsOwnRate) {
  FakeClock clock;
  store::MemoryStore store;
  UsageLedger ledger(clock, clock, store, 0);  // no decay at all: sums to compare exactly
  ASSERT_TRUE(ledger.recover().ok());
  // 300 jobs, started 100 ms apart, alternating between two owners, of 1-3 GPUs.
  std::map<std::string, double> expected;         // GPU-seconds by owner, reckoned job by job
  std::vector<std::pair<Gang, int64_t>> running;  // and since when at its rate
  for (int i = 0; i < 300; ++i) {
    Gang gang = gpu_job("job_" + std::to_string(i), i % 2 ? "alice" : "bob", 1 + i % 3);
    ledger.charge(gang, false);
    running.emplace_back(gang, clock.now_ms());
    clock.advance(100);
  }
  const auto charge_all_to_now = [&] {
    for (auto& [gang, since] : running) {
      expected[gang.owner] += static_cast<double>(gang.holds.gpus) * static_cast<double>(clock.now_ms() - since) / 1000;
      since = clock.now_ms();
    }
  };
  const auto check = [&](const char* when) {
    auto usage = ledger.usage_now({});
    for (const char* owner : {"alice", "bob"}) EXPECT_NEAR(usage(owner), expected[owner], 1e-6) << owner << when;
  };
  // Every answer counts each job from its own start.
  charge_all_to_now();
  check(" after the starts");
  // A third of them grow to 4 GPUs (the time since the last charge is charged at what
  // the gang holds now) and another third end, at various times.
  for (int i = 0; i < 300; i += 3) {
    auto& [gang, since] = running[i];
    gang.holds.gpus = 4;
    expected[gang.owner] += static_cast<double>(gang.holds.gpus) * static_cast<double>(clock.now_ms() - since) / 1000;
    since = clock.now_ms();
    ledger.charge(gang, false);
    clock.advance(37);
  }
  for (int i = 1; i < 300; i += 3) {
    auto& [gang, since] = running[i];
    expected[gang.owner] += static_cast<double>(gang.holds.gpus) * static_cast<double>(clock.now_ms() - since) / 1000;
    ledger.charge(gang, true);
    gang.holds.gpus = 0;  // charged no more
    clock.advance(53);
  }
  charge_all_to_now();
  check(" after the changes");
  // Across ticks the same.
  clock.advance(UsageLedger::kUsageTickMs * 2 + 123);
  clock.run_ready();
  charge_all_to_now();
  check(" after two ticks");
  // A weight divides it.
  EXPECT_NEAR(ledger.usage_now({{"alice", 2.0}})("alice"), expected["alice"] / 2, 1e-6);
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
