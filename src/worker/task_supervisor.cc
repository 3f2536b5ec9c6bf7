#include "worker/task_supervisor.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "worker/task_cgroup.h"
#include "worker/task_runner.h"

namespace ag::worker {
namespace {

int64_t monotonic_ms() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

// True when the pid in `pid_file` is a live `ag start-worker` process.
bool agent_alive(const std::string& pid_file) {
  char buf[64] = {0};
  int fd = ::open(pid_file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return false;
  long pid = std::strtol(buf, nullptr, 10);
  if (pid <= 0 || ::kill(static_cast<pid_t>(pid), 0) != 0) return false;
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%ld/cmdline", pid);
  char cmdline[4096] = {0};
  fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  n = ::read(fd, cmdline, sizeof cmdline - 1);
  ::close(fd);
  for (ssize_t i = 0; i < n; ++i) {
    if (cmdline[i] == '\0') cmdline[i] = ' ';
  }
  return n > 0 && std::strstr(cmdline, "start-worker") != nullptr;
}

void write_exit_record(const std::string& dir, const char* text) {
  // One write of a few bytes, then close: the close is what the agent watches for, so
  // it never sees a partial record.
  int fd = ::open((dir + "/exit").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  ssize_t ignored = ::write(fd, text, std::strlen(text));
  (void)ignored;
  ::close(fd);
}

void kill_everything(pid_t task_pgid, const SupervisorArgs& args, int sig) {
  ::kill(-task_pgid, sig);
  // The control group holds every descendant; without one, the marker scan of /proc
  // (the costly part) finds those that left the process group.
  if (!args.cgroup.empty()) {
    for (int pid : cgroup_pids(args.cgroup)) ::kill(pid, sig);
  } else {
    for (int pid : find_marked_processes(args.marker)) ::kill(pid, sig);
  }
}

// Starts the task with posix_spawn, which shares this process's memory until the exec
// instead of copying it (a fork of the agent's image per task was most of the cost of
// a short task). The task is born in its own process group, with default signals, its
// output file as stdout and stderr, in its working dir, and inside its control group:
// the supervisor steps into the group for the spawn and out again. Returns the pid, or
// 0 with `error` set.
pid_t start_task(const SupervisorArgs& args, std::string* error) {
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
                                      POSIX_SPAWN_USEVFORK);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, args.output_fd, 1);
  posix_spawn_file_actions_adddup2(&actions, args.output_fd, 2);
  posix_spawn_file_actions_addchdir_np(&actions, args.working_dir.c_str());
  join_cgroup(args.cgroup.c_str());
  pid_t pid = 0;
  int rc = posix_spawn(&pid, args.argv[0], &actions, &attr, args.argv.data(),
                       const_cast<char* const*>(args.envp.data()));
  if (!args.cgroup.empty()) {
    // Back to the node's group: the supervisor must not die with its task's group.
    std::string parent = args.cgroup.substr(0, args.cgroup.rfind('/'));
    join_cgroup(parent.c_str());
  }
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    *error = "cannot start `/bin/sh -c ...` in " + args.working_dir + ": " + std::strerror(rc);
    return 0;
  }
  return pid;
}

}  // namespace

void run_supervisor(const SupervisorArgs& args) {
  ::setsid();
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  // SIGCHLD is taken with sigtimedwait, which also paces the liveness checks.
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &chld, nullptr);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGPIPE}) ::signal(sig, SIG_IGN);

  std::string error;
  pid_t task = start_task(args, &error);
  if (task <= 0) {
    ssize_t ignored = ::write(args.error_fd, error.data(), error.size());
    (void)ignored;
  }
  ::close(args.error_fd);
  ::close(args.output_fd);
  char line[32];
  int len = std::snprintf(line, sizeof line, "%d\n", task <= 0 ? -1 : static_cast<int>(task));
  ssize_t ignored = ::write(args.report_fd, line, static_cast<size_t>(len));
  (void)ignored;
  ::close(args.report_fd);
  if (task <= 0) ::_exit(1);

  int64_t orphaned_since = 0;
  bool killing = false;
  int64_t kill_sent_ms = 0;
  for (;;) {
    timespec wait{1, 0};
    siginfo_t info;
    ::sigtimedwait(&chld, &info, &wait);
    int status = 0;
    pid_t pid;
    while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
      if (pid != task) continue;  // an orphan handed to us: reaped, nothing else
      // Whatever the task left behind dies with it, then the end is recorded.
      kill_everything(task, args, SIGKILL);
      char record[64];
      if (WIFSIGNALED(status)) {
        std::snprintf(record, sizeof record, "signal %d\n", WTERMSIG(status));
      } else {
        std::snprintf(record, sizeof record, "exit %d\n", WEXITSTATUS(status));
      }
      // Reap the orphans the kill just made, so none is left a zombie.
      for (int i = 0; i < 50 && ::waitpid(-1, nullptr, WNOHANG) >= 0; ++i) {
        timespec pause{0, 2000000};
        ::nanosleep(&pause, nullptr);
      }
      remove_cgroup(args.cgroup);
      write_exit_record(args.task_dir, record);
      ::_exit(0);
    }
    // An agent that is gone for longer than the node timeout is not coming back for
    // this task: the head has given it up, so it must not hold its GPUs any longer.
    int64_t now = monotonic_ms();
    if (agent_alive(args.agent_pid_file)) {
      orphaned_since = 0;
    } else if (orphaned_since == 0) {
      orphaned_since = now;
    } else if (!killing && now - orphaned_since > args.orphan_timeout_ms) {
      kill_everything(task, args, SIGTERM);
      killing = true;
      kill_sent_ms = now;
    } else if (killing && now - kill_sent_ms > 5000) {
      kill_everything(task, args, SIGKILL);
    }
  }
}

}  // namespace ag::worker
