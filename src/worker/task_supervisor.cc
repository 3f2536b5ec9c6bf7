#include "worker/task_supervisor.h"

#include "worker/async_command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <grp.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <cctype>
#include <sstream>
#include <set>
#include <fstream>
#include <filesystem>

extern char** environ;

#include "common/descriptors.h"
#include "worker/marked_processes.h"
#include "worker/task_cgroup.h"
#include "worker/task_limits.h"

namespace ag::worker {
namespace {

constexpr int kReplyTimeoutMs = 10000;
constexpr uint32_t kMaxFrameBytes = 64u << 20;

int64_t monotonic_ms() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

bool write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool read_all(int fd, char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::read(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// A frame: 4-byte length, then the payload; `pass_fd` (when >= 0) rides along with
// the length.
bool write_frame(int fd, const std::string& payload, int pass_fd) {
  uint32_t length = static_cast<uint32_t>(payload.size());
  iovec iov{&length, sizeof length};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (pass_fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(cmsg), &pass_fd, sizeof(int));
  }
  ssize_t n;
  do {
    n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return false;
  if (static_cast<size_t>(n) < sizeof length &&
      !write_all(fd, reinterpret_cast<const char*>(&length) + n, sizeof length - static_cast<size_t>(n))) {
    return false;
  }
  return write_all(fd, payload.data(), payload.size());
}

// Reads one frame; `received_fd` gets a descriptor passed with it (or -1). False at
// the end of the stream or on a malformed frame.
bool read_frame(int fd, std::string* payload, int* received_fd) {
  *received_fd = -1;
  uint32_t length = 0;
  iovec iov{&length, sizeof length};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  do {
    n = ::recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return false;
  for (cmsghdr* cmsg = CMSG_FIRSTHDR(&msg); cmsg; cmsg = CMSG_NXTHDR(&msg, cmsg)) {
    if (cmsg->cmsg_level == SOL_SOCKET && cmsg->cmsg_type == SCM_RIGHTS) std::memcpy(received_fd, CMSG_DATA(cmsg), sizeof(int));
  }
  if (static_cast<size_t>(n) < sizeof length &&
      !read_all(fd, reinterpret_cast<char*>(&length) + n, sizeof length - static_cast<size_t>(n))) {
    if (*received_fd >= 0) ::close(*received_fd);
    *received_fd = -1;
    return false;
  }
  payload->resize(length <= kMaxFrameBytes ? length : 0);
  if (length > kMaxFrameBytes || !read_all(fd, payload->data(), length)) {
    if (*received_fd >= 0) ::close(*received_fd);
    *received_fd = -1;
    return false;
  }
  return true;
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

// A task the supervisor started and has not seen end.
struct Supervised {
  std::string task_dir;
  std::string cgroup;
  std::vector<std::string> limit_cgroups;
  std::string memory_cgroup;
  std::vector<std::string> cleanup_argv;
  std::string marker;
  int64_t orphan_timeout_ms = 10000;
  int64_t term_sent_ms = 0;  // when the orphaned task was sent SIGTERM
};

// A task that ended while processes it left were still dying: its end is recorded
// once they are gone (their output is then whole, their GPUs free), or at the deadline.
struct Ending {
  Supervised task;
  std::string record;
  int64_t deadline_ms = 0;
};

constexpr int64_t kLeftoverWaitMs = 2000;

void kill_everything(pid_t task_pgid, const Supervised& task, int sig) {
  ::kill(-task_pgid, sig);
  // The control group holds every descendant; without one, the marker scan of /proc
  // (the costly part) finds those that left the process group. Never the supervisor
  // itself, should it have failed to leave a task's group.
  std::vector<int> pids = task.cgroup.empty() ? find_marked_processes(task.marker) : cgroup_pids(task.cgroup);
  for (int pid : pids) {
    if (pid != ::getpid()) ::kill(pid, sig);
  }
}

// The supervisor's children: its tasks, and orphans of their processes (it is their
// subreaper). Read from /proc/<pid>/task/<pid>/children (the supervisor has one
// thread), or by a scan of /proc where the kernel lacks that file.
std::vector<int> own_children() {
  std::vector<int> out;
  const std::string self = std::to_string(::getpid());
  std::ifstream children("/proc/" + self + "/task/" + self + "/children");
  if (children) {
    for (int pid = 0; children >> pid;) out.push_back(pid);
    return out;
  }
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    size_t close = text.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(text.substr(close + 1));
    std::string state;
    int ppid = 0;
    if (rest >> state >> ppid && ppid == ::getpid()) out.push_back(std::stoi(name));
  }
  return out;
}

// True once no process of the task is left (its group is empty, or no process carries
// its marker).
bool all_gone(const Supervised& task) {
  if (!task.cgroup.empty()) {
    auto pids = cgroup_pids(task.cgroup);
    return pids.empty() || (pids.size() == 1 && pids[0] == ::getpid());
  }
  return find_marked_processes(task.marker).empty();
}

// The supervisor steps into the task's groups for the spawn (the child inherits them)
// and out again: it must not stay in a task's group.
void enter_groups(const LaunchRequest& request) {
  join_cgroup(request.cgroup.c_str());
  for (const auto& group : request.limit_cgroups) join_cgroup(group.c_str());
}

void leave_groups(const LaunchRequest& request) {
  auto parent = [](const std::string& group) { return group.substr(0, group.rfind('/')); };
  if (!request.cgroup.empty()) join_cgroup((request.cgroup_home.empty() ? parent(request.cgroup) : request.cgroup_home).c_str());
  for (const auto& group : request.limit_cgroups) join_cgroup(parent(group).c_str());
}

// Starts the task with posix_spawn (which shares this process's memory until the
// exec): in its own process group, with default signals, the output file as stdout
// and stderr, in its working dir, and inside its control group (the supervisor steps
// into the group for the spawn and out again). Returns the pid, or 0 with `error` set.
// A task that runs as another account: fork (the supervisor is small and has one
// thread), then in the child the same set-up as posix_spawn's plus the switch to the
// task's groups and user before the exec. An exec that fails is reported through a
// close-on-exec pipe. Returns the pid, or 0 with `error` set.
pid_t start_task_as(const LaunchRequest& request, int output_fd, std::string* error) {
  std::vector<char*> argv, envp;
  for (const auto& s : request.argv) argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);
  for (const auto& s : request.envp) envp.push_back(const_cast<char*>(s.c_str()));
  envp.push_back(nullptr);
  const LaunchRequest::RunAs& as = *request.run_as;
  std::vector<gid_t> groups(as.groups.begin(), as.groups.end());
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) {
    *error = std::string("cannot start the task: pipe: ") + std::strerror(errno);
    return 0;
  }
  enter_groups(request);
  pid_t pid = ::fork();
  if (pid == 0) {
    // The child: only async-signal-safe calls from here to the exec.
    ::close(report[0]);
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
    const char* step = "setgroups";
    if (::setgroups(groups.size(), groups.data()) == 0 && (step = "setgid", ::setgid(as.gid) == 0) &&
        (step = "setuid", ::setuid(as.uid) == 0) && (step = "chdir", ::chdir(request.working_dir.c_str()) == 0)) {
      step = "exec";
      ::execve(argv[0], argv.data(), envp.data());
    }
    int code = errno;
    ssize_t ignored = ::write(report[1], step, std::strlen(step) + 1);
    ignored = ::write(report[1], &code, sizeof code);
    (void)ignored;
    ::_exit(127);
  }
  int fork_errno = errno;
  ::close(report[1]);
  leave_groups(request);
  if (pid < 0) {
    ::close(report[0]);
    *error = std::string("cannot start the task: fork: ") + std::strerror(fork_errno);
    return 0;
  }
  char failure[64] = {0};
  ssize_t n = 0;
  for (;;) {  // until the exec closes the pipe, or the child's report is whole
    ssize_t got = ::read(report[0], failure + n, sizeof failure - static_cast<size_t>(n));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    n += got;
  }
  ::close(report[0]);
  if (n > 0) {
    int code = 0;
    size_t step_len = ::strnlen(failure, sizeof failure);
    if (step_len + 1 + sizeof code <= static_cast<size_t>(n)) std::memcpy(&code, failure + step_len + 1, sizeof code);
    ::waitpid(pid, nullptr, 0);
    *error = "cannot start `/bin/sh -c ...` as uid " + std::to_string(as.uid) + " in " + request.working_dir + ": " +
             std::string(failure, step_len) + ": " + std::strerror(code);
    return 0;
  }
  return pid;
}

pid_t start_task(const LaunchRequest& request, int output_fd, std::string* error) {
  if (request.run_as) return start_task_as(request, output_fd, error);
  std::vector<char*> argv, envp;
  for (const auto& s : request.argv) argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);
  for (const auto& s : request.envp) envp.push_back(const_cast<char*>(s.c_str()));
  envp.push_back(nullptr);
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
  int rc = argv[0] ? posix_spawn(&pid, argv[0], &actions, &attr, argv.data(), envp.data()) : EINVAL;
  leave_groups(request);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    *error = "cannot start `/bin/sh -c ...` in " + request.working_dir + ": " + std::strerror(rc);
    return 0;
  }
  return pid;
}

class Supervisor {
 public:
  Supervisor(int agent_fd, std::string agent_pid_file)
      : agent_fd_(agent_fd), agent_pid_file_(std::move(agent_pid_file)) {}

  [[noreturn]] void run() {
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    ::sigprocmask(SIG_BLOCK, &chld, nullptr);
    int signal_fd = ::signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
    int64_t last_check = monotonic_ms();
    for (;;) {
      pollfd fds[2] = {{signal_fd, POLLIN, 0}, {agent_fd_, POLLIN, 0}};
      ::poll(fds, agent_fd_ >= 0 ? 2 : 1, endings_.empty() ? 1000 : 10);
      if (fds[0].revents & POLLIN) {
        signalfd_siginfo info;
        while (::read(signal_fd, &info, sizeof info) > 0) {
        }
      }
      reap();
      // While tasks end (their leftovers being killed), and once a second below.
      if (!endings_.empty()) kill_escaped();
      finish_endings();
      if (agent_fd_ >= 0 && (fds[1].revents & (POLLIN | POLLHUP | POLLERR))) take_request();
      int64_t now = monotonic_ms();
      if (now - last_check >= 1000) {
        last_check = now;
        check_orphaned(now);
        kill_escaped();
        retry_cgroup_removal();
      }
      if (agent_fd_ < 0 && tasks_.empty() && endings_.empty()) {
        retry_cgroup_removal();
        ::_exit(0);
      }
    }
  }

 private:
  void take_request() {
    std::string payload;
    int output_fd = -1;
    if (!read_frame(agent_fd_, &payload, &output_fd)) {
      // The agent is gone (or restarting): the tasks go on; see check_orphaned.
      ::close(agent_fd_);
      agent_fd_ = -1;
      return;
    }
    std::string reply;
    auto request = decode_launch(payload);
    if (!request || output_fd < 0) {
      reply = "error the supervisor got a malformed launch request";
    } else {
      std::string error;
      pid_t pid = start_task(*request, output_fd, &error);
      if (pid > 0) {
        tasks_[pid] = {request->task_dir, request->cgroup,       request->limit_cgroups,
                       request->memory_cgroup, request->cleanup_argv, request->marker,
                       request->orphan_timeout_ms, 0};
        reply = "pid " + std::to_string(pid);
      } else {
        reply = "error " + error;
      }
    }
    if (output_fd >= 0) ::close(output_fd);
    if (!write_frame(agent_fd_, reply, -1)) {
      ::close(agent_fd_);
      agent_fd_ = -1;
    }
  }

  void reap() {
    int status = 0;
    pid_t pid;
    while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
      cleanups_.erase(pid);
      auto it = tasks_.find(pid);
      if (it == tasks_.end()) continue;  // an orphan handed to us, or a cleanup: reaped, nothing else
      Supervised task = std::move(it->second);
      tasks_.erase(it);
      // Whatever the task left behind dies with it, then the end is recorded.
      kill_everything(pid, task, SIGKILL);
      // "oom": the kernel's OOM killer ended one of its processes (the task itself, or
      // one whose end made it fail).
      const bool killed = (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) ||
                          (WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGKILL);
      const char* oom = ran_out_of_memory(task.memory_cgroup, killed) ? " oom" : "";
      char record[64];
      if (WIFSIGNALED(status)) {
        std::snprintf(record, sizeof record, "signal %d%s\n", WTERMSIG(status), oom);
      } else {
        std::snprintf(record, sizeof record, "exit %d%s\n", WEXITSTATUS(status), oom);
      }
      // The cleanup learns how the task ended (its exit code, or "signal").
      if (!task.cleanup_argv.empty()) {
        std::vector<std::string> argv = task.cleanup_argv;
        argv.push_back("cleanup");
        argv.push_back(WIFEXITED(status) ? std::to_string(WEXITSTATUS(status)) : "signal");
        run_cleanup(argv);
      }
      endings_.push_back({std::move(task), record, monotonic_ms() + kLeftoverWaitMs});
    }
  }

  // Starts the task's cleanup command and leaves it; reap() collects it, and
  // kill_escaped() knows it is no escaped task process.
  void run_cleanup(const std::vector<std::string>& argv) {
    if (argv.empty()) return;
    std::vector<char*> args;
    args.reserve(argv.size() + 1);
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid = 0;
    if (posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ) == 0) cleanups_.insert(pid);
    posix_spawn_file_actions_destroy(&actions);
  }

  // A process that left its task's control group, process group and marker is still
  // the supervisor's descendant: once the task processes above it are gone it is
  // handed to the supervisor (the subreaper). A child that is no task of its own and
  // is in no live task's group escaped its task: it is killed, and so in turn are its
  // own children once handed over.
  void kill_escaped() {
    // Only where every task has a group: without one, a process is known by its
    // marker, and one whose environment cannot be read (set non-dumpable, or rewritten
    // by setproctitle) would look like an escaped one.
    for (const auto& [_, task] : tasks_) {
      if (task.cgroup.empty()) return;
    }
    for (const auto& ending : endings_) {
      if (ending.task.cgroup.empty()) return;
    }
    std::vector<int> orphans;
    for (int pid : own_children()) {
      if (!tasks_.count(pid) && !cleanups_.count(pid)) orphans.push_back(pid);
    }
    if (orphans.empty()) return;
    std::set<int> held;
    auto hold = [&](const Supervised& task) {
      for (int pid : cgroup_pids(task.cgroup)) held.insert(pid);
    };
    for (const auto& [_, task] : tasks_) hold(task);
    for (const auto& ending : endings_) hold(ending.task);
    for (int pid : orphans) {
      if (held.count(pid)) continue;
      std::fprintf(stderr, "ag-supervisor: killing pid %d: it left its task's control group\n", pid);
      ::kill(pid, SIGKILL);
    }
  }

  // Records the ends of tasks whose processes are all gone (the common case: at once).
  void finish_endings() {
    int64_t now = monotonic_ms();
    std::vector<Ending> waiting;
    for (auto& ending : endings_) {
      if (!all_gone(ending.task) && now < ending.deadline_ms) {
        waiting.push_back(std::move(ending));
        continue;
      }
      // The end first: removing groups waits on a lock the kernel holds for every
      // group of the machine, slow while many tasks end at once. A group whose last
      // processes are still being torn down goes a little later.
      write_exit_record(ending.task.task_dir, ending.record.c_str());
      std::vector<std::string> groups = ending.task.limit_cgroups;
      groups.push_back(ending.task.cgroup);
      for (const auto& group : groups) {
        if (!remove_cgroup(group)) leftover_cgroups_.push_back(group);
      }
    }
    endings_ = std::move(waiting);
  }

  // An agent that is gone for longer than a task's orphan timeout (the node timeout)
  // is not coming back for it: the head has given the task up, so it must not hold
  // its GPUs any longer. SIGTERM, then SIGKILL 5 s later.
  void check_orphaned(int64_t now) {
    if (agent_fd_ >= 0 || agent_alive(agent_pid_file_)) {
      orphaned_since_ = 0;
      for (auto& [_, task] : tasks_) task.term_sent_ms = 0;
      return;
    }
    if (orphaned_since_ == 0) orphaned_since_ = now;
    for (auto& [pid, task] : tasks_) {
      if (task.term_sent_ms == 0 && now - orphaned_since_ > task.orphan_timeout_ms) {
        kill_everything(pid, task, SIGTERM);
        task.term_sent_ms = now;
      } else if (task.term_sent_ms != 0 && now - task.term_sent_ms > 5000) {
        kill_everything(pid, task, SIGKILL);
      }
    }
  }

  void retry_cgroup_removal() {
    std::vector<std::string> still;
    for (const auto& group : leftover_cgroups_) {
      if (!remove_cgroup(group) && errno == EBUSY) still.push_back(group);
    }
    leftover_cgroups_ = std::move(still);
  }

  int agent_fd_;
  std::string agent_pid_file_;
  std::map<pid_t, Supervised> tasks_;
  std::vector<std::string> leftover_cgroups_;
  std::set<pid_t> cleanups_;  // cleanup commands still running
  std::vector<Ending> endings_;
  int64_t orphaned_since_ = 0;
};

}  // namespace

bool has_nul(const LaunchRequest& request) {
  auto nul = [](const std::string& s) { return s.find('\0') != std::string::npos; };
  if (nul(request.task_dir) || nul(request.working_dir) || nul(request.cgroup) || nul(request.marker) ||
      nul(request.cgroup_home) || nul(request.memory_cgroup)) {
    return true;
  }
  for (const auto& s : request.limit_cgroups) {
    if (nul(s)) return true;
  }
  for (const auto& s : request.cleanup_argv) {
    if (nul(s)) return true;
  }
  for (const auto& s : request.argv) {
    if (nul(s)) return true;
  }
  for (const auto& s : request.envp) {
    if (nul(s)) return true;
  }
  return false;
}

std::string encode_launch(const LaunchRequest& request) {
  std::string out;
  auto field = [&out](const std::string& value) {
    out += value;
    out.push_back('\0');
  };
  field("launch");
  field(request.task_dir);
  field(request.working_dir);
  field(request.cgroup);
  field(request.marker);
  field(std::to_string(request.orphan_timeout_ms));
  // "uid gid group..." or "" for the supervisor's own account.
  std::string run_as;
  if (request.run_as) {
    run_as = std::to_string(request.run_as->uid) + " " + std::to_string(request.run_as->gid);
    for (uint32_t g : request.run_as->groups) run_as += " " + std::to_string(g);
  }
  field(run_as);
  field(request.cgroup_home);
  field(request.memory_cgroup);
  field(std::to_string(request.limit_cgroups.size()));
  for (const auto& group : request.limit_cgroups) field(group);
  field(std::to_string(request.cleanup_argv.size()));
  for (const auto& arg : request.cleanup_argv) field(arg);
  field(std::to_string(request.argv.size()));
  for (const auto& arg : request.argv) field(arg);
  for (const auto& var : request.envp) field(var);
  return out;
}

std::optional<LaunchRequest> decode_launch(std::string_view bytes) {
  std::vector<std::string> fields;
  while (!bytes.empty()) {
    size_t end = bytes.find('\0');
    if (end == std::string_view::npos) return std::nullopt;  // every field ends with NUL
    fields.emplace_back(bytes.substr(0, end));
    bytes.remove_prefix(end + 1);
  }
  if (fields.size() < 12 || fields[0] != "launch") return std::nullopt;
  LaunchRequest request;
  request.task_dir = fields[1];
  request.working_dir = fields[2];
  request.cgroup = fields[3];
  request.marker = fields[4];
  char* end = nullptr;
  request.orphan_timeout_ms = std::strtoll(fields[5].c_str(), &end, 10);
  if (fields[5].empty() || *end) return std::nullopt;
  if (!fields[6].empty()) {
    std::vector<uint32_t> ids;
    const char* p = fields[6].c_str();
    while (*p) {
      unsigned long id = std::strtoul(p, &end, 10);
      if (end == p || id > UINT32_MAX || (*end != ' ' && *end != '\0')) return std::nullopt;
      ids.push_back(static_cast<uint32_t>(id));
      p = *end ? end + 1 : end;
    }
    if (ids.size() < 2 || ids[0] == 0) return std::nullopt;  // never "run as root"
    request.run_as = LaunchRequest::RunAs{ids[0], ids[1], {ids.begin() + 2, ids.end()}};
  }
  request.cgroup_home = fields[7];
  request.memory_cgroup = fields[8];
  size_t next = 9;
  // A count, then that many fields.
  auto counted = [&](std::vector<std::string>* out) {
    if (next >= fields.size()) return false;
    size_t count = std::strtoull(fields[next].c_str(), &end, 10);
    if (fields[next].empty() || *end || count > fields.size() - next - 1) return false;
    auto first = fields.begin() + static_cast<std::ptrdiff_t>(next + 1);
    out->assign(first, first + static_cast<std::ptrdiff_t>(count));
    next += 1 + count;
    return true;
  };
  if (!counted(&request.limit_cgroups) || !counted(&request.cleanup_argv) || !counted(&request.argv)) {
    return std::nullopt;
  }
  request.envp.assign(fields.begin() + static_cast<std::ptrdiff_t>(next), fields.end());
  return request;
}

void run_supervisor(int agent_fd, const std::string& agent_pid_file) {
  close_descriptors_from(static_cast<unsigned>(agent_fd) + 1, /*cloexec=*/false);  // nothing inherited by mistake
  // The channel to the agent must never reach a task: with it a task could ask for
  // launches of its own (as this supervisor's user).
  ::fcntl(agent_fd, F_SETFD, FD_CLOEXEC);
  ::setsid();
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  ::prctl(PR_SET_NAME, "ag-supervisor");  // what ps and top show for it
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGPIPE}) ::signal(sig, SIG_IGN);
  Supervisor(agent_fd, agent_pid_file).run();
}

SupervisorClient::~SupervisorClient() {
  // The supervisor stays: it goes on with the running tasks after this agent ends.
  if (fd_ >= 0) ::close(fd_);
}

Status SupervisorClient::start(const std::string& agent_pid_file) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return internal_error(std::string("cannot start the task supervisor: socketpair: ") + std::strerror(errno));
  }
  // A fresh process of this same executable (not a fork of this multi-threaded one),
  // with its end of the socket as descriptor 3 and nothing else of the agent's.
  int child_end = ::fcntl(fds[1], F_DUPFD_CLOEXEC, 10);
  ::close(fds[1]);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, child_end, 3);
  std::string name = "ag", mode = kSupervisorCommand;
  std::string pid_file = agent_pid_file;
  char* argv[] = {name.data(), mode.data(), pid_file.data(), nullptr};
  pid_t pid = 0;
  int rc = posix_spawn(&pid, executable_.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(child_end);
  if (rc != 0) {
    ::close(fds[0]);
    return internal_error(std::string("cannot start the task supervisor: ") + std::strerror(rc));
  }
  fd_ = fds[0];
  pid_ = pid;
  return {};
}

void SupervisorClient::drop() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool SupervisorClient::on_reaped(pid_t pid) {
  if (pid_ == 0 || pid != pid_) return false;
  drop();
  pid_ = 0;
  return true;
}

Result<int64_t> SupervisorClient::launch(const LaunchRequest& request, int output_fd,
                                         const std::string& agent_pid_file) {
  if (has_nul(request)) return invalid_argument("the task's command line or environment holds a NUL byte");
  std::string payload = encode_launch(request);
  for (int attempt = 0;; ++attempt) {
    if (fd_ < 0) {
      if (Status s = start(agent_pid_file); !s) return s.error();
    }
    if (write_frame(fd_, payload, output_fd)) break;
    // The supervisor died since the last launch: once more with a new one.
    drop();
    if (attempt > 0) return internal_error("the task supervisor does not take launch requests");
  }
  pollfd pfd{fd_, POLLIN, 0};
  int ready;
  do {
    ready = ::poll(&pfd, 1, kReplyTimeoutMs);
  } while (ready < 0 && errno == EINTR);
  std::string reply;
  int unused_fd = -1;
  if (ready <= 0 || !read_frame(fd_, &reply, &unused_fd)) {
    // A supervisor that does not answer is no longer trusted to start or record
    // anything: it is killed (the agent ends its tasks once it reaps it) and the next
    // launch starts a new one.
    if (pid_ > 0) ::kill(pid_, SIGKILL);
    drop();
    return internal_error("the task supervisor did not answer the launch request");
  }
  if (reply.rfind("pid ", 0) == 0) return static_cast<int64_t>(std::atoll(reply.c_str() + 4));
  return internal_error(reply.rfind("error ", 0) == 0 ? reply.substr(6) : reply);
}

}  // namespace ag::worker
