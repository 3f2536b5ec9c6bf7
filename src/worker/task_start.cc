#include "worker/task_start.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <set>
#include <string_view>
#include <unordered_map>

#include "common/scheduling.h"
#include "worker/simple_command.h"
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

std::string describe_failure(const LaunchRequest& request, const std::string& step, int code) {
  std::string text = "cannot start `/bin/sh -c ...`";
  if (request.run_as) text += " as uid " + std::to_string(request.run_as->uid);
  text += " in " + request.working_dir + ": ";
  if (request.run_as || step == "join its control groups" || step == "reset its scheduling policy" ||
      step == "receive its task" || step == "open its output") {
    text += step + ": ";
  }
  return text + std::strerror(code);
}

// What a child sharing the supervisor's memory needs, and where it says why it could
// not start the task.
struct SharedChild {
  const LaunchRequest* request;
  const ExecArgs* args;
  int output_fd;
  StartReport report;
};

int run_shared_child(void* arg) {
  auto* child = static_cast<SharedChild*>(arg);
  become_task(*child->request, *child->args, child->output_fd, child->report, true);
}

// A child that shares the supervisor's memory until its exec, on a stack of its own,
// the supervisor waiting meanwhile (as posix_spawn does): no copy of the supervisor's
// page tables to make and tear down again. The child joins the task's groups itself.
pid_t clone_task(const LaunchRequest& request, int output_fd, std::string* error) {
  static ChildStack stack(64 * 1024);  // one child at a time: the supervisor waits for its exec
  if (!stack.map(error)) return 0;
  const ExecArgs args(request);
  SharedChild child{&request, &args, output_fd, {}};
  // Every signal blocked until the child has reset their handlers: a handler of the
  // supervisor's must not run in it, on memory they share.
  const uint64_t old = block_every_signal();
  const pid_t pid = ::clone(run_shared_child, stack.top(), CLONE_VM | CLONE_VFORK | SIGCHLD, &child);
  const int clone_errno = errno;
  restore_signal_mask(old);
  if (pid < 0) {
    *error = std::string("cannot start the task: clone: ") + std::strerror(clone_errno);
    return 0;
  }
  if (child.report.code != 0) {
    ::waitpid(pid, nullptr, 0);
    *error = describe_failure(request, child.report.step, child.report.code);
    return 0;
  }
  return pid;
}

// On cgroup v2: clone3 straight into the task's group (a copy of the supervisor's
// memory: clone3 cannot give a child sharing it a stack from C). The supervisor is small
// and has one thread, so the copy is cheap and its child may do anything before the exec.
pid_t clone3_task(const LaunchRequest& request, int output_fd, std::string* error) {
  int group_fd = ::open(request.cgroup.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (group_fd < 0) return clone_task(request, output_fd, error);
  const ExecArgs args(request);
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) {
    ::close(group_fd);
    *error = std::string("cannot start the task: pipe: ") + std::strerror(errno);
    return 0;
  }
  CloneArgs clone;
  clone.flags = kCloneIntoCgroup;
  clone.exit_signal = SIGCHLD;
  clone.cgroup = static_cast<uint64_t>(group_fd);
  const pid_t pid = static_cast<pid_t>(::syscall(kClone3, &clone, sizeof clone));
  if (pid == 0) {
    ::close(report[0]);
    StartReport to_pipe;
    to_pipe.fd = report[1];
    become_task(request, args, output_fd, to_pipe);
  }
  const int clone_errno = errno;
  ::close(group_fd);
  ::close(report[1]);
  if (pid < 0) {
    ::close(report[0]);
    if (clone_errno == ENOSYS || clone_errno == E2BIG) {
      clone3_unavailable = true;
      return clone_task(request, output_fd, error);
    }
    *error = std::string("cannot start the task: clone3: ") + std::strerror(clone_errno);
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

// The signals `line` ("SigIgn:\t0000000000001000" in /proc/self/status) sets, added to
// `mask` (bit n-1: signal n, as the kernel numbers them); false when it is not such a
// line.
bool add_signal_mask(std::string_view line, std::string_view field, uint64_t* mask) {
  if (line.substr(0, field.size()) != field) return false;
  uint64_t read = 0;
  for (char c : line.substr(field.size())) {
    if (c == ' ' || c == '\t') continue;
    const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (digit < 0) return false;
    read = read << 4 | static_cast<uint64_t>(digit);
  }
  *mask |= read;
  return true;
}

// What this process ignores or catches, from /proc/self/status: two fields the kernel
// keeps (the 64 sigaction calls that would ask the same cost the task's start more).
// A mask, not a sigset_t: glibc's sigaddset refuses its internal signals (32, 33).
uint64_t read_signals_not_at_default() {
  uint64_t mask = 0;
  char buf[4096];
  ssize_t n = -1;
  const int fd = ::open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    n = ::read(fd, buf, sizeof buf);
    ::close(fd);
  }
  int found = 0;
  for (std::string_view rest(buf, n > 0 ? static_cast<size_t>(n) : 0); !rest.empty();) {
    const size_t end = rest.find('\n');
    const std::string_view line = rest.substr(0, end);
    if (add_signal_mask(line, "SigIgn:", &mask) || add_signal_mask(line, "SigCgt:", &mask)) ++found;
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
  }
  if (found != 2) mask = ~uint64_t{0};  // not read whole: every signal is reset
  return mask;
}

// Read once per process: the supervisor sets its dispositions as it starts (and a
// ready-made process has a copy of them), so every launch would read the same two fields.
uint64_t supervisor_signals_not_at_default() {
  static const uint64_t mask = read_signals_not_at_default();
  return mask;
}

bool supervisor_runs_as_daemon() {
  static const bool daemon = runs_as_daemon();
  return daemon;
}

}  // namespace

uint64_t signals_not_at_default() { return read_signals_not_at_default(); }

uint64_t block_every_signal() {
  const uint64_t all = ~uint64_t{0};
  uint64_t old = 0;
  ::syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, &old, sizeof old);
  return old;
}

void restore_signal_mask(uint64_t mask) { ::syscall(SYS_rt_sigprocmask, SIG_SETMASK, &mask, nullptr, sizeof mask); }

ChildStack::~ChildStack() {
  if (base_) ::munmap(base_, guard_ + size_);
}

bool ChildStack::map(std::string* error) {
  if (base_) return true;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  void* base = ::mmap(nullptr, page + size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (base == MAP_FAILED) {
    *error = std::string("cannot start the task: no memory for its first steps: ") + std::strerror(errno);
    return false;
  }
  if (::mprotect(base, page, PROT_NONE) != 0) {
    *error = std::string("cannot start the task: cannot guard its stack: ") + std::strerror(errno);
    ::munmap(base, page + size_);
    return false;
  }
  base_ = static_cast<char*>(base);
  guard_ = page;
  return true;
}

ExecArgs::ExecArgs(const LaunchRequest& request)
    : reset_signals(supervisor_signals_not_at_default()), reset_policy(supervisor_runs_as_daemon()) {
  for (const auto& s : request.argv) argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);
  for (const auto& s : request.envp) envp.push_back(const_cast<char*>(s.c_str()));
  envp.push_back(nullptr);
  if (request.run_as) groups.assign(request.run_as->groups.begin(), request.run_as->groups.end());

  const auto& a = request.argv;
  if (a.size() != 3 || a[0] != "/bin/sh" || a[1] != "-c" || request.working_dir.empty() ||
      request.working_dir[0] != '/') {
    return;
  }
  auto found = std::find_if(request.envp.begin(), request.envp.end(),
                            [](const std::string& var) { return var.rfind("PATH=", 0) == 0; });
  auto command = simple_command(a[2]);
  if (!command || found == request.envp.end()) return;  // no PATH: the shell's own default
  words = std::move(*command);
  candidates = program_candidates(words.front(), std::string_view(*found).substr(5));
  pwd = "PWD=" + request.working_dir;
  for (auto& word : words) direct_argv.push_back(word.data());
  direct_argv.push_back(nullptr);
  // The environment as the shell passes it on: names it could hold (a letter or _, then
  // letters, digits and _), each once with its last value, and PWD its own.
  auto name_of = [](const std::string& var) {
    const size_t eq = var.find('=');
    return eq == std::string::npos ? std::string_view() : std::string_view(var).substr(0, eq);
  };
  auto shell_name = [](std::string_view name) {
    auto letter = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
    if (name.empty() || !letter(name[0])) return false;
    return std::all_of(name.begin(), name.end(), [&](char c) { return letter(c) || (c >= '0' && c <= '9'); });
  };
  std::unordered_map<std::string_view, size_t> last;
  for (size_t i = 0; i < request.envp.size(); ++i) last[name_of(request.envp[i])] = i;
  for (size_t i = 0; i < request.envp.size(); ++i) {
    const std::string_view name = name_of(request.envp[i]);
    if (shell_name(name) && name != "PWD" && last[name] == i) {
      direct_envp.push_back(const_cast<char*>(request.envp[i].c_str()));
    }
  }
  direct_envp.push_back(pwd.data());
  direct_envp.push_back(nullptr);
}

std::string make_task_groups(const LaunchRequest& request, CgroupPool* pool) {
  std::vector<std::string> groups{request.cgroup};
  groups.insert(groups.end(), request.limit_cgroups.begin(), request.limit_cgroups.end());
  const std::string caps = v1_caps_key(request.limits);
  std::vector<std::string> made;
  std::set<std::string> capped;  // kept groups that have these caps already
  auto undo = [&made](std::string why) {
    for (const auto& group : made) ::rmdir(group.c_str());
    return why;
  };
  for (const auto& group : groups) {
    if (group.empty()) continue;
    // A kept group is had as the task's; a memory group never is (cgroup_pool.h).
    if (pool != nullptr && group != request.memory_cgroup) {
      if (auto had = pool->take(group)) {
        made.push_back(group);
        if (*had == caps) capped.insert(group);
        continue;
      }
    }
    if (::mkdir(group.c_str(), 0755) == 0)
      made.push_back(group);
    else if (errno != EEXIST)
      return undo("cannot create the task's control group " + group + ": " + std::strerror(errno));
  }
  for (const auto& group : request.limit_cgroups) {
    if (capped.count(group)) continue;
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
  return cgroup2 ? clone3_task(request, output_fd, error) : clone_task(request, output_fd, error);
}

void StartReport::fail(const char* step, int error) {
  if (fd >= 0) {
    ssize_t ignored = ::write(fd, step, std::strlen(step) + 1);
    ignored = ::write(fd, &error, sizeof error);
    (void)ignored;
  } else {
    std::strncpy(this->step, step, sizeof this->step - 1);
    code = error;
  }
}

void become_task(const LaunchRequest& request, const ExecArgs& args, int output_fd, StartReport& report,
                 bool join_groups) {
  // The system call itself: glibc's wrapper refuses its two internal signals (32 and
  // 33), which a process that posix_spawn started from a threaded one (the supervisor,
  // from its agent) has ignored, and an ignored signal stays ignored across exec.
  struct KernelAction {
    void (*handler)(int);
    unsigned long flags = 0;
    void (*restorer)() = nullptr;
    uint64_t mask = 0;
  };
  const KernelAction default_action{SIG_DFL}, ignore_action{SIG_IGN};
  // A signal sent to this process before it became the task (a ready-made one waits
  // with every signal blocked; one the supervisor ignores stays pending all the same)
  // is dropped, as ignoring it drops it, rather than delivered to the task.
  uint64_t pending = 0;
  ::syscall(SYS_rt_sigpending, &pending, sizeof pending);
  for (int sig = 1; sig < NSIG && sig <= 64; ++sig) {
    const uint64_t bit = uint64_t{1} << (sig - 1);
    if (pending & bit) ::syscall(SYS_rt_sigaction, sig, &ignore_action, nullptr, sizeof ignore_action.mask);
    if ((args.reset_signals | pending) & bit) {
      ::syscall(SYS_rt_sigaction, sig, &default_action, nullptr, sizeof default_action.mask);
    }
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  const sched_param normal{};
  if (args.reset_policy && ::sched_setscheduler(0, SCHED_OTHER, &normal) != 0) {
    report.fail("reset its scheduling policy", errno);
    ::_exit(127);
  }
  ::setpgid(0, 0);
  // The output file where it cannot be lost: a supervisor started with a standard
  // descriptor closed may have received it as 0 (which /dev/null replaces below), 1 or
  // 2 (which dup2 leaves close-on-exec).
  if (output_fd <= 2) {
    output_fd = ::fcntl(output_fd, F_DUPFD_CLOEXEC, 3);
    if (output_fd < 0) {
      report.fail("open its output", errno);
      ::_exit(127);
    }
  }
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
  // The system calls themselves: libc's wrappers would tell every thread of the
  // process to change too, and a child sharing the supervisor's memory shares its
  // idea of its threads.
  if (ok && request.run_as) {
    const LaunchRequest::RunAs& as = *request.run_as;
    ok = (step = "setgroups", ::syscall(SYS_setgroups, args.groups.size(), args.groups.data()) == 0) &&
         (step = "setgid", ::syscall(SYS_setgid, as.gid) == 0) && (step = "setuid", ::syscall(SYS_setuid, as.uid) == 0);
  }
  if (ok && (step = "chdir", ::chdir(request.working_dir.c_str()) == 0)) {
    step = "exec";
    // A simple command: the shell's search and exec, done here. Where it finds nothing
    // it can run, the shell itself, which says why as it always has; a file that is no
    // program (ENOEXEC) is the shell's to run as a script, and ends the search.
    for (const auto& candidate : args.candidates) {
      ::execve(candidate.c_str(), args.direct_argv.data(), args.direct_envp.data());
      if (errno == ENOEXEC) break;
    }
    if (args.argv[0])
      ::execve(args.argv[0], args.argv.data(), args.envp.data());
    else
      errno = EINVAL;
  }
  report.fail(step, errno);
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
