// ChannelTraffic: what crosses the workers' channels, by direction and message type:
// how many messages and how many bytes (the frames' payloads), for /metrics
// (`ag_worker_channel_messages_total`, `ag_worker_channel_bytes_total`) and the cost
// model of a job (bench/job_cost_bench.py). Task output sent on a channel counts as
// type "log_frame"; the log stream beside it is not a channel message.
//
//   NodeRegistry::send, the gateway's replies --sent-->     "to_worker" counts
//   the gateway, each frame it takes           --received--> "from_worker" counts
//
// Io thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "api/protocol.h"

namespace ag::head {

class ChannelTraffic {
 public:
  void sent(const api::HeadMessage& message, size_t bytes);
  void received(const api::WorkerMessage& message, size_t bytes);
  // A frame that is no message: task output, or one the head could not read.
  void received_log_frame(size_t bytes) { count(from_worker_log_, bytes); }
  void received_unreadable(size_t bytes) { count(from_worker_unreadable_, bytes); }

  struct Count {
    uint64_t messages = 0;
    uint64_t bytes = 0;
  };
  // By the message's type as the wire names it ("launch"); a type never seen counts 0.
  Count to_worker(const std::string& type) const;
  Count from_worker(const std::string& type) const;

  // The two counter families in Prometheus' text format.
  void render(std::string& out) const;

 private:
  static void count(Count& c, size_t bytes) {
    ++c.messages;
    c.bytes += bytes;
  }

  Count to_worker_[std::variant_size_v<api::HeadMessage>];
  Count from_worker_[std::variant_size_v<api::WorkerMessage>];
  Count from_worker_log_;
  Count from_worker_unreadable_;
};

}  // namespace ag::head
