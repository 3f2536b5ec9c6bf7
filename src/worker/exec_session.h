// ExecSessions: the worker's part in `ag exec` (api/exec_protocol.h). For each
// exec_open from the head it dials back to the head for the session, starts the
// command beside the task (worker/exec_helper.h: the task's user, groups, directory and
// environment, or `ENGINE exec` into its container) and passes its stdout and stderr
// to the head as they come, reading on only while little is queued, then its exit
// status. Input from the client goes to its stdin. With a terminal the command runs on
// a new pseudo-terminal (its size follows the client's). A port forward's session is a
// TCP connection to 127.0.0.1:PORT instead of a command. A session whose head side
// closes first ends the command: SIGHUP to its process group, SIGKILL 5 s later. Io
// thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>
#include <string>

#include "api/protocol.h"
#include "net/http_client.h"
#include "worker/task_launcher.h"

namespace ag::worker {

class ExecSessions {
 public:
  struct Deps {
    boost::asio::io_context& io;
    const TaskLauncher& launcher;
    std::function<net::Endpoint()> head;  // the head to dial back to
    std::function<std::string()> token;   // the node's credential
    std::string executable = "/proc/self/exe";
  };
  // Sessions running at once on this node; more are refused with a status frame.
  static constexpr size_t kMaxSessions = 64;

  explicit ExecSessions(Deps deps) : deps_(std::move(deps)) {}

  void open(const api::ExecOpen& request);
  size_t running() const { return *running_; }

 private:
  Deps deps_;
  std::shared_ptr<size_t> running_ = std::make_shared<size_t>(0);
};

}  // namespace ag::worker
