// LogStreamReader: the head's end of one worker's log stream (api/log_stream.h). It
// waits until the socket is readable, then reads what is there without blocking and
// hands records on as they complete: a log record's bytes in pieces (each with the
// offset it starts at, so the LogStore can take them as they come), a message whole.
// The pieces go through a buffer the caller lends (one for every stream: all of them
// run on the io thread, and a piece is handed on before the next read). Io thread only.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "api/log_stream.h"

namespace ag::head {

class LogStreamReader : public std::enable_shared_from_this<LogStreamReader> {
 public:
  struct Handlers {
    // Return false to end the stream (a record this node may not send); the reader
    // then closes without calling on_close.
    std::function<bool(const api::LogFrameHeader& at, std::string_view bytes)> on_bytes;
    std::function<bool(std::string_view message)> on_message;
    std::function<void(const std::string& reason)> on_close;
  };
  // `leftover`: bytes already read past the upgrade request. `held`: kept while the
  // stream lives (its admission).
  LogStreamReader(boost::asio::ip::tcp::socket socket, std::string leftover, std::shared_ptr<void> held,
                  std::vector<char>& piece_buffer);
  void start(Handlers handlers);
  void close();
  const std::string& remote() const { return remote_; }

 private:
  enum class Stage { kHeader, kMeta, kPayload };
  void wait();
  void on_readable();
  // Takes `n` bytes just read into `data` (the leftover, or a read); false once closed.
  bool consume(const char* data, size_t n);
  bool finish_record();
  void fail(const std::string& reason);

  boost::asio::ip::tcp::socket socket_;
  std::string leftover_;
  std::shared_ptr<void> held_;
  std::vector<char>& piece_;
  std::string remote_;
  Handlers handlers_;
  bool closed_ = false;
  Stage stage_ = Stage::kHeader;
  std::string small_;  // the header, the meta, or a message being gathered
  api::LogRecordHeader record_;
  api::LogFrameHeader at_;   // a log record's task and the offset of its next byte
  uint64_t payload_left_ = 0;
};

}  // namespace ag::head
