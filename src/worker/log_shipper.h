// LogShipper: what the worker sends the head once registered, in order: messages, task
// output and task exits. It owns the path they take and the output still to send.
//
//   registered --> the log stream dialled (messages held meanwhile, so that all keep
//                  their order) --> on the stream, or in frames on the channel
//   each task the head takes output from has a cursor (the next byte to send): set at
//   its start or where the head's copy ends (log_resume); output goes round robin, one
//   piece per task in turn, while the path has room (it calls again as it drains)
//   a task's exit goes after its last byte, with the log's length; it is kept until the
//   head acknowledges it (an exit the head has not got is reported again at the next
//   registration)
//
// A dropped channel forgets the path and the cursors: the next head says where each log
// stands. Owner's (io) thread only.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "api/protocol.h"
#include "common/timers.h"
#include "net/ws_connection.h"
#include "worker/head_dialer.h"
#include "worker/log_stream.h"
#include "worker/task_launcher.h"

namespace ag::worker {

class LogShipper {
 public:
  struct Deps {
    Timers& timers;
    HeadDialer& head;        // dials the log stream
    TaskLauncher& launcher;  // where the output is
  };
  // `use_stream`: output goes on the log stream when the head takes one (else frames).
  LogShipper(Deps deps, bool use_stream) : deps_(deps), use_stream_(use_stream) {}
  ~LogShipper();
  LogShipper(const LogShipper&) = delete;
  LogShipper& operator=(const LogShipper&) = delete;

  // The channel is up (the agent registers on it) / the head registered this node /
  // the channel dropped.
  void connected(std::shared_ptr<net::WsConnection> channel);
  void registered();
  void disconnected();
  bool is_registered() const { return registered_; }

  // A message, on the path output takes (dropped while not registered: the next
  // registration reports what still matters).
  void send(const api::WorkerMessage& message);

  // A task started (its output from the start), the head's copy of a log ends at
  // `from_offset` (from there on), a task wrote more (sent within a few ms).
  void task_started(const api::TaskKey& task);
  void resume(const api::TaskKey& task, int64_t from_offset);
  void task_output(const api::TaskKey& task);

  // A task ended: its exit goes after its output. `start_failed`: it never ran (sent now).
  void task_exited(const api::TaskKey& task, const api::TaskExit& exit);
  void start_failed(const api::TaskKey& task, const api::TaskExit& exit);
  // An exit a previous agent did not get acknowledged: reported at registration.
  void recovered_exit(const api::TaskKey& task, const api::TaskExit& exit);
  void acknowledged(const api::TaskKey& task) { unacked_.erase(task); }
  bool unacknowledged(const api::TaskKey& task) const { return unacked_.count(task) > 0; }
  std::vector<api::TaskExited> unacknowledged_exits() const;

  // Shutting down: output written from now on waits for a channel or a pump already due
  // (no new batch timer).
  void stop();

 private:
  struct Cursor {
    int64_t offset = 0;     // next byte to send
    bool exit_due = false;  // the task ended: its exit follows its last byte
    bool waiting = false;   // in ready_
  };
  using Cursors = std::map<api::TaskKey, Cursor>;
  void open_stream();
  void want(const api::TaskKey& task);
  // Sends while the path has room: frames on the channel, or records on the stream.
  void pump();
  void pump_stream();
  Cursors::iterator next_ready();  // the next task in turn that has a cursor
  // At the end of an ended task's output: its exit (with its length when known); the
  // cursor goes.
  void send_exit_after_output(Cursors::iterator it, bool length_known);
  // The task's output could not be read: tried again shortly.
  void retry(const api::TaskKey& task, const std::string& why);

  Deps deps_;
  bool use_stream_;
  std::shared_ptr<net::WsConnection> channel_;
  bool registered_ = false;
  // How output and messages travel on this channel: decided after each registration.
  // While the stream is being opened, messages wait in held_ and no output is sent.
  enum class Path { kUndecided, kDialing, kStream, kFrames };
  Path path_ = Path::kUndecided;
  std::shared_ptr<LogStream> stream_;
  std::vector<std::string> held_;
  Cursors cursors_;
  std::deque<api::TaskKey> ready_;  // tasks that may have output to send, in turn
  Timers::Id batch_timer_ = 0;
  bool stopped_ = false;  // stop(): no more batch timers
  std::map<api::TaskKey, api::TaskExited> unacked_;  // exits the head has not acknowledged
};

}  // namespace ag::worker
