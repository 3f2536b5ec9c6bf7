// The per-task supervisor: the code a forked child of the agent runs for the life of
// one task (see task_runner.h for the picture). It starts the task, reaps it and any
// orphans it leaves (it is a child subreaper), records how it ended in `exit`, and
// kills the task if no agent has been alive for the orphan timeout.
//
// It runs between fork and exit of a child of the agent, so it keeps to plain system
// calls and takes everything it needs, prepared, from the agent.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ag::worker {

struct SupervisorArgs {
  std::string task_dir;        // where `exit` is written
  std::string agent_pid_file;  // the agent's pid; no live agent there = orphaned
  std::string marker;          // AG_TASK_MARKER value of the task's processes
  std::string cgroup;          // the task's control group, or "" where there is none
  int64_t orphan_timeout_ms = 10000;
  // The task's exec, prepared by the agent.
  std::vector<char*> argv;
  std::vector<char*> envp;
  std::string working_dir;
  int output_fd = -1;  // output.log, opened for appending
  int error_fd = -1;   // close-on-exec pipe: why the task could not start
  int report_fd = -1;  // pipe: the task's pid, once forked
};

[[noreturn]] void run_supervisor(const SupervisorArgs& args);

}  // namespace ag::worker
