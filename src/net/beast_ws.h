// Internal to net/: the WsConnection implementation over a Beast websocket stream,
// shared by the server (accepted sockets) and the client (dialled sockets), over plain
// TCP or TLS (beast_ws.cc instantiates both).
#pragma once

#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <deque>

#include "net/ws_connection.h"

namespace ag::net::detail {

namespace beast = boost::beast;
namespace websocket = boost::beast::websocket;

template <class NextLayer>
class BeastWs final : public WsConnection, public std::enable_shared_from_this<BeastWs<NextLayer>> {
 public:
  using Stream = websocket::stream<NextLayer>;

  BeastWs(Stream stream, std::string remote);
  void start(MessageHandler on_message, CloseHandler on_close) override;
  void send(std::string data, bool binary) override;
  void close() override;
  std::string remote_address() const override { return remote_; }
  size_t queued_bytes() const override { return queued_bytes_; }
  void on_drained(size_t low_water_bytes, std::function<void()> fn) override {
    drain_low_water_ = low_water_bytes;
    on_drained_ = std::move(fn);
  }
  void pause_reading() override { paused_ = true; }
  void resume_reading() override;
  // Keeps `thing` (the server's admission of this connection) as long as this lives.
  void hold(std::shared_ptr<void> thing) { held_ = std::move(thing); }

 private:
  void do_read();
  void do_write();
  void fail(const std::string& reason);
  void close_now();

  Stream ws_;
  std::string remote_;
  beast::flat_buffer read_buffer_;
  std::deque<std::pair<std::string, bool>> outbox_;
  size_t queued_bytes_ = 0;
  bool writing_ = false;
  bool closing_ = false;  // close() was called: close once the outbox is written
  bool closed_ = false;
  bool reading_ = false;  // a read is outstanding
  bool paused_ = false;   // pause_reading(): no read after the current one
  static constexpr size_t kMaxFlushOnCloseBytes = 1 << 20;
  MessageHandler on_message_;
  CloseHandler on_close_;
  size_t drain_low_water_ = 0;
  std::function<void()> on_drained_;
  std::shared_ptr<void> held_;
};

}  // namespace ag::net::detail
