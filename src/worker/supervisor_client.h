// The agent's end of its task supervisor (worker/task_supervisor.h): sends launch
// requests over the socket and takes the answers, in the order the requests went.
//
//   launch(request, fd, answer)   sends; `answer` gets the pid (or why not) once the
//                                 supervisor has started the task, from the io_context
//   launch(request, fd)           the same, waiting for the answer (and for those of
//                                 every launch sent before it)
//
// The agent does not wait for a task's exec: while the supervisor starts one task, the
// agent gets the next ready, so ranks packed on one node start one right after another.
// At most 16 launches wait in the socket; the rest wait here. A supervisor that does
// not answer within 10 s is killed; one that dies answers every launch it had with an
// error, and the launches not sent yet go to a new one.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>

#include "common/result.h"
#include "worker/task_supervisor.h"

namespace boost::asio {
class io_context;
}

namespace ag::worker {

class SupervisorClient {
 public:
  using Answer = std::function<void(Result<int64_t>)>;

  // `executable`: the `ag` binary that runs supervisors (this very process's by
  // default). `io`: where answers to launches that do not wait are taken (nullptr: every
  // launch waits).
  explicit SupervisorClient(std::string executable = "/proc/self/exe", boost::asio::io_context* io = nullptr);
  ~SupervisorClient();
  SupervisorClient(const SupervisorClient&) = delete;
  SupervisorClient& operator=(const SupervisorClient&) = delete;

  // Sends the task to the supervisor (started on first use, or again after one died),
  // its stdout and stderr going to `output_fd` (the supervisor gets a copy). `answer`
  // gets the task's pid once it has started; errors: kInvalidArgument for a NUL byte in
  // the request (answered before this returns); kInternal with the reason it could not
  // start. Needs an io_context.
  void launch(const LaunchRequest& request, int output_fd, const std::string& agent_pid_file, Answer answer);
  // The same, waiting for the answer. Returns the task's pid.
  Result<int64_t> launch(const LaunchRequest& request, int output_fd, const std::string& agent_pid_file);

  // Launches not answered yet (sent, or waiting for earlier ones to be answered).
  size_t unanswered() const { return waiting_.size() + queued_.size(); }
  // The supervisor's pid, 0 before the first launch.
  pid_t pid() const { return pid_; }
  // The agent is stopping with no task left: closes the socket, so the supervisor lets
  // its ready-made process go with its groups and leaves, and waits up to `wait_ms` for
  // it to be gone (the agent then removes the node's folders of groups).
  void finish(int wait_ms);
  // Called when the agent reaped `pid`: true (and the next launch forks a new
  // supervisor) when it was this supervisor. Launches it had not answered fail.
  bool on_reaped(pid_t pid);

 private:
  struct Watch;  // the socket in the io_context, and the deadline of the oldest launch
  struct Launch {
    std::string payload;  // the encoded request
    int output_fd;        // the caller's, open until answered
    Answer answer;
  };
  Status start(const std::string& agent_pid_file);
  // Sends `launch` (true), or answers it with why it cannot be sent (false).
  bool transmit(Launch& launch);
  // Sends queued launches while fewer than the most in flight wait for answers.
  void send_queued();
  // Takes the oldest launch's answer (readable now, or within `wait_ms`).
  void take_answer(int wait_ms);
  void watch();
  void arm_deadline();
  // Every launch sent and not answered fails with `why`; the socket is closed.
  void fail_sent(const std::string& why);
  void drop();

  std::string executable_;
  boost::asio::io_context* io_;
  pid_t pid_ = 0;
  int fd_ = -1;
  std::string agent_pid_file_;
  std::deque<Answer> waiting_;  // sent, in order
  std::deque<Launch> queued_;   // not sent yet
  std::unique_ptr<Watch> watch_;
};

}  // namespace ag::worker
