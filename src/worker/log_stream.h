// LogStream: the worker's end of its log stream to the head (api/log_stream.h). Task
// output goes from the task's file to the socket with sendfile(2), never through this
// process's memory; messages for the head queue behind it, so they keep their order
// with the output. The agent gives it one output record at a time (while busy() it
// waits for on_drained). Owner's (io) thread only.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "api/log_frame.h"
#include "api/protocol.h"
#include "common/result.h"
#include "net/http_client.h"

namespace boost::asio {
class io_context;
}

namespace ag::worker {

class LogStream {
 public:
  virtual ~LogStream() = default;
  // Sends `length` bytes of the file at `path` from `at.offset`, as the task's bytes
  // from that offset. Errors: kNotFound / kInternal when the file cannot be opened.
  virtual Status send_file(const api::LogFrameHeader& at, const std::string& path, int64_t length) = 0;
  // Sends a worker message (JSON) after everything given before it.
  virtual void send_message(std::string message) = 0;
  // Something given is not written yet.
  virtual bool busy() const = 0;
  // `fn` runs each time everything given has been written.
  virtual void on_drained(std::function<void()> fn) = 0;
  // `fn` runs once if the stream fails (the head closed it, the socket broke), from the
  // io thread's queue: never inside a call to the stream. Not after close().
  virtual void on_failed(std::function<void(const std::string& reason)> fn) = 0;
  virtual void close() = 0;
};

using LogStreamDone = std::function<void(Result<std::shared_ptr<LogStream>>)>;

// Opens the stream to `head` from `bind_address` with the node's credential: inside
// TLS when the head is pinned (head.tls()), verified as the channel is. Errors:
// kUnavailable (no connection), kNotFound (the head has no log stream: an older head),
// or the head's refusal (kUnauthenticated, kPermissionDenied, kConflict) with its
// message; kPermissionDenied too for a head that does not verify against the pinned CA.
void dial_log_stream(boost::asio::io_context& io, const net::Endpoint& head, const std::string& bind_address,
                     const std::string& credential, LogStreamDone done);

}  // namespace ag::worker
