// How the task supervisor makes a task's first process: in its own process group, with
// every signal at its default, stdin from /dev/null, stdout and stderr into the task's
// output file, in its working dir, as its account, and inside its control groups.
//
//   start_task      a child sharing the supervisor's memory until its exec (clone with
//                   CLONE_VM | CLONE_VFORK: no page tables copied), which joins its
//                   groups itself; or on cgroup v2 clone3 with CLONE_INTO_CGROUP (the
//                   child is born in its group)
//   become_task     the child's half: the set-up, then the exec
//
// A process that changes group waits for the kernel (an RCU grace period, ~8 ms on an
// idle machine); a process born in its group does not. worker/warm_task.h avoids the
// wait on v1 too.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "worker/cgroup_pool.h"
#include "worker/task_supervisor.h"

namespace ag::worker {

// Starts the task; returns its pid, or 0 with `error` set (the step that failed and
// why).
pid_t start_task(const LaunchRequest& request, int output_fd, std::string* error);

// The request's argv and envp as exec wants them (pointers into `request`), and for an
// entrypoint the shell would only exec (worker/simple_command.h) that exec's own: its
// words, where to look for the program, and the environment with PWD as the shell
// would have set it. Made before the child starts: the child allocates nothing.
struct ExecArgs {
  explicit ExecArgs(const LaunchRequest& request);
  ExecArgs(const ExecArgs&) = delete;
  ExecArgs& operator=(const ExecArgs&) = delete;
  std::vector<char*> argv;
  std::vector<char*> envp;
  std::vector<gid_t> groups;            // the account's supplementary groups
  std::vector<std::string> words;       // empty: the request's argv only
  std::vector<std::string> candidates;  // the program on PATH, in the shell's order
  std::string pwd;                      // "PWD=<working dir>"
  std::vector<char*> direct_argv;
  std::vector<char*> direct_envp;
  // The signals whose disposition here is not the default (a handler, or ignored): what
  // the task must have reset before it runs (bit n-1: signal n). All of them where that
  // cannot be read. Read once per process (as the first launch finds them).
  uint64_t reset_signals;
  // The supervisor runs as a daemon (common/scheduling.h): the task gets SCHED_OTHER.
  bool reset_policy;
};

// The signals whose disposition in this process is not the default, read now (bit n-1:
// signal n, glibc's internal 32 and 33 included).
uint64_t signals_not_at_default();

// Blocks every signal in this thread, glibc's two internal ones (32 and 33) included,
// which its sigprocmask leaves out: a child that shares this process's memory must run
// none of its handlers. Returns the mask before, for restore_signal_mask.
uint64_t block_every_signal();
void restore_signal_mask(uint64_t mask);

// The stack of a child that shares this process's memory: `size` bytes above a guard
// page, so that a child that overflows it faults instead of writing over the
// supervisor's memory. Mapped by map(), which a failure leaves to be tried again.
class ChildStack {
 public:
  explicit ChildStack(size_t size) : size_(size) {}
  ~ChildStack();
  ChildStack(const ChildStack&) = delete;
  ChildStack& operator=(const ChildStack&) = delete;
  // True once mapped; else false with `error` set.
  bool map(std::string* error);
  // Where the child's stack begins (it grows down, towards the guard page).
  char* top() const { return base_ ? base_ + guard_ + size_ : nullptr; }

 private:
  size_t size_;
  size_t guard_ = 0;
  char* base_ = nullptr;
};

// Where the child tells why it could not start the task: a pipe (`fd`, close-on-exec:
// the exec closes it without a word), or, with no fd, memory it shares with the
// supervisor (`step` and `code`, still 0 after an exec).
struct StartReport {
  int fd = -1;
  char step[32] = {};
  int code = 0;
  // The step that failed and errno: a step's name and a NUL, then the int, to the
  // pipe; else into step and code.
  void fail(const char* step, int error);
};

// In a child of the (single-threaded) supervisor, a copy of it or one sharing its
// memory: the task's set-up (its groups first, with `join_groups`) and exec. A failure
// is reported to `report`, then the child exits 127. Allocates nothing.
[[noreturn]] void become_task(const LaunchRequest& request, const ExecArgs& args, int output_fd, StartReport& report,
                              bool join_groups = false);

// Reads what become_task reported to a pipe until it closes: "" when the exec
// happened, else why the task could not start.
std::string read_start_failure(int report_fd, const LaunchRequest& request);

// Makes the task's groups (its tracking group and v1 limit groups; those there already
// stay; from `pool`'s kept groups where it has some) and writes its caps on the limit
// groups. Returns "" or why not, having removed what it made.
std::string make_task_groups(const LaunchRequest& request, CgroupPool* pool = nullptr);

// True when `path` is on a cgroup v2 file system.
bool on_cgroup2(const std::string& path);

}  // namespace ag::worker
