// FakeWsConnection: a net::WsConnection whose peer is the test. It records what is
// sent, and the test delivers messages and closes it.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "net/ws_connection.h"

namespace ag::testing {

class FakeWsConnection final : public net::WsConnection {
 public:
  void start(MessageHandler on_message, CloseHandler on_close) override {
    on_message_ = std::move(on_message);
    on_close_ = std::move(on_close);
  }
  void send(std::string data, bool binary) override {
    if (closed) return;
    queued += data.size();
    sent.emplace_back(std::move(data), binary);
  }
  void close() override { closed = true; }
  std::string remote_address() const override { return "127.0.0.1"; }
  size_t queued_bytes() const override { return queued; }
  void pause_reading() override { paused = true; }
  void resume_reading() override { paused = false; }
  bool paused = false;
  void on_drained(size_t low_water_bytes, std::function<void()> fn) override {
    low_water = low_water_bytes;
    on_drained_ = std::move(fn);
  }
  // The peer has read everything sent so far: nothing is queued any more.
  void drain() {
    queued = 0;
    if (on_drained_) on_drained_();
  }

  // The peer sends a text frame.
  void deliver(const std::string& text) { on_message_(text, false); }
  // The peer sends a binary frame (a log frame).
  void deliver_binary(const std::string& data) { on_message_(data, true); }
  // The connection drops (the close handler runs once).
  void drop(const std::string& reason) {
    closed = true;
    if (auto fn = std::move(on_close_)) {
      on_close_ = nullptr;
      fn(reason);
    }
  }

  // Text frames sent so far, forgetting them; binary frames stay in `sent`.
  std::vector<std::string> take_text() {
    std::vector<std::string> out;
    std::vector<std::pair<std::string, bool>> rest;
    for (auto& [data, binary] : sent) {
      if (binary) {
        rest.emplace_back(std::move(data), binary);
      } else {
        out.push_back(std::move(data));
      }
    }
    sent = std::move(rest);
    return out;
  }

  std::vector<std::pair<std::string, bool>> sent;
  bool closed = false;
  size_t queued = 0;  // bytes sent and not yet drained by the peer
  size_t low_water = 0;

 private:
  MessageHandler on_message_;
  CloseHandler on_close_;
  std::function<void()> on_drained_;
};

}  // namespace ag::testing
