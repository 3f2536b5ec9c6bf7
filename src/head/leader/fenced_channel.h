// FencedChannel: the job layer's way to workers on a head that shares its store with
// others. Nothing goes out once the head is not sure it leads (LeaderLease::acting), and
// every launch and kill carries the head's epoch, so that a worker which has already
// heard from a newer leader ignores it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "head/nodes/worker_channel.h"

namespace ag::head {

class FencedChannel final : public WorkerChannel {
 public:
  FencedChannel(WorkerChannel& inner, int64_t epoch, std::function<bool()> acting)
      : inner_(inner), epoch_(epoch), acting_(std::move(acting)) {}

  bool send(const std::string& node_id, api::HeadMessage message) override {
    if (!acting_()) return false;
    if (auto* launch = std::get_if<api::Launch>(&message)) launch->epoch = epoch_;
    if (auto* kill = std::get_if<api::Kill>(&message)) kill->epoch = epoch_;
    return inner_.send(node_id, std::move(message));
  }

 private:
  WorkerChannel& inner_;
  const int64_t epoch_;
  std::function<bool()> acting_;
};

}  // namespace ag::head
