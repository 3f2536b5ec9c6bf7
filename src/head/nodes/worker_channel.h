// WorkerChannel: what the head's job layer sends to workers through. The product's
// is the NodeRegistry (each node's WebSocket); unit tests pass a fake that records.
#pragma once

#include <string>

#include "api/protocol.h"

namespace ag::head {

class WorkerChannel {
 public:
  virtual ~WorkerChannel() = default;
  // Sends `message` to the node; false when the node has no open channel. Taken by
  // value: a launch is built for the send and moved in, never copied on the way.
  virtual bool send(const std::string& node_id, api::HeadMessage message) = 0;
};

}  // namespace ag::head
