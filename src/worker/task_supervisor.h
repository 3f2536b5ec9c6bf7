// The task supervisor: one small process per agent process, started by it, that
// starts every task the agent launches, reaps it and whatever it leaves (it is a child
// subreaper in its own session), records how each task ended in its `exit` file, and
// kills the tasks once no agent has been alive for their orphan timeout. It outlives
// its agent: a restarted agent adopts the tasks, and the supervisor goes on recording
// their ends; it leaves once its agent is gone and its last task has ended.
//
//   agent ==(socket: launch request + output fd)==> supervisor --> sh -c ENTRYPOINT
//         <==(the task's pid, or why it could not start)==
//
// How it starts a task (posix_spawn, fork, clone3 into its cgroup v2 group) is in
// worker/task_start.h; on cgroup v1 it keeps a process ready in spare groups for the
// next task (worker/warm_task.h), makes host tasks' groups itself, and keeps an ended
// task's emptied groups for the next ones (worker/cgroup_pool.h).
//
// A long-lived supervisor, not one per task: forking a process of the agent's size and
// tearing it down again cost more than the short tasks themselves. It is the same
// executable started afresh (`ag __task-supervisor AGENT_PID_FILE`, socket on fd 3),
// not a fork of the multi-threaded agent. It does not log.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "worker/task_limits.h"

namespace ag::worker {

// One task for the supervisor to start.
struct LaunchRequest {
  std::string task_dir;     // where `exit` is written
  std::string working_dir;  // the task's current directory
  std::string cgroup;       // the task's control group, or "" where there is none
  // Where a supervisor of an earlier version, which stepped into a task's groups for
  // the spawn, steps back to ("" = cgroup's parent); this one never moves.
  std::string cgroup_home;
  std::vector<std::string> limit_cgroups;  // groups in other hierarchies that cap the task (task_limits.h)
  std::string memory_cgroup;               // where the task's out-of-memory kills are counted, or ""
  TaskLimits limits;                       // the caps written on `limit_cgroups`
  // The supervisor makes `cgroup` and `limit_cgroups` (cgroup v1 host tasks); else the
  // agent made them.
  bool make_groups = false;
  // Run once the task has ended, however it ended (a container task: remove what its
  // engine left), with two more arguments: "cleanup" and the task's exit code, or
  // "signal". Empty for none.
  std::vector<std::string> cleanup_argv;
  std::string marker;  // AG_TASK_MARKER value of the task's processes
  int64_t orphan_timeout_ms = 10000;
  // The account the task runs as (worker/task_user.h); unset: the supervisor's own.
  struct RunAs {
    uint32_t uid = 0;
    uint32_t gid = 0;
    std::vector<uint32_t> groups;
    bool operator==(const RunAs&) const = default;
  };
  std::optional<RunAs> run_as;
  std::vector<std::string> argv;
  std::vector<std::string> envp;  // "NAME=value"
};

// The hidden `ag` subcommand that runs a supervisor.
inline constexpr const char* kSupervisorCommand = "__task-supervisor";

// Requests travel as NUL-separated fields: none may hold a NUL itself.
bool has_nul(const LaunchRequest& request);
std::string encode_launch(const LaunchRequest& request);
std::optional<LaunchRequest> decode_launch(std::string_view bytes);

// The agent's end of its supervisor.
class SupervisorClient {
 public:
  // `executable`: the `ag` binary that runs supervisors (this very process's by default).
  explicit SupervisorClient(std::string executable = "/proc/self/exe") : executable_(std::move(executable)) {}
  ~SupervisorClient();
  SupervisorClient(const SupervisorClient&) = delete;
  SupervisorClient& operator=(const SupervisorClient&) = delete;

  // Starts the task through the supervisor (started on first use, or again after one
  // died), its stdout and stderr going to `output_fd`. Returns the task's pid.
  // Errors: kInvalidArgument for a NUL byte in the request; kInternal with the reason
  // it could not start (a supervisor that does not answer within 10 s is killed).
  Result<int64_t> launch(const LaunchRequest& request, int output_fd, const std::string& agent_pid_file);

  // The supervisor's pid, 0 before the first launch.
  pid_t pid() const { return pid_; }
  // The agent is stopping with no task left: closes the socket, so the supervisor lets
  // its ready-made process go with its groups and leaves, and waits up to `wait_ms` for
  // it to be gone (the agent then removes the node's folders of groups).
  void finish(int wait_ms);
  // Called when the agent reaped `pid`: true (and the next launch forks a new
  // supervisor) when it was this supervisor.
  bool on_reaped(pid_t pid);

 private:
  Status start(const std::string& agent_pid_file);
  void drop();

  std::string executable_;
  pid_t pid_ = 0;
  int fd_ = -1;
};

// The supervisor's main loop, on `agent_fd` (its end of the socket).
[[noreturn]] void run_supervisor(int agent_fd, const std::string& agent_pid_file);

}  // namespace ag::worker
