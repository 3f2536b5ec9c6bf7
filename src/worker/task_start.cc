#include "worker/task_start.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "worker/async_command.h"
#include "worker/task_cgroup.h"
#include "worker/task_limits.h"

namespace ag::worker {
namespace {

constexpr long kCgroup2Magic = 0x63677270;
constexpr uint64_t kCloneIntoCgroup = 0x200000000ULL;
#ifdef SYS_clone3
constexpr long kClone3 = SYS_clone3;
#else
constexpr long kClone3 = 435;
#endif

// The kernel's struct clone_args as of Linux 5.7 (which added `cgroup`).
struct CloneArgs {
  uint64_t flags = 0;
  uint64_t pidfd = 0;
  uint64_t child_tid = 0;
  uint64_t parent_tid = 0;
  uint64_t exit_signal = 0;
  uint64_t stack = 0;
  uint64_t stack_size = 0;
  uint64_t tls = 0;
  uint64_t set_tid = 0;
  uint64_t set_tid_size = 0;
  uint64_t cgroup = 0;
};

bool clone3_unavailable = false;  // an older kernel refused it once: not tried again

// The supervisor steps into the task's groups for the spawn (the child inherits them)
// and out again: it must not stay in a task's group.
void enter_groups(const LaunchRequest& request) {
  join_cgroup(request.cgroup.c_str());
  for (const auto& group : request.limit_cgroups) join_cgroup(group.c_str());
}

void leave_groups(const LaunchRequest& request) {
  auto parent = [](const std::string& group) { return group.substr(0, group.rfind('/')); };
  if (!request.cgroup.empty())
    join_cgroup((request.cgroup_home.empty() ? parent(request.cgroup) : request.cgroup_home).c_str());
  for (const auto& group : request.limit_cgroups) join_cgroup(parent(group).c_str());
}

std::string describe_failure(const LaunchRequest& request, const std::string& step, int code) {
  std::string text = "cannot start `/bin/sh -c ...`";
  if (request.run_as) text += " as uid " + std::to_string(request.run_as->uid);
  text += " in " + request.working_dir + ": ";
  if (request.run_as || step == "join its control groups") text += step + ": ";
  return text + std::strerror(code);
}

// fork, or on cgroup v2 clone3 straight into the task's group. The supervisor is small
// and has one thread, so a fork is cheap and its child may do anything before the exec.
pid_t fork_task(const LaunchRequest& request, int output_fd, bool into_cgroup2, std::string* error) {
  const ExecArgs args(request);
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) {
    *error = std::string("cannot start the task: pipe: ") + std::strerror(errno);
    return 0;
  }
  pid_t pid = -1;
  int group_fd = into_cgroup2 ? ::open(request.cgroup.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
  if (group_fd >= 0) {
    CloneArgs clone;
    clone.flags = kCloneIntoCgroup;
    clone.exit_signal = SIGCHLD;
    clone.cgroup = static_cast<uint64_t>(group_fd);
    pid = static_cast<pid_t>(::syscall(kClone3, &clone, sizeof clone));
    if (pid < 0 && (errno == ENOSYS || errno == E2BIG)) clone3_unavailable = true;
  }
  // Else the child joins its groups itself: two moves, where stepping in and out
  // would be four.
  const bool child_joins = pid < 0;
  if (child_joins) pid = ::fork();
  if (pid == 0) {
    ::close(report[0]);
    become_task(request, args, output_fd, report[1], child_joins);
  }
  const int fork_errno = errno;
  if (group_fd >= 0) ::close(group_fd);
  ::close(report[1]);
  if (pid < 0) {
    ::close(report[0]);
    *error = std::string("cannot start the task: fork: ") + std::strerror(fork_errno);
    return 0;
  }
  std::string failure = read_start_failure(report[0], request);
  ::close(report[0]);
  if (!failure.empty()) {
    ::waitpid(pid, nullptr, 0);
    *error = failure;
    return 0;
  }
  return pid;
}

// posix_spawn shares the supervisor's memory until the exec: the cheapest start where
// no account is switched and the supervisor steps into the task's groups for it.
pid_t spawn_task(const LaunchRequest& request, int output_fd, std::string* error) {
  ExecArgs args(request);
  posix_spawnattr_t attr;
  init_clean_spawn(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_USEVFORK);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, output_fd, 1);
  posix_spawn_file_actions_adddup2(&actions, output_fd, 2);
  posix_spawn_file_actions_addchdir_np(&actions, request.working_dir.c_str());
  enter_groups(request);
  pid_t pid = 0;
  int rc = args.argv[0] ? posix_spawn(&pid, args.argv[0], &actions, &attr, args.argv.data(), args.envp.data()) : EINVAL;
  leave_groups(request);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    *error = describe_failure(request, "exec", rc);
    return 0;
  }
  return pid;
}

}  // namespace

ExecArgs::ExecArgs(const LaunchRequest& request) {
  for (const auto& s : request.argv) argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);
  for (const auto& s : request.envp) envp.push_back(const_cast<char*>(s.c_str()));
  envp.push_back(nullptr);
  if (request.run_as) groups.assign(request.run_as->groups.begin(), request.run_as->groups.end());
}

std::string make_task_groups(const LaunchRequest& request) {
  std::vector<std::string> groups{request.cgroup};
  groups.insert(groups.end(), request.limit_cgroups.begin(), request.limit_cgroups.end());
  std::vector<std::string> made;
  auto undo = [&made](std::string why) {
    for (const auto& group : made) ::rmdir(group.c_str());
    return why;
  };
  for (const auto& group : groups) {
    if (group.empty()) continue;
    if (::mkdir(group.c_str(), 0755) == 0)
      made.push_back(group);
    else if (errno != EEXIST)
      return undo("cannot create the task's control group " + group + ": " + std::strerror(errno));
  }
  for (const auto& group : request.limit_cgroups) {
    std::string failed = write_v1_caps(group, request.limits);
    if (!failed.empty()) return undo("cannot apply the task's limits: " + failed);
  }
  return "";
}

bool on_cgroup2(const std::string& path) {
  struct statfs fs {};
  return !path.empty() && ::statfs(path.c_str(), &fs) == 0 && static_cast<long>(fs.f_type) == kCgroup2Magic;
}

pid_t start_task(const LaunchRequest& request, int output_fd, std::string* error) {
  // On v2 every cap is on the task's own group: a child born in it needs no step in.
  // (The agent asks the supervisor to make a task's groups on v1 only.)
  const bool cgroup2 =
      !clone3_unavailable && !request.make_groups && request.limit_cgroups.empty() && on_cgroup2(request.cgroup);
  if (request.run_as || cgroup2) return fork_task(request, output_fd, cgroup2, error);
  return spawn_task(request, output_fd, error);
}

void become_task(const LaunchRequest& request, const ExecArgs& args, int output_fd, int report_fd, bool join_groups) {
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int sig = 1; sig < NSIG; ++sig) ::signal(sig, SIG_DFL);
  ::setpgid(0, 0);
  int devnull = ::open("/dev/null", O_RDONLY);
  if (devnull >= 0 && devnull != 0) {
    ::dup2(devnull, 0);
    ::close(devnull);
  }
  ::dup2(output_fd, 1);
  ::dup2(output_fd, 2);
  const char* step = "exec";
  bool ok = true;
  if (join_groups) {
    step = "join its control groups";
    ok = join_cgroup(request.cgroup.c_str());
    for (const auto& group : request.limit_cgroups) ok = ok && join_cgroup(group.c_str());
  }
  if (ok && request.run_as) {
    const LaunchRequest::RunAs& as = *request.run_as;
    ok = (step = "setgroups", ::setgroups(args.groups.size(), args.groups.data()) == 0) &&
         (step = "setgid", ::setgid(as.gid) == 0) && (step = "setuid", ::setuid(as.uid) == 0);
  }
  if (ok && (step = "chdir", ::chdir(request.working_dir.c_str()) == 0)) {
    step = "exec";
    if (args.argv[0])
      ::execve(args.argv[0], args.argv.data(), args.envp.data());
    else
      errno = EINVAL;
  }
  int code = errno;
  ssize_t ignored = ::write(report_fd, step, std::strlen(step) + 1);
  ignored = ::write(report_fd, &code, sizeof code);
  (void)ignored;
  ::_exit(127);
}

std::string read_start_failure(int report_fd, const LaunchRequest& request) {
  char failure[64] = {0};
  ssize_t n = 0;
  while (static_cast<size_t>(n) < sizeof failure) {  // until the exec closes it, or the report is whole
    ssize_t got = ::read(report_fd, failure + n, sizeof failure - static_cast<size_t>(n));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    n += got;
  }
  if (n <= 0) return "";
  int code = 0;
  const size_t step_len = ::strnlen(failure, sizeof failure);
  if (step_len + 1 + sizeof code <= static_cast<size_t>(n)) std::memcpy(&code, failure + step_len + 1, sizeof code);
  return describe_failure(request, std::string(failure, step_len), code);
}

}  // namespace ag::worker
