// The first process of a command run beside a task (`ag exec`): a fresh `ag` started by
// the agent as `ag __task-exec`, its stdio already the session's pipes, its orders on
// descriptor 3. It joins the task's control groups, takes a process group of its own
// (on a terminal: a session, with the terminal as its controlling one),
// becomes the task's user, enters its directory and executes the command with the
// task's environment. A command that cannot be executed is reported on stderr with
// exit status 127 (not found) or 126 (found, not executable), as a shell does.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "common/result.h"

namespace ag::worker {

inline constexpr const char* kTaskExecCommand = "__task-exec";

struct ExecOrders {
  std::vector<std::string> cgroups;
  bool switch_user = false;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
  std::string dir;
  std::vector<std::string> command;
  std::vector<std::string> env;  // KEY=VALUE
  bool terminal = false;  // stdin is a terminal to take as the controlling one
};

std::string encode_exec_orders(const ExecOrders& orders);
Result<ExecOrders> decode_exec_orders(const std::string& text);

// The orders for a command beside the host process `pid` (a task's first process): its
// user and groups, directory and environment, read from /proc. Errors: kNotFound when
// the process is gone.
Result<ExecOrders> orders_beside(int64_t pid, std::vector<std::string> command, std::vector<std::string> cgroups);

// `ag __task-exec`: reads the orders from `orders_fd` and executes them; never returns.
[[noreturn]] void run_exec_helper(int orders_fd);

}  // namespace ag::worker
