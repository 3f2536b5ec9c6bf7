// FakeClock: a Clock and Timers that move only when a test says so. advance(ms) moves
// both clocks and runs, in time order, every timer that falls due (and what those
// timers post or start with no delay); run_ready() runs what is due now.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/timers.h"

namespace ag::testing {

class FakeClock final : public Clock, public Timers {
 public:
  explicit FakeClock(int64_t start_ms = 1'700'000'000'000) : now_ms_(start_ms) {}

  int64_t now_ms() const override { return now_ms_; }
  int64_t steady_ms() const override { return now_ms_ - start_offset_; }

  Id start(int64_t delay_ms, std::function<void()> fn) override {
    Id id = next_id_++;
    timers_[{now_ms_ + std::max<int64_t>(0, delay_ms), id}] = std::move(fn);
    return id;
  }

  void cancel(Id id) override {
    for (auto it = timers_.begin(); it != timers_.end(); ++it) {
      if (it->first.second == id) {
        timers_.erase(it);
        return;
      }
    }
  }

  void post(std::function<void()> fn) override {
    std::lock_guard lock(mu_);
    posted_.push_back(std::move(fn));
  }

  // Runs posted work and every timer due by now, until nothing is left to run.
  // Returns how many callbacks ran.
  int run_ready() {
    int ran = 0;
    for (;;) {
      std::vector<std::function<void()>> posted;
      {
        std::lock_guard lock(mu_);
        posted.swap(posted_);
      }
      for (auto& fn : posted) fn();
      ran += static_cast<int>(posted.size());
      auto due = timers_.begin();
      if (due == timers_.end() || due->first.first > now_ms_) {
        std::lock_guard lock(mu_);
        if (posted_.empty()) return ran;
        continue;
      }
      auto fn = std::move(due->second);
      timers_.erase(due);
      fn();
      ++ran;
    }
  }

  // Moves time forward by `ms`, firing timers at their own times along the way.
  void advance(int64_t ms) {
    const int64_t until = now_ms_ + ms;
    run_ready();
    while (!timers_.empty() && timers_.begin()->first.first <= until) {
      now_ms_ = std::max(now_ms_, timers_.begin()->first.first);
      run_ready();
    }
    now_ms_ = until;
    run_ready();
  }

  size_t pending_timers() const { return timers_.size(); }

 private:
  int64_t now_ms_;
  const int64_t start_offset_ = 1'600'000'000'000;
  std::map<std::pair<int64_t, Id>, std::function<void()>> timers_;
  Id next_id_ = 1;
  std::mutex mu_;
  std::vector<std::function<void()>> posted_;
};

}  // namespace ag::testing
