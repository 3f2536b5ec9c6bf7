// TaskRunner: starts task processes, follows them to the end, and finds them again
// after the worker agent itself restarts.
//
// Each task gets a folder <data_dir>/tasks/<job>.<attempt>.<index>/. The agent's task
// supervisor (task_supervisor.h: started once, afresh, in its own session, a child
// subreaper) starts `/bin/sh -c ENTRYPOINT` in its own process group and waits for it:
//
//   agent --launch--> supervisor --posix_spawn--> sh -c ENTRYPOINT (stdout+stderr -> output.log)
//                         | a task ends: kill what it left, write its `exit`
//                         | agent gone longer than the node timeout: kill its tasks
//
// The task writes its output straight into output.log, so it never depends on the
// agent being alive; the runner follows the file and the `exit` file through inotify
// (task_files_watch.h: pushed by the kernel; polling only where no watch can be had).
// A restarted agent calls recover() and adopts what still runs (the previous agent's
// supervisor goes on recording their ends). Every process of a task carries
// AG_TASK_MARKER, so a kill finds it even outside its group. All methods and callbacks
// run on the io thread.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/protocol.h"
#include "common/result.h"
#include "worker/marked_processes.h"
#include "worker/stack_dumps.h"
#include "worker/task_accounts.h"
#include "worker/task_files_watch.h"
#include "worker/task_folders.h"
#include "worker/task_launcher.h"
#include "worker/task_supervisor.h"

namespace ag::worker {

class TaskRunner final : public TaskLauncher {
 public:
  // Task folders live under <data_dir>/tasks; supervisors read <data_dir>/agent.pid
  // (written by the worker daemon) to know whether an agent is alive.
  // `cgroup_root`: where per-task control groups go ("" for none; task_cgroup.h);
  // `limits`: where the groups that cap tasks go (task_limits.h); `supervisor`: the
  // binary that runs `ag __task-supervisor` (this one; a test names the ag it built).
  // Task output and ends are followed by a TaskFilesWatch (inotify, else polling).
  // Errors: kInternal when the tasks folder cannot be made.
  static Result<std::unique_ptr<TaskRunner>> create(boost::asio::io_context& io, std::string data_dir,
                                                    std::string cgroup_root, LimitRoots limits = {},
                                                    std::string supervisor = "/proc/self/exe");
  ~TaskRunner() override;

  // Tasks launched from now on run as the account `accounts` gives their job's owner
  // (worker/task_accounts.h): their working folders are theirs, HOME, USER and
  // LOGNAME say who they are. Not owned; outlives this runner.
  void run_tasks_as(TaskAccounts* accounts) { accounts_ = accounts; }
  // Host tasks launched from now on arm their Python processes for `ag stack`
  // (worker/stack_dumps.h). Not owned; outlives this runner.
  void arm_stacks_with(StackDumps* dumps) { stack_dumps_ = dumps; }

  void set_events(LauncherEvents events) override { events_ = std::move(events); }
  std::vector<Recovered> recover() override;
  Result<std::map<std::string, std::string>> identity(const std::string& owner) override;
  Result<int64_t> launch(const LaunchSpec& spec) override;
  void kill(const api::TaskKey& id, int64_t grace_ms) override;
  void kill_all(int64_t grace_ms) override;
  // The worker stops and every task has ended: the supervisor leaves (waited for up to
  // `wait_ms`), taking what it kept ready with it.
  void finish(int wait_ms) { supervisor_.finish(wait_ms); }
  void forget(const api::TaskKey& id) override;
  // Ends, as lost, the tasks of a previous agent's supervisor that died meanwhile.
  void check() override;
  std::vector<Running> running() const override;
  Result<ExecTarget> exec_target(const api::TaskKey& id) const override;
  bool idle() const override { return tasks_.empty(); }
  bool runs(const api::TaskKey& id) const override { return tasks_.count(id) > 0; }
  int64_t output_size(const api::TaskKey& id) const override;
  std::string output_path(const api::TaskKey& id) const override { return log_path(id); }
  Result<size_t> read_output(const api::TaskKey& id, int64_t offset, int64_t max_bytes,
                             std::string& out) const override;

 private:
  TaskRunner(boost::asio::io_context& io, std::string data_dir, std::string cgroup_root, LimitRoots limits,
             std::string supervisor, int inotify_fd);
  // Where a task's output is kept.
  std::string log_path(const api::TaskKey& id) const;
  struct Task;
  // Keeps `task` among the running ones, its output and end followed.
  void track(const std::shared_ptr<Task>& task);
  void finish(const std::shared_ptr<Task>& task, const api::TaskExit& exit);
  void reap_children();
  void end_tasks_of_lost_supervisor(int64_t supervisor_pid);
  // A task folder without its record: a launch the previous agent handed to its
  // supervisor and died before recording. Ends what it started, if anything.
  void end_unrecorded_launch(const std::string& folder_name);
  void signal_task(Task& task, int sig);
  // The engine command line of a container task (its environment written beside it).
  Result<std::vector<std::string>> container_argv(const Task& task, const LaunchSpec& spec) const;
  void remove_container(const Task& task);

  boost::asio::io_context& io_;
  TaskFolders folders_;  // each task's tasks/ and (without a package) work/ folders
  std::string cgroup_root_;
  LimitRoots limits_;
  bool groups_by_supervisor_;  // cgroup v1: host tasks' groups are made by the supervisor
  LauncherEvents events_;
  boost::asio::signal_set sigchld_;
  SupervisorClient supervisor_;
  TaskFilesWatch files_;  // each running task's output.log and exit record
  std::map<api::TaskKey, std::shared_ptr<Task>> tasks_;
  TaskAccounts* accounts_ = nullptr;
  StackDumps* stack_dumps_ = nullptr;
};

}  // namespace ag::worker
