// LogStreamReader: the head's end of one worker's log stream (api/log_stream.h). It
// waits until the socket is readable, then reads what is there without blocking and
// hands records on as they complete: a log record's bytes in pieces (each with the
// offset it starts at, so the LogStore can take them as they come), a message whole.
// The pieces go through a buffer the caller lends (one for every stream: all of them
// run on the io thread, and a piece is handed on before the next read); on a plain
// stream with a SplicePipe lent too, a log record's bytes go from the socket into the
// pipe with splice(2) and are handed on there (on_spliced), so that they can reach a
// file without a copy through this process. A TLS stream is read through its session.
// Io thread only.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "api/log_frame.h"
#include "api/log_stream.h"
#include "net/http_server.h"

namespace ag::head {

// A pipe shared by every stream's splices; empty between them.
class SplicePipe {
 public:
  SplicePipe();  // 1 MiB (where the system allows it); ok() false when none could be made
  // or it could not be emptied (it is then closed, and readers read into memory)
  ~SplicePipe();
  SplicePipe(const SplicePipe&) = delete;
  SplicePipe& operator=(const SplicePipe&) = delete;
  bool ok() const { return read_fd_ >= 0 && write_fd_ >= 0; }
  int read_fd() const { return read_fd_; }
  int write_fd() const { return write_fd_; }
  size_t capacity() const { return capacity_; }
  // Drops whatever a handler left in it. False when that fails (the pipe is then closed).
  bool empty_out();

 private:
  void close_fds();
  int read_fd_ = -1;
  int write_fd_ = -1;
  size_t capacity_ = 0;
};

class LogStreamReader : public std::enable_shared_from_this<LogStreamReader> {
 public:
  // What a handler makes of a record: take it (and what follows), drop the rest of this
  // record (one the node may not send: the stream goes on), or end the stream (the
  // reader then closes without calling on_close).
  enum class Verdict { kTake, kSkipRecord, kClose };
  struct Handlers {
    std::function<Verdict(const api::LogFrameHeader& at, std::string_view bytes)> on_bytes;
    // With a pipe: `bytes` bytes of output wait in `pipe_fd` (what the handler leaves
    // there is dropped).
    std::function<Verdict(const api::LogFrameHeader& at, int pipe_fd, size_t bytes)> on_spliced;
    std::function<Verdict(std::string_view message)> on_message;
    std::function<void(const std::string& reason)> on_close;
  };
  // `leftover`: bytes already read past the upgrade request. `held`: kept while the
  // stream lives (its admission).
  LogStreamReader(std::unique_ptr<net::RawStream> stream, std::string leftover, std::shared_ptr<void> held,
                  std::vector<char>& piece_buffer, std::shared_ptr<SplicePipe> pipe = nullptr);
  void start(Handlers handlers);
  void close();
  const std::string& remote() const { return remote_; }

 private:
  enum class Stage { kHeader, kMeta, kPayload };
  void wait();
  void on_readable();
  // One read (recv or splice on a plain stream, the session's under TLS): the bytes
  // taken (> 0), or 0 with `ec` (would_block: nothing more now).
  size_t read_once(boost::system::error_code& ec);
  // Takes `n` bytes just read into `data` (the leftover, or a read); false once closed.
  bool consume(const char* data, size_t n);
  bool finish_record();
  // Whether the next bytes are a log record's output and the pipe can take them.
  bool splicing() const;
  // `n` bytes of output just spliced into the pipe; false once closed.
  bool take_spliced(size_t n);
  // Acts on a handler's verdict on part of the current record; false once closed.
  bool follow(Verdict verdict);
  void fail(const std::string& reason);

  std::unique_ptr<net::RawStream> stream_;
  std::string leftover_;
  std::shared_ptr<void> held_;
  std::vector<char>& piece_;
  std::shared_ptr<SplicePipe> pipe_;
  std::string remote_;
  Handlers handlers_;
  bool closed_ = false;
  Stage stage_ = Stage::kHeader;
  std::string small_;  // the header, the meta, or a message being gathered
  api::LogRecordHeader record_;
  api::LogFrameHeader at_;   // a log record's task and the offset of its next byte
  uint64_t payload_left_ = 0;
  bool skipping_ = false;  // the rest of this record is dropped
};

}  // namespace ag::head
