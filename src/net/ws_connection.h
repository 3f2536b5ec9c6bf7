// WsConnection: one WebSocket, from either side (the head accepting a worker, the
// worker dialling the head). Messages are whole frames, text or binary.
//
// Lifecycle: start() begins reading; handlers run on the io thread; the close handler
// runs once, after which send() is ignored. send() and close() must be called on the
// io thread. The connection keeps itself alive while reading.
#pragma once

#include <functional>
#include <memory>
#include <string>

namespace ag::net {

class WsConnection {
 public:
  using MessageHandler = std::function<void(std::string data, bool binary)>;
  using CloseHandler = std::function<void(const std::string& reason)>;

  virtual ~WsConnection() = default;
  virtual void start(MessageHandler on_message, CloseHandler on_close) = 0;
  virtual void send(std::string data, bool binary) = 0;
  virtual void close() = 0;
  virtual std::string remote_address() const = 0;
  // Bytes queued for sending and not yet written (back-pressure signal).
  virtual size_t queued_bytes() const = 0;
  // Calls `fn` each time a frame has been written and at most `low_water_bytes` stay
  // queued: a sender that stopped at a high-water mark continues from there.
  virtual void on_drained(size_t low_water_bytes, std::function<void()> fn) = 0;
  // Reads no further frame (the peer's sends back up in TCP) until resume_reading():
  // a relay holds one side while the other side's queue is long.
  virtual void pause_reading() = 0;
  virtual void resume_reading() = 0;
};

}  // namespace ag::net
