#include "head/leader/leader_lease.h"

#include <spdlog/spdlog.h>

#include <time.h>

#include <chrono>

namespace ag::head {
namespace {
constexpr int64_t kNsPerMs = 1'000'000;
}  // namespace

LeaderLease::LeaderLease(store::LeaseBackend& backend, std::string holder, int64_t ttl_ms)
    : backend_(backend), holder_(std::move(holder)), ttl_ms_(ttl_ms) {}

LeaderLease::~LeaderLease() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (renewer_.joinable()) renewer_.join();
  if (watchdog_.joinable()) watchdog_.join();
}

int64_t LeaderLease::now_ns() {
  // CLOCK_BOOTTIME counts a machine's suspend too: a head resumed after it must find
  // its lease gone, as the database does.
  timespec now{};
  ::clock_gettime(CLOCK_BOOTTIME, &now);
  return int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
}

Result<bool> LeaderLease::try_acquire() {
  const int64_t sent_at = now_ns();
  auto taken = backend_.acquire_lease(holder_, ttl_ms_);
  if (!taken.ok()) return taken.error();
  if (!taken.value()) return false;
  epoch_ = *taken.value();
  // A fiftieth of the TTL to spare for the two clocks' rates.
  deadline_ns_ = sent_at + (ttl_ms_ - ttl_ms_ / 50) * kNsPerMs;
  lost_ = false;
  return true;
}

void LeaderLease::start(OnLost on_lost) {
  on_lost_ = std::move(on_lost);
  renewer_ = std::thread([this] { renew_loop(); });
  watchdog_ = std::thread([this] { watch_loop(); });
}

void LeaderLease::release() {
  if (lost_.exchange(true)) return;  // already lost: the head is restarting
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (Status s = backend_.release_lease(holder_, epoch_); !s) {
    spdlog::warn("could not give up the leader lease ({}); a standby takes over once it runs out", s.error().message);
  }
}

bool LeaderLease::acting() const { return !lost_.load() && now_ns() < deadline_ns_.load(); }

void LeaderLease::renew_loop() {
  const auto every = std::chrono::milliseconds(std::max<int64_t>(ttl_ms_ / 3, 1));
  const auto retry = std::chrono::milliseconds(std::clamp<int64_t>(ttl_ms_ / 10, 1, 1000));
  auto wait = every;
  while (!lost_) {
    {
      std::unique_lock lock(mu_);
      if (wake_.wait_for(lock, wait, [this] { return stopping_; })) return;
    }
    const int64_t sent_at = now_ns();
    auto renewed = backend_.renew_lease(holder_, epoch_, ttl_ms_);
    if (renewed.ok() && renewed.value()) {
      deadline_ns_ = sent_at + (ttl_ms_ - ttl_ms_ / 50) * kNsPerMs;
      wake_.notify_all();
      wait = every;
    } else if (renewed.ok()) {
      lose("the lease (epoch " + std::to_string(epoch_) + ") ran out or another head took it over");
      return;
    } else {
      spdlog::warn("cannot renew the leader lease (epoch {}): {}; trying again", epoch_.load(),
                   renewed.error().message);
      wait = retry;
    }
  }
}

void LeaderLease::watch_loop() {
  std::unique_lock lock(mu_);
  while (!stopping_ && !lost_) {
    const int64_t deadline = deadline_ns_.load();
    if (now_ns() >= deadline) {
      lock.unlock();
      lose("the lease (epoch " + std::to_string(epoch_) + ") was not renewed within " + std::to_string(ttl_ms_) +
           " ms");
      return;
    }
    wake_.wait_for(lock, std::chrono::nanoseconds(deadline - now_ns()));
  }
}

void LeaderLease::lose(const std::string& why) {
  if (lost_.exchange(true)) return;
  wake_.notify_all();
  if (on_lost_) on_lost_(why);
}

}  // namespace ag::head
