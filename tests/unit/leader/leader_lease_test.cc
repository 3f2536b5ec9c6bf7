// LeaderLease over a fake lease store whose answers the tests choose: renewals that get
// through, a lease taken over, a store that stops answering.
#include "head/leader/leader_lease.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>

namespace ag::head {
namespace {

using ::testing::HasSubstr;

// A lease store in memory. `hang` makes renewals block (a store that stopped
// answering); `taken` makes them answer "not yours".
class FakeLeaseStore : public store::LeaseBackend {
 public:
  Result<std::optional<int64_t>> acquire_lease(const std::string& holder, int64_t) override {
    std::lock_guard lock(mu_);
    if (!holder_.empty() && holder_ != holder) return std::optional<int64_t>();
    holder_ = holder;
    return std::optional<int64_t>(++epoch_);
  }
  Result<bool> renew_lease(const std::string& holder, int64_t epoch, int64_t) override {
    std::unique_lock lock(mu_);
    ++renewals_;
    changed_.notify_all();
    changed_.wait(lock, [this] { return !hang_; });
    if (unreachable_) return Error{ErrorCode::kUnavailable, "cannot reach the store"};
    return !taken_ && holder == holder_ && epoch == epoch_;
  }
  Status release_lease(const std::string& holder, int64_t epoch) override {
    std::lock_guard lock(mu_);
    if (holder == holder_ && epoch == epoch_) holder_.clear();
    return {};
  }
  Result<store::LeaseState> read_lease() override {
    std::lock_guard lock(mu_);
    return store::LeaseState{holder_, epoch_, true};
  }
  void fence(const std::string&, int64_t) override {}

  void set_hang(bool hang) {
    std::lock_guard lock(mu_);
    hang_ = hang;
    changed_.notify_all();
  }
  void take_over(const std::string& other) {
    std::lock_guard lock(mu_);
    holder_ = other;
    ++epoch_;
    taken_ = true;
  }
  void set_unreachable(bool unreachable) {
    std::lock_guard lock(mu_);
    unreachable_ = unreachable;
  }
  // Waits until `n` renewals were attempted in all.
  bool wait_renewals(int n) {
    std::unique_lock lock(mu_);
    return changed_.wait_for(lock, std::chrono::seconds(10), [&] { return renewals_ >= n; });
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  std::string holder_;
  int64_t epoch_ = 0;
  int renewals_ = 0;
  bool hang_ = false, taken_ = false, unreachable_ = false;
};

// What on_lost was told, once.
struct Lost {
  std::promise<std::string> why;
  LeaderLease::OnLost callback() {
    return [this](const std::string& text) { why.set_value(text); };
  }
};

TEST(LeaderLeaseTest, TheFirstHeadLeadsAndASecondWaitsWhileItHolds) {
  FakeLeaseStore store;
  LeaderLease first(store, "10.0.0.1:6379", 60'000);
  LeaderLease second(store, "10.0.0.4:6379", 60'000);
  EXPECT_FALSE(first.acting()) << "before it took the lease";
  ASSERT_TRUE(first.try_acquire().value());
  EXPECT_TRUE(first.acting());
  EXPECT_EQ(first.epoch(), 1);
  EXPECT_FALSE(second.try_acquire().value());
  EXPECT_FALSE(second.acting());
}

TEST(LeaderLeaseTest, AReleasedLeaseGoesToTheNextHeadAtOnceAndTheFirstNoLongerActs) {
  FakeLeaseStore store;
  LeaderLease first(store, "h1", 60'000);
  LeaderLease second(store, "h2", 60'000);
  ASSERT_TRUE(first.try_acquire().value());
  first.release();
  EXPECT_FALSE(first.acting());
  ASSERT_TRUE(second.try_acquire().value());
  EXPECT_EQ(second.epoch(), 2);
}

TEST(LeaderLeaseTest, RenewalsKeepItLeadingPastItsTtl) {
  FakeLeaseStore store;
  LeaderLease lease(store, "h1", 300);
  ASSERT_TRUE(lease.try_acquire().value());
  Lost lost;
  lease.start(lost.callback());
  ASSERT_TRUE(store.wait_renewals(6)) << "renewed every third of the TTL";
  EXPECT_TRUE(lease.acting());
  EXPECT_EQ(lost.why.get_future().wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);
}

TEST(LeaderLeaseTest, ALeaseAnotherHeadTookStopsItAtTheNextRenewal) {
  FakeLeaseStore store;
  LeaderLease lease(store, "h1", 300);
  ASSERT_TRUE(lease.try_acquire().value());
  Lost lost;
  auto why = lost.why.get_future();
  lease.start(lost.callback());
  store.take_over("h2");
  ASSERT_EQ(why.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_THAT(why.get(), HasSubstr("another head took it over"));
  EXPECT_FALSE(lease.acting());
}

TEST(LeaderLeaseTest, AStoreThatStopsAnsweringStopsItWhenTheTtlRunsOutNotBefore) {
  FakeLeaseStore store;
  constexpr int64_t kTtlMs = 400;
  LeaderLease lease(store, "h1", kTtlMs);
  ASSERT_TRUE(lease.try_acquire().value());
  Lost lost;
  auto why = lost.why.get_future();
  store.set_hang(true);
  const auto hung_at = std::chrono::steady_clock::now();
  lease.start(lost.callback());
  ASSERT_EQ(why.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  const auto after = std::chrono::steady_clock::now() - hung_at;
  EXPECT_THAT(why.get(), HasSubstr("not renewed within 400 ms"));
  EXPECT_FALSE(lease.acting());
  // It kept the lease's whole term less the clocks' margin (a fiftieth), never less.
  EXPECT_GE(std::chrono::duration_cast<std::chrono::milliseconds>(after).count(), kTtlMs - kTtlMs / 50 - 5);
  store.set_hang(false);  // lets the renewer thread finish
}

TEST(LeaderLeaseTest, AStoreThatRefusesConnectionsIsRetriedUntilTheTtlRunsOut) {
  FakeLeaseStore store;
  LeaderLease lease(store, "h1", 600);
  ASSERT_TRUE(lease.try_acquire().value());
  store.set_unreachable(true);
  Lost lost;
  auto why = lost.why.get_future();
  lease.start(lost.callback());
  ASSERT_EQ(why.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_THAT(why.get(), HasSubstr("not renewed within"));
  EXPECT_TRUE(store.wait_renewals(4)) << "tried again more often than every third of the TTL";
}

TEST(LeaderLeaseTest, AStoreBackInTimeKeepsTheLease) {
  FakeLeaseStore store;
  LeaderLease lease(store, "h1", 900);
  ASSERT_TRUE(lease.try_acquire().value());
  store.set_unreachable(true);
  Lost lost;
  lease.start(lost.callback());
  ASSERT_TRUE(store.wait_renewals(2));
  store.set_unreachable(false);
  ASSERT_TRUE(store.wait_renewals(8));
  EXPECT_TRUE(lease.acting());
  EXPECT_EQ(lost.why.get_future().wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);
}

}  // namespace
}  // namespace ag::head
