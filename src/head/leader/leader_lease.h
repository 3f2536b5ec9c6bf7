// LeaderLease: this head's hold on the store's lease (store/lease.h), for heads that
// share one store. The head leads while it holds the lease; it renews it every third of
// the TTL, and stops acting the moment it cannot be sure it still holds it:
//
//   renewer thread:  renew(holder, epoch, ttl) every ttl/3 --ok--> deadline = sent_at + ttl
//                                                          --no--> lost ("another head took it")
//   watchdog thread: now >= deadline (no renewal got through in time) --> lost
//
// The deadline counts from when the renewal was sent, on this machine's monotonic clock:
// the store set the expiry at or after that moment, so this head stops before the store
// hands the lease to another. acting() is what every launch, kill and log write checks.
//
// Threads: try_acquire(), start() and the destructor on the owner's thread; acting() and
// epoch() from any; `on_lost` runs once, on one of the lease's threads.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "common/result.h"
#include "head/store/lease.h"

namespace ag::head {

class LeaderLease {
 public:
  using OnLost = std::function<void(const std::string& why)>;

  LeaderLease(store::LeaseBackend& backend, std::string holder, int64_t ttl_ms);
  ~LeaderLease();
  LeaderLease(const LeaderLease&) = delete;
  LeaderLease& operator=(const LeaderLease&) = delete;

  // One attempt to take the lease: true when this head now leads (and acting() holds
  // until start()'s threads find it gone), false while another head holds it. Errors:
  // the store's.
  Result<bool> try_acquire();
  // Starts renewing and watching. `on_lost` is called once, when the lease is gone or
  // was not renewed in time (it is expected not to return: the head restarts itself).
  void start(OnLost on_lost);

  // Gives the lease up (a head stopping on purpose): a standby takes over at once. This
  // head no longer acts; errors are logged (the lease then runs out by itself).
  void release();

  // True while this head leads and is sure of it.
  bool acting() const;
  int64_t epoch() const { return epoch_.load(); }
  const std::string& holder() const { return holder_; }
  int64_t ttl_ms() const { return ttl_ms_; }

 private:
  void renew_loop();
  void watch_loop();
  void lose(const std::string& why);
  static int64_t now_ns();

  store::LeaseBackend& backend_;
  const std::string holder_;
  const int64_t ttl_ms_;
  std::atomic<int64_t> epoch_{0};
  std::atomic<int64_t> deadline_ns_{0};  // steady clock; acting only before it
  std::atomic<bool> lost_{false};
  OnLost on_lost_;
  std::mutex mu_;
  std::condition_variable wake_;  // a new deadline, or stopping
  bool stopping_ = false;         // guarded by mu_
  std::thread renewer_, watchdog_;
};

}  // namespace ag::head
