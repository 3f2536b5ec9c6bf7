// A fake of the worker's log stream (worker/log_stream.h) for the agent's tests.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "api/log_frame.h"
#include "worker/log_stream.h"

namespace ag::testing {

// A log stream that records what it is given. Without `hold` its socket takes
// everything at once and it asks for more at once (from inside the send, as the real
// one does); with `hold` it is busy until the test drains it.
class FakeLogStream final : public worker::LogStream {
 public:
  struct Record {
    api::LogFrameHeader at;
    std::string path;
    int64_t length = 0;
    std::string message;  // a message record (then `path` is empty)
  };
  Status send_file(const api::LogFrameHeader& at, const std::string& path, int64_t length) override {
    records.push_back({at, path, length, ""});
    sent();
    return {};
  }
  void send_message(std::string message) override {
    records.push_back({{}, "", 0, std::move(message)});
    sent();
  }
  bool busy() const override { return busy_; }
  void on_drained(std::function<void()> fn) override { on_drained_ = std::move(fn); }
  void on_failed(std::function<void(const std::string&)> fn) override { on_failed_ = std::move(fn); }
  void close() override { closed = true; }

  // The socket took everything.
  void drain() {
    busy_ = false;
    if (on_drained_) on_drained_();
  }
  void fail() {
    if (on_failed_) on_failed_("connection reset by peer");
  }
  // The message records' texts, taken.
  std::vector<std::string> take_messages() {
    std::vector<std::string> out;
    for (const auto& r : records) {
      if (r.path.empty()) out.push_back(r.message);
    }
    records.clear();
    return out;
  }

  std::vector<Record> records;
  bool hold = false;
  bool closed = false;

 private:
  void sent() {
    if (hold) {
      busy_ = true;
      return;
    }
    if (draining_) {  // asked for more from inside on_drained: the loop below goes on
      more_ = true;
      return;
    }
    draining_ = true;
    do {
      more_ = false;
      if (on_drained_) on_drained_();
    } while (more_);
    draining_ = false;
  }

  bool busy_ = false;
  bool draining_ = false;
  bool more_ = false;
  std::function<void()> on_drained_;
  std::function<void(const std::string&)> on_failed_;
};

}  // namespace ag::testing
