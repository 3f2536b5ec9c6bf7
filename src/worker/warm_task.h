// A task process made before its task, so that no process changes control group on the
// launch path (cgroup v1; on v2 a task is born in its group, worker/task_start.h).
// Moving a process between v1 groups waits for an RCU grace period, ~8 ms on an idle
// machine: the supervisor pays it ahead, while nothing waits.
//
//   make     once launches pause, the supervisor clones a child that shares its memory
//            (CLONE_VM, on a stack of its own: no page tables copied, none to tear
//            down at the exec); it moves itself into a spare group beside each group a
//            task of the last launch's kind joins (<dir>/warm.<supervisor pid>.<n>,
//            worker/cgroup_pool.h) and says it is ready
//   launch   each group the agent made for the task gives way to the spare beside it
//            (rmdir, then rename: a v1 group keeps its processes under its new name),
//            the task's caps go on them; the supervisor lays the request out in the
//            memory they share and hands over the task's output file, and the process
//            sets itself up and execs (become_task) while the supervisor waits for
//            the exec
//
// Until its exec the child shares the supervisor's address space: it allocates nothing
// and reads only what was laid out for it before it was told to. While it waits, both
// run, so it makes its system calls without the C library's wrappers, which would
// write the errno the two share; from the launch on, the supervisor only waits for the
// exec. The process is the supervisor's child, as a task started the other way is. A
// process never used is ended and reaped before its stack goes (or leaves by itself
// when its socket closes, the supervisor gone).
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "worker/cgroup_pool.h"
#include "worker/task_supervisor.h"

namespace ag::worker {

struct WarmChild;

class WarmTask {
 public:
  // Makes a process for tasks whose groups lie in `group_dirs` (the tracking group's
  // folder first, then each limit group's). `inherited`: the supervisor's descriptors
  // the child closes at once. nullptr when a spare group cannot be made or the clone
  // fails (tasks then start the other way).
  // Its spare groups come from `pool` (kept ones first).
  static std::unique_ptr<WarmTask> make(const std::vector<std::string>& group_dirs, const std::vector<int>& inherited,
                                        CgroupPool& pool);
  ~WarmTask();
  WarmTask(const WarmTask&) = delete;
  WarmTask& operator=(const WarmTask&) = delete;

  pid_t pid() const { return pid_; }

  // The folders a task of `request`'s kind has its groups in (what `make` takes).
  static std::vector<std::string> group_dirs(const LaunchRequest& request);
  const std::vector<std::string>& group_dirs() const { return dirs_; }
  // Whether `request`'s task fits this process: its groups lie in the same folders.
  bool fits(const LaunchRequest& request) const;
  // Whether the process sits in its spare groups, waiting at most `wait_ms` for it.
  bool ready(int wait_ms);

  enum class Outcome {
    kStarted,  // the process is the task now
    kFailed,   // it could not become the task (`error` says why); it is gone
    kNotUsed,  // the groups could not be handed over: the task's groups are as the agent
               // made them (caps included) and the process is gone; start it another way
  };
  // Hands `request` and `output_fd` to the process. Whatever the outcome, this object
  // is spent: drop it (and remove `release()`'s groups later).
  Outcome launch(const LaunchRequest& request, int output_fd, std::string* error);

  // Spare groups still standing (not handed to a task): to remove once the process has
  // left them. An unused process is ended and waited for (`reaped`: the caller has
  // already reaped it).
  std::vector<std::string> release(bool reaped = false);

 private:
  WarmTask(pid_t pid, int fd, std::unique_ptr<WarmChild> child, std::vector<std::string> dirs,
           std::vector<std::string> spares);
  void end_process();

  pid_t pid_;
  int fd_;
  std::unique_ptr<WarmChild> child_;  // what the process reads, and its stack
  bool sharing_ = true;               // the process may still run on memory it shares with this one
  std::vector<std::string> dirs_;
  std::vector<std::string> spares_;  // "" once handed to a task
  bool ready_ = false;
};

}  // namespace ag::worker
