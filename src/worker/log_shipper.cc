#include "worker/log_shipper.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "api/log_frame.h"

namespace ag::worker {
namespace {

// Task output travels in frames of up to kLogChunkBytes, read from the task's file
// only while fewer than kLogWindowBytes wait to be written to the head; once the
// channel is down to kLogLowWaterBytes reading goes on. A node's memory for output is
// thus bounded whatever its tasks write: the rest waits in their files.
constexpr int64_t kLogChunkBytes = 256 * 1024;
constexpr size_t kLogWindowBytes = 4 << 20;
constexpr size_t kLogLowWaterBytes = 1 << 20;
// New output is sent this long after the task wrote it, so that a task's many small
// writes travel as a few frames rather than one each.
constexpr int64_t kLogBatchMs = 5;
constexpr int64_t kLogRetryMs = 100;  // after a task's output could not be read
// On the log stream output goes from file to socket in the kernel: records are larger,
// and bound no memory here (the socket's buffer is the window).
constexpr int64_t kStreamRecordBytes = 4 << 20;

}  // namespace

LogShipper::~LogShipper() {
  if (stream_) stream_->close();  // its callbacks point here
}

void LogShipper::connected(std::shared_ptr<net::WsConnection> channel) {
  channel_ = std::move(channel);
  std::weak_ptr<net::WsConnection> weak = channel_;
  channel_->on_drained(kLogLowWaterBytes, [this, weak] {
    if (weak.lock() == channel_) pump();
  });
}

void LogShipper::registered() {
  registered_ = true;
  open_stream();
}

void LogShipper::disconnected() {
  channel_.reset();
  registered_ = false;
  if (stream_) stream_->close();
  stream_.reset();
  path_ = Path::kUndecided;
  held_.clear();  // the next registration reports what still matters
  // The next head says where each log stands (log_resume) before any more is sent.
  cursors_.clear();
  ready_.clear();
}

void LogShipper::send(const api::WorkerMessage& message) {
  if (!channel_ || !registered_) return;
  switch (path_) {
    case Path::kStream:
      return stream_->send_message(api::encode(message));
    case Path::kDialing:
      // Heartbeats keep the node alive meanwhile (they carry no order with the rest).
      if (std::holds_alternative<api::Heartbeat>(message)) return channel_->send(api::encode(message), false);
      return held_.push_back(api::encode(message));
    case Path::kUndecided:
    case Path::kFrames:
      return channel_->send(api::encode(message), false);
  }
}

void LogShipper::open_stream() {
  if (!use_stream_) {
    path_ = Path::kFrames;
    return;
  }
  path_ = Path::kDialing;
  std::weak_ptr<net::WsConnection> weak = channel_;
  deps_.head.dial_log_stream([this, weak](Result<std::shared_ptr<LogStream>> result) {
    if (weak.lock() != channel_ || !channel_ || path_ != Path::kDialing) {
      // The channel it was for is gone.
      if (result.ok()) result.value()->close();
      return;
    }
    if (result.ok()) {
      stream_ = std::move(result.value());
      path_ = Path::kStream;
      stream_->on_failed([this, weak](const std::string& reason) {
        // What was on its way is lost with it: reconnecting makes the head say again
        // where each log stands, and the exits not acknowledged are reported again.
        spdlog::warn("lost the log stream to the head ({}); reconnecting", reason);
        if (auto channel = weak.lock(); channel && channel == channel_) channel->close();
      });
    } else {
      if (result.error().code == ErrorCode::kNotFound) {
        spdlog::info("{}; task output goes in frames on the channel", result.error().message);
      } else {
        spdlog::warn("{}; task output goes in frames on the channel", result.error().message);
      }
      path_ = Path::kFrames;
    }
    auto held = std::move(held_);
    held_.clear();
    for (auto& text : held) {
      if (path_ == Path::kStream) {
        stream_->send_message(std::move(text));
      } else {
        channel_->send(std::move(text), false);
      }
    }
    // Only now may a drained stream pull output: the held messages go first, in order.
    if (path_ == Path::kStream) stream_->on_drained([this] { pump(); });
    pump();
  });
}

void LogShipper::task_started(const api::TaskKey& task) {
  if (!registered_) return;
  cursors_[task] = Cursor{};
  want(task);
  pump();
}

void LogShipper::resume(const api::TaskKey& task, int64_t from_offset) {
  // From the head's end of the log on; for a task that has ended, its exit follows the
  // last byte again, so the head sees the whole log before the end of the task.
  Cursor& cursor = cursors_[task];
  cursor.offset = from_offset;
  cursor.exit_due = cursor.exit_due || unacked_.count(task) > 0;
  want(task);
  pump();
}

void LogShipper::task_output(const api::TaskKey& task) {
  want(task);
  if (batch_timer_ || stopped_) return;
  batch_timer_ = deps_.timers.start(kLogBatchMs, [this] {
    batch_timer_ = 0;
    pump();
  });
}

void LogShipper::task_exited(const api::TaskKey& task, const api::TaskExit& exit) {
  api::TaskExited report{task, exit};
  unacked_[task] = report;
  if (auto it = cursors_.find(task); it != cursors_.end()) {
    // Sent once the rest of its output is.
    it->second.exit_due = true;
    want(task);
    pump();
    return;
  }
  // Not being sent (the head has not said where its copy ends): the length tells the
  // head whether it lacks bytes, which it then asks for before acknowledging.
  report.log_bytes = deps_.launcher.output_size(task);
  unacked_[task] = report;
  send(report);
}

void LogShipper::start_failed(const api::TaskKey& task, const api::TaskExit& exit) {
  api::TaskExited report{task, exit};
  unacked_[task] = report;
  send(report);
}

void LogShipper::recovered_exit(const api::TaskKey& task, const api::TaskExit& exit) {
  unacked_[task] = api::TaskExited{task, exit};
}

std::vector<api::TaskExited> LogShipper::unacknowledged_exits() const {
  std::vector<api::TaskExited> out;
  for (const auto& [_, exited] : unacked_) out.push_back(exited);
  return out;
}

void LogShipper::stop() {
  stopped_ = true;
  if (batch_timer_) deps_.timers.cancel(batch_timer_);
  batch_timer_ = 0;
}

void LogShipper::want(const api::TaskKey& task) {
  auto it = cursors_.find(task);
  if (it == cursors_.end() || it->second.waiting) return;
  it->second.waiting = true;
  ready_.push_back(task);
}

void LogShipper::pump() {
  if (path_ == Path::kDialing || path_ == Path::kUndecided) return;
  if (path_ == Path::kStream) return pump_stream();
  // Round robin over the tasks with output to send, one chunk each, while the channel
  // has room: a task that writes much does not hold up the others.
  while (channel_ && registered_ && channel_->queued_bytes() < kLogWindowBytes) {
    auto it = next_ready();
    if (it == cursors_.end()) break;
    const api::TaskKey id = it->first;
    Cursor& cursor = it->second;
    std::string frame = api::log_frame_prefix({id, cursor.offset}, kLogChunkBytes);
    auto chunk = deps_.launcher.read_output(id, cursor.offset, kLogChunkBytes, frame);
    if (chunk.ok() && chunk.value() > 0) {
      channel_->send(std::move(frame), true);
      cursor.offset += static_cast<int64_t>(chunk.value());
      want(id);
      continue;
    }
    if (!chunk.ok() && chunk.error().code != ErrorCode::kNotFound) {
      retry(id, chunk.error().message);
      continue;
    }
    // At the end of what the task wrote so far. An ended task's exit goes now, with its
    // length, and its cursor with it (the head asks again if it lacks bytes).
    if (cursor.exit_due) send_exit_after_output(it, chunk.ok());
  }
}

void LogShipper::pump_stream() {
  // As pump, one record of up to kStreamRecordBytes per task in turn; the stream takes
  // the next once the socket has taken the last.
  while (registered_ && stream_ && !stream_->busy()) {
    auto it = next_ready();
    if (it == cursors_.end()) break;
    const api::TaskKey id = it->first;
    Cursor& cursor = it->second;
    const int64_t size = deps_.launcher.output_size(id);
    if (size > cursor.offset) {
      int64_t length = std::min<int64_t>(size - cursor.offset, kStreamRecordBytes);
      Status sent = stream_->send_file({id, cursor.offset}, deps_.launcher.output_path(id), length);
      if (!sent) {
        if (sent.error().code == ErrorCode::kNotFound) {
          want(id);  // gone meanwhile: its exit goes without a length
        } else {
          retry(id, sent.error().message);
        }
        continue;
      }
      cursor.offset += length;
      want(id);
      continue;
    }
    if (cursor.exit_due) send_exit_after_output(it, size >= 0);
  }
}

LogShipper::Cursors::iterator LogShipper::next_ready() {
  while (!ready_.empty()) {
    auto it = cursors_.find(ready_.front());
    ready_.pop_front();
    if (it == cursors_.end()) continue;
    it->second.waiting = false;
    return it;
  }
  return cursors_.end();
}

void LogShipper::send_exit_after_output(Cursors::iterator it, bool length_known) {
  if (auto exited = unacked_.find(it->first); exited != unacked_.end()) {
    api::TaskExited report = exited->second;
    if (length_known) report.log_bytes = it->second.offset;
    if (path_ == Path::kStream) {
      stream_->send_message(api::encode(report));
    } else {
      channel_->send(api::encode(report), false);
    }
  }
  cursors_.erase(it);
}

void LogShipper::retry(const api::TaskKey& task, const std::string& why) {
  // The file is there but cannot be read now (out of descriptors, ...): try again
  // shortly rather than send an end without its output.
  spdlog::warn("output of task {} cannot be read: {}; trying again", task.to_string(), why);
  auto it = cursors_.find(task);
  if (it == cursors_.end()) return;
  it->second.waiting = true;
  deps_.timers.start(kLogRetryMs, [this, task] {
    if (auto again = cursors_.find(task); again != cursors_.end()) {
      again->second.waiting = false;
      want(task);
      pump();
    }
  });
}

}  // namespace ag::worker
