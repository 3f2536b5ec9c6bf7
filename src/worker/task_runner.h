// TaskRunner: starts task processes and supervises them to the end.
//
// Each task runs as `/bin/sh -c ENTRYPOINT` in its own session (so its process group
// is its own), in its working dir, with its environment. Its stdout and stderr go to
// one pipe that the runner reads without blocking and hands on in chunks with their
// offsets (and keeps in a file of its own). The worker is a child subreaper, so a
// grandchild that daemonises is still reaped here, and every process of a task
// carries a marker variable so that a kill finds it even outside the group.
//
//   launch -> fork/exec -> started(pid) -> output chunks ... -> exited(code|signal)
//   kill   -> SIGTERM to every process of the task -> grace -> SIGKILL
//
// All methods and callbacks run on the io thread.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "common/result.h"

namespace ag::worker {

struct TaskId {
  std::string job_id;
  int attempt = 0;
  int task_index = 0;
  auto operator<=>(const TaskId&) const = default;
  std::string to_string() const;
};

struct LaunchSpec {
  TaskId id;
  std::string entrypoint;
  std::map<std::string, std::string> env;  // complete environment of the task
  std::string working_dir;                  // created if missing
};

struct ExitStatus {
  std::optional<int> exit_code;
  std::optional<int> signal;
};

struct RunnerCallbacks {
  std::function<void(const TaskId&, int64_t offset, std::string_view data)> on_output;
  std::function<void(const TaskId&, const ExitStatus&)> on_exit;
};

class TaskRunner {
 public:
  TaskRunner(boost::asio::io_context& io, std::string logs_dir, RunnerCallbacks callbacks);
  ~TaskRunner();

  // Starts the task; returns its pid. Errors: kConflict when that task already runs;
  // kInternal with the reason when it could not start (working dir, fork, exec).
  Result<int64_t> launch(const LaunchSpec& spec);

  // Stops every process of the task: SIGTERM now, SIGKILL after `grace_ms`. Unknown
  // or finished tasks are ignored.
  void kill(const TaskId& id, int64_t grace_ms);
  // Kills every task at once (worker shutdown).
  void kill_all(int64_t grace_ms);

  struct Running {
    TaskId id;
    int64_t pid;
  };
  std::vector<Running> running() const;
  // Bytes of output a running task has produced so far; nullopt when not running.
  std::optional<int64_t> output_offset(const TaskId& id) const;
  // Where the runner keeps its own copy of a task's output.
  std::string log_path(const TaskId& id) const;
  bool idle() const { return tasks_.empty(); }

 private:
  struct Task;
  void read_output(const std::shared_ptr<Task>& task);
  void watch_children();
  void reap();
  void maybe_finish(const std::shared_ptr<Task>& task);
  void signal_task(Task& task, int sig);
  bool has_adopted_orphans() const;

  boost::asio::io_context& io_;
  std::string logs_dir_;
  RunnerCallbacks callbacks_;
  boost::asio::signal_set sigchld_;
  std::map<TaskId, std::shared_ptr<Task>> tasks_;
  std::map<int64_t, std::shared_ptr<Task>> by_pid_;
};

// Pids of every live process whose environment holds AG_TASK_MARKER=`marker`.
std::vector<int> find_marked_processes(const std::string& marker);

}  // namespace ag::worker
