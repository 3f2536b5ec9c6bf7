// StackDumps: the worker's part in `ag stack`. Each host task's Python processes arm
// themselves at start through the worker's own `sitecustomize` (last on the task's
// PYTHONPATH, so before the interpreter's own folders; it then runs the one it
// shadows): Python's faulthandler writes the stacks
// of all their threads to DIR/PID.stack when they get AG_STACK_SIGNAL, from its C signal
// handler, so a rank blocked inside a collective answers too. Nothing runs until then.
//
// take() signals the task's processes that have a handler for that signal (SigCgt in
// /proc/PID/status: a process that is not armed is never sent it, as it would end it),
// waits until each file stops growing, and answers what each wrote. A task without an
// armed process is answered with its process tree. Files are opened without following
// links and must belong to the process's user. A container task's processes write
// under their own pid numbers (NSpid). Io thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "api/container_spec.h"
#include "api/protocol.h"
#include "common/result.h"
#include "worker/task_user.h"

namespace ag::worker {

class StackDumps {
 public:
  // How long the processes are given to write their stacks.
  static constexpr int kAnswerMs = 3000;
  // The most of one process's stacks, and of one answer, that is kept.
  static constexpr size_t kProcessBytes = 256 << 10;
  static constexpr size_t kReportBytes = 1 << 20;

  // Writes DATA_DIR/python-hook/sitecustomize.py and makes DATA_DIR/stacks.
  static Result<std::unique_ptr<StackDumps>> create(boost::asio::io_context& io, const std::string& data_dir);

  // The signal the processes arm (SIGRTMIN + 6).
  static int signal_number();

  // Names the task's folder for its stacks (stacks/u<uid>/<task>, made by its first
  // Python process in its user's folder) and adds what arms its Python processes to
  // `env`: AG_STACK_DIR, AG_STACK_SIGNAL, the hook last on PYTHONPATH.
  Status arm(const api::TaskKey& task, const std::optional<TaskUser>& user, std::map<std::string, std::string>& env);
  // The same for a container task: the hook and the folder are mounted into the
  // container (kContainerHook, kContainerStacks) and `env` names them there.
  Status arm_container(const api::TaskKey& task, const std::optional<TaskUser>& user,
                       std::map<std::string, std::string>& env, std::vector<api::Mount>& mounts);
  static constexpr const char* kContainerHook = "/run/aethergrid/python-hook";
  static constexpr const char* kContainerStacks = "/run/aethergrid/stacks";
  // Removes the task's folder, if it was made.
  void forget(const api::TaskKey& task);

  // The stacks of `pids` (the task's processes); `done` runs on the io thread.
  void take(const api::StackRequest& request, std::vector<int> pids, std::function<void(api::StackReport)> done);

 private:
  StackDumps(boost::asio::io_context& io, std::string data_dir) : io_(io), data_dir_(std::move(data_dir)) {}
  static std::string task_name(const api::TaskKey& task);
  // Where the task's stacks are (stacks/u<uid>/<task>), "" when there is no such folder.
  std::string find_task_dir(const api::TaskKey& task) const;
  // stacks/u<uid>: the folder of the user's tasks' folders, theirs alone (made once).
  Result<std::string> user_dir(const std::optional<TaskUser>& user);
  // Where the task's folder goes (nothing of an earlier launch left there).
  Result<std::string> task_dir_for(const api::TaskKey& task, const std::optional<TaskUser>& user);
  static void name_in_env(std::map<std::string, std::string>& env, const std::string& dir, const std::string& hook);

  boost::asio::io_context& io_;
  std::string data_dir_;
  std::set<uint32_t> made_;  // users whose folder exists
  // Tasks armed by this agent and not yet forgotten: where their folder goes. A task
  // armed by an earlier agent is looked for in every user's folder.
  std::map<api::TaskKey, std::string> armed_;
};

}  // namespace ag::worker
