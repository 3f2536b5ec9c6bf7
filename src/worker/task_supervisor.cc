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

#include <algorithm>
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
#include "worker/fd_frames.h"
#include "worker/task_start.h"
#include "worker/warm_task.h"
#include "worker/marked_processes.h"
#include "worker/task_cgroup.h"
#include "worker/task_limits.h"

namespace ag::worker {
namespace {

constexpr int kReplyTimeoutMs = 10000;
// A ready-made process (worker/warm_task.h) is made once no launch has come for this
// long. Launches that come closer together start afresh: the kernel lets a process
// change group at once while such moves follow each other closely, and a ready-made
// process per task would cost more than it saves.
constexpr int64_t kWarmIdleMs = 10;
// How long a launch waits for the ready-made process to sit in its groups.
constexpr int kWarmWaitMs = 20;

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

// Records a task's end in its folder: written whole to `exit.tmp`, then renamed to
// `exit` (what the agent watches for), so that no reader ever sees part of one. False
// when it could not be (a full disk, say), leaving no `exit`: the caller tries again.
bool write_exit_record(const std::string& dir, const std::string& text) {
  const std::string temporary = dir + "/exit.tmp";
  int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const bool closed = ::close(fd) == 0;
  if (written && closed && ::rename(temporary.c_str(), (dir + "/exit").c_str()) == 0) return true;
  const int error = errno;
  ::unlink(temporary.c_str());
  errno = error;
  return false;
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
  // Its groups may be kept for the next task once it has ended (worker/cgroup_pool.h):
  // the supervisor made them, and the task ran as an account that cannot touch them.
  bool groups_kept = false;
  std::string caps;  // v1_caps_key of its limits: what its limit groups have
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
  // The control group holds every descendant; without one, the marker scan of /proc
  // (the costly part) finds those that left the process group. Never the supervisor
  // itself, should it have failed to leave a task's group.
  signal_task_processes(task_pgid, task.cgroup.empty() ? find_marked_processes(task.marker) : cgroup_pids(task.cgroup),
                        sig);
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

class Supervisor {
 public:
  Supervisor(int agent_fd, std::string agent_pid_file)
      : agent_fd_(agent_fd), agent_pid_file_(std::move(agent_pid_file)) {}

  [[noreturn]] void run() {
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    ::sigprocmask(SIG_BLOCK, &chld, nullptr);
    signal_fd_ = ::signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
    int64_t last_check = monotonic_ms();
    for (;;) {
      pollfd fds[2] = {{signal_fd_, POLLIN, 0}, {agent_fd_, POLLIN, 0}};
      int64_t timeout_ms = endings_.empty() ? 1000 : 10;
      if (warm_due_ms_ > 0) timeout_ms = std::clamp<int64_t>(warm_due_ms_ - monotonic_ms(), 0, timeout_ms);
      ::poll(fds, agent_fd_ >= 0 ? 2 : 1, static_cast<int>(timeout_ms));
      if (fds[0].revents & POLLIN) {
        signalfd_siginfo info;
        while (::read(signal_fd_, &info, sizeof info) > 0) {
        }
      }
      reap();
      // While tasks end (their leftovers being killed), and once a second below.
      if (!endings_.empty()) kill_escaped();
      finish_endings();
      if (agent_fd_ >= 0 && (fds[1].revents & (POLLIN | POLLHUP | POLLERR))) take_request();
      int64_t now = monotonic_ms();
      if (warm_due_ms_ > 0 && now >= warm_due_ms_) {
        warm_due_ms_ = 0;
        prepare_warm();
      }
      if (now - last_check >= 1000) {
        last_check = now;
        check_orphaned(now);
        kill_escaped();
        retry_cgroup_removal();
        record_unrecorded();
      }
      // An end not yet recorded is known here alone: kept until it is.
      if (agent_fd_ < 0 && tasks_.empty() && endings_.empty() && unrecorded_.empty()) {
        retire_warm();
        for (pid_t helper : helpers_) ::waitpid(helper, nullptr, 0);  // cleanups still running
        retry_cgroup_removal();
        groups_.clear();
        ::_exit(0);
      }
    }
  }

 private:
  void take_request() {
    std::string payload;
    int output_fd = -1;
    if (!read_frame(agent_fd_, &payload, &output_fd)) {
      // The agent is gone (or restarting): the tasks go on; see check_orphaned. No
      // more launches come.
      ::close(agent_fd_);
      agent_fd_ = -1;
      retire_warm();
      return;
    }
    std::string reply;
    auto request = decode_launch(payload);
    if (!request || output_fd < 0) {
      reply = "error the supervisor got a malformed launch request";
    } else {
      std::string error;
      pid_t pid = start(*request, output_fd, &error);
      if (pid > 0) {
        const bool groups_kept =
            request->make_groups && request->run_as && request->run_as->uid != 0 && ::geteuid() == 0;
        tasks_[pid] = {request->task_dir,
                       request->cgroup,
                       request->limit_cgroups,
                       request->memory_cgroup,
                       request->cleanup_argv,
                       request->marker,
                       request->orphan_timeout_ms,
                       0,
                       groups_kept,
                       v1_caps_key(request->limits)};
        reply = "pid " + std::to_string(pid);
      } else {
        reply = "error " + error;
      }
    }
    if (output_fd >= 0) ::close(output_fd);
    if (!write_frame(agent_fd_, reply, -1)) {
      ::close(agent_fd_);
      agent_fd_ = -1;
      retire_warm();
      return;
    }
    if (request && !warm_off_ && !request->cgroup.empty()) {
      // The next task is likely of this one's kind.
      warm_off_ = !request->make_groups && on_cgroup2(request->cgroup);  // make_groups: v1
      warm_dirs_ = WarmTask::group_dirs(*request);
      warm_due_ms_ = warm_off_ ? 0 : monotonic_ms() + kWarmIdleMs;
    }
  }

  // Starts the task: as the ready-made process where one fits, else afresh.
  pid_t start(const LaunchRequest& request, int output_fd, std::string* error) {
    if (warm_ && warm_->fits(request) && warm_->ready(kWarmWaitMs)) {
      const pid_t pid = warm_->pid();
      const WarmTask::Outcome outcome = warm_->launch(request, output_fd, error);
      helpers_.erase(pid);  // the task now, or gone
      retire_warm();
      if (outcome == WarmTask::Outcome::kStarted) return pid;
      if (outcome == WarmTask::Outcome::kFailed) return 0;
    }
    if (request.make_groups) {
      *error = make_task_groups(request, &groups_);
      if (!error->empty()) return 0;
    }
    return start_task(request, output_fd, error);
  }

  // A process ready for the next task of the last one's kind (cgroup v1 only: on v2 a
  // task is born in its group).
  void prepare_warm() {
    if (warm_off_ || agent_fd_ < 0 || warm_dirs_.empty() || (warm_ && warm_->group_dirs() == warm_dirs_)) return;
    retire_warm();
    warm_ = WarmTask::make(warm_dirs_, {signal_fd_, agent_fd_}, groups_);
    if (warm_) helpers_.insert(warm_->pid());
  }

  // Ends an unused ready-made process (`reaped`: already reaped); its spare groups go
  // once the kernel has let go of them.
  void retire_warm(bool reaped = false) {
    if (!warm_) return;
    helpers_.erase(warm_->pid());
    for (auto& group : warm_->release(reaped)) leftover_cgroups_.push_back(std::move(group));
    warm_.reset();
  }

  void reap() {
    int status = 0;
    pid_t pid;
    while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
      helpers_.erase(pid);
      if (warm_ && warm_->pid() == pid) retire_warm(/*reaped=*/true);  // it died unused
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
    if (posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ) == 0) helpers_.insert(pid);
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
      if (!tasks_.count(pid) && !helpers_.count(pid)) orphans.push_back(pid);
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
      const bool gone = all_gone(ending.task);
      if (!gone && now < ending.deadline_ms) {
        waiting.push_back(std::move(ending));
        continue;
      }
      // The end first: removing groups waits on a lock the kernel holds for every
      // group of the machine, slow while many tasks end at once. A group whose last
      // processes are still being torn down goes a little later.
      if (!write_exit_record(ending.task.task_dir, ending.record) && errno != ENOENT) {  // no folder: no reader
        std::fprintf(stderr, "ag-supervisor: cannot record the end of the task in %s (%s): trying again every second\n",
                     ending.task.task_dir.c_str(), std::strerror(errno));
        unrecorded_.push_back({ending.task.task_dir, ending.record});
      }
      std::vector<std::string> groups = ending.task.limit_cgroups;
      groups.push_back(ending.task.cgroup);
      const bool emptied = ending.task.groups_kept && gone;
      for (const auto& group : groups) {
        if (emptied && group != ending.task.memory_cgroup && groups_.keep(group, ending.task.caps)) continue;
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

  void record_unrecorded() {
    std::vector<std::pair<std::string, std::string>> still;
    for (auto& [dir, record] : unrecorded_) {
      if (!write_exit_record(dir, record) && errno != ENOENT) still.emplace_back(std::move(dir), std::move(record));
    }
    unrecorded_ = std::move(still);
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
  // Children that are no task: cleanup commands still running, ready-made processes.
  std::set<pid_t> helpers_;
  std::unique_ptr<WarmTask> warm_;
  CgroupPool groups_;                  // emptied task groups kept for the next tasks
  bool warm_off_ = false;              // cgroup v2: none are made
  std::vector<std::string> warm_dirs_;  // where the last task's groups are
  int64_t warm_due_ms_ = 0;             // when to make one, 0: not due
  int signal_fd_ = -1;
  std::vector<Ending> endings_;
  // Ends whose record could not be written yet: (task folder, record).
  std::vector<std::pair<std::string, std::string>> unrecorded_;
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
  field(std::to_string(request.limits.memory_bytes) + " " + std::to_string(request.limits.cpu_millis) + " " +
        (request.make_groups ? "1" : "0"));
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
  if (fields.size() < 13 || fields[0] != "launch") return std::nullopt;
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
  {
    const char* caps = fields[9].c_str();
    request.limits.memory_bytes = std::strtoll(caps, &end, 10);
    if (end == caps || *end != ' ') return std::nullopt;
    caps = end + 1;
    request.limits.cpu_millis = std::strtoll(caps, &end, 10);
    if (end == caps || (std::strcmp(end, " 0") != 0 && std::strcmp(end, " 1") != 0)) return std::nullopt;
    request.make_groups = end[1] == '1';
  }
  size_t next = 10;
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

void SupervisorClient::finish(int wait_ms) {
  drop();
  for (int waited = 0; pid_ > 0 && waited <= wait_ms; waited += 5) {
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = 0;
      break;
    }
    ::usleep(5000);
  }
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
