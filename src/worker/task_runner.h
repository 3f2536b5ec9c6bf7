// TaskRunner: starts task processes, follows them to the end, and finds them again
// after the worker agent itself restarts.
//
// Each task gets a folder <data_dir>/tasks/<job>.<attempt>.<index>/. The agent's task
// supervisor (task_supervisor.h: forked from the agent once, its own session, a child
// subreaper) starts `/bin/sh -c ENTRYPOINT` in its own process group and waits for it:
//
//   agent --launch--> supervisor --posix_spawn--> sh -c ENTRYPOINT (stdout+stderr -> output.log)
//                         | a task ends: kill what it left, write its `exit`
//                         | agent gone longer than the node timeout: kill its tasks
//
// The task writes its output straight into output.log, so it never depends on the
// agent being alive; the runner follows the file and the `exit` file through inotify
// (pushed by the kernel, no polling). A restarted agent calls recover() and adopts
// what still runs (the previous agent's supervisor goes on recording their ends).
// Every process of a task carries AG_TASK_MARKER, so a kill finds it even outside its
// group. All methods and callbacks run on the io thread.
#pragma once

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "worker/task_supervisor.h"

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
  int64_t orphan_timeout_ms = 10000;        // kill the task when no agent runs for this long
};

struct ExitStatus {
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::string lost;  // set when the task vanished without a recorded end
};

struct RunnerCallbacks {
  std::function<void(const TaskId&, int64_t offset, std::string_view data)> on_output;
  std::function<void(const TaskId&, const ExitStatus&)> on_exit;
};

class TaskRunner {
 public:
  // Task folders live under <data_dir>/tasks; supervisors read <data_dir>/agent.pid
  // (written by the worker daemon) to know whether an agent is alive.
  // `cgroup_root`: where per-task control groups go ("" for none; task_cgroup.h).
  TaskRunner(boost::asio::io_context& io, std::string data_dir, std::string cgroup_root, RunnerCallbacks callbacks);
  ~TaskRunner();

  struct Recovered {
    TaskId id;
    int64_t pid = 0;
    std::optional<ExitStatus> exit;  // set when it ended while no agent ran
  };
  // Finds the tasks a previous agent left: running ones are adopted (output and exit
  // followed from now on), ended ones are returned with their exit for reporting.
  std::vector<Recovered> recover();

  // Starts the task; returns its pid. Errors: kConflict when that task already runs;
  // kInternal with the reason when it could not start (working dir, fork, exec).
  Result<int64_t> launch(const LaunchSpec& spec);

  // Stops every process of the task: SIGTERM now, SIGKILL after `grace_ms`. Unknown
  // or finished tasks are ignored.
  void kill(const TaskId& id, int64_t grace_ms);
  // Kills every task at once (worker shutdown).
  void kill_all(int64_t grace_ms);

  // The head has recorded the task's end: its folder can go.
  void forget(const TaskId& id);

  // Ends, as lost, the tasks of a previous agent's supervisor that died meanwhile
  // (call now and then: the agent's heartbeat).
  void check_supervisors();

  struct Running {
    TaskId id;
    int64_t pid;
  };
  std::vector<Running> running() const;
  bool idle() const { return tasks_.empty(); }
  // Bytes of output a running task has produced so far; nullopt when not running.
  std::optional<int64_t> output_offset(const TaskId& id) const;
  // Where a task's output is kept.
  std::string log_path(const TaskId& id) const;

 private:
  struct Task;
  std::string task_dir(const TaskId& id) const;
  void watch(const std::shared_ptr<Task>& task);
  void read_inotify();
  void drain_output(Task& task);
  void finish(const std::shared_ptr<Task>& task, const ExitStatus& exit);
  void reap_children();
  void end_tasks_of_lost_supervisor(int64_t supervisor_pid);
  void signal_task(Task& task, int sig);

  boost::asio::io_context& io_;
  std::string data_dir_;
  std::string cgroup_root_;
  RunnerCallbacks callbacks_;
  boost::asio::signal_set sigchld_;
  SupervisorClient supervisor_;
  std::unique_ptr<boost::asio::posix::stream_descriptor> inotify_;
  std::array<char, 16384> inotify_buffer_{};
  std::map<TaskId, std::shared_ptr<Task>> tasks_;
  std::map<int, std::shared_ptr<Task>> by_watch_;
};

// Pids of every live process whose environment holds AG_TASK_MARKER=`marker`.
std::vector<int> find_marked_processes(const std::string& marker);

// Parses the supervisor's exit record ("exit 3", "signal 9").
std::optional<ExitStatus> parse_exit_record(const std::string& text);

}  // namespace ag::worker
