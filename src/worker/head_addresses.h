// HeadAddresses: the heads a worker may reach (`--head-node h1:6379,h2:6379`: heads
// sharing one store, of which one leads) and the one it talks to now. A dial that fails
// moves on to the next; a standby's answer that names the leader moves straight there.
// Package downloads ask for the current one at each download.
//
// Thread-safe: the agent's thread moves it, package downloads read it from theirs.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "net/http_client.h"

namespace ag::worker {

class HeadAddresses {
 public:
  // `heads` is not empty; each carries the cluster CA (or none, for --insecure).
  explicit HeadAddresses(std::vector<net::Endpoint> heads) : heads_(std::move(heads)) {}

  net::Endpoint current() const {
    std::lock_guard lock(mu_);
    return heads_[at_];
  }
  size_t size() const { return heads_.size(); }
  // The next head, after the last one the first.
  void next() {
    std::lock_guard lock(mu_);
    at_ = (at_ + 1) % heads_.size();
  }
  // Goes to `address` ("10.0.0.1:6379") when it is one of the heads; false otherwise.
  bool go_to(const std::string& address) {
    std::lock_guard lock(mu_);
    for (size_t i = 0; i < heads_.size(); ++i) {
      if (heads_[i].to_string() == address) {
        at_ = i;
        return true;
      }
    }
    return false;
  }
  // "h1:6379" or "h1:6379 (of h1:6379,h2:6379)", for messages.
  std::string describe() const {
    std::lock_guard lock(mu_);
    if (heads_.size() == 1) return heads_[0].to_string();
    std::string all;
    for (const auto& head : heads_) all += (all.empty() ? "" : ",") + head.to_string();
    return heads_[at_].to_string() + " (of " + all + ")";
  }

 private:
  mutable std::mutex mu_;
  std::vector<net::Endpoint> heads_;
  size_t at_ = 0;  // guarded by mu_
};

}  // namespace ag::worker
