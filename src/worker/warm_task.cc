#include "worker/warm_task.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>

#include "worker/fd_frames.h"
#include "worker/task_cgroup.h"
#include "worker/task_start.h"

namespace ag::worker {

// Made before the clone and read by the child; `request` and `args` are set before the
// launch's frame is sent and stay until the exec. Nothing else changes while the child
// runs.
struct WarmChild {
  static constexpr size_t kStackSize = 64 * 1024;
  int fd = -1;                     // the child's end of the socket
  std::vector<int> inherited;      // the supervisor's descriptors it closes at once
  std::vector<std::string> procs;  // <spare>/cgroup.procs, one per group it joins
  const LaunchRequest* request = nullptr;
  const ExecArgs* args = nullptr;
  ChildStack stack{kStackSize};
};

namespace {

std::string parent_of(const std::string& group) { return group.substr(0, group.rfind('/')); }

// A system call that returns -errno rather than writing errno: the child shares the
// supervisor's thread-local storage, errno included, while both run.
long raw_call(long number, long a = 0, long b = 0, long c = 0) {
#if defined(__x86_64__)
  long result;
  asm volatile("syscall" : "=a"(result) : "a"(number), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
  return result;
#elif defined(__aarch64__)
  register long x8 asm("x8") = number;
  register long x0 asm("x0") = a;
  register long x1 asm("x1") = b;
  register long x2 asm("x2") = c;
  asm volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2) : "memory");
  return x0;
#else
#error "the ready-made task process needs raw system calls for this architecture"
#endif
}

[[noreturn]] void leave(int code) {
  for (;;) raw_call(SYS_exit, code);
}

// Writes `pid` and a newline into `text`; returns the length.
int pid_line(long pid, char (&text)[24]) {
  char digits[20];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + pid % 10);
    pid /= 10;
  } while (pid > 0);
  int len = 0;
  while (n > 0) text[len++] = digits[--n];
  text[len++] = '\n';
  return len;
}

// The ready-made process: into its groups (the slow part, while nothing waits), then
// it waits for its task: an empty frame with the task's output file.
int run_warm(void* arg) {
  const WarmChild& child = *static_cast<const WarmChild*>(arg);
  for (int fd : child.inherited) raw_call(SYS_close, fd);
  static const char kName[] = "ag-warm-task";
  raw_call(SYS_prctl, PR_SET_NAME, reinterpret_cast<long>(kName));
  char line[24];
  const int len = pid_line(raw_call(SYS_getpid), line);
  for (const std::string& procs : child.procs) {
    const long fd = raw_call(SYS_openat, AT_FDCWD, reinterpret_cast<long>(procs.c_str()), O_WRONLY | O_CLOEXEC);
    if (fd < 0) leave(1);
    const long written = raw_call(SYS_write, fd, reinterpret_cast<long>(line), len);
    raw_call(SYS_close, fd);
    if (written != len) leave(1);
  }
  if (raw_call(SYS_write, child.fd, reinterpret_cast<long>("r"), 1) != 1) leave(1);

  FrameHead head;
  long got;
  do {
    got = raw_call(SYS_recvmsg, child.fd, reinterpret_cast<long>(&head.msg), MSG_CMSG_CLOEXEC);
  } while (got == -EINTR);
  if (got == 0) leave(0);  // released unused: the supervisor closed its end
  const int output_fd = head.passed_fd();
  if (got != static_cast<long>(sizeof head.length) || head.length != 0 || output_fd < 0) {
    // Not the launch's empty frame with the output file: said as a failed start (as
    // become_task reports one), never taken for a task that started.
    static const char kStep[] = "receive its task";
    const int code = got < 0 ? static_cast<int>(-got) : EBADMSG;
    raw_call(SYS_write, child.fd, reinterpret_cast<long>(kStep), sizeof kStep);
    raw_call(SYS_write, child.fd, reinterpret_cast<long>(&code), sizeof code);
    leave(127);
  }
  std::atomic_thread_fence(std::memory_order_acquire);  // the request, laid out before the frame
  StartReport report;
  report.fd = child.fd;
  become_task(*child.request, *child.args, output_fd, report);
}

}  // namespace

WarmTask::WarmTask(pid_t pid, int fd, std::unique_ptr<WarmChild> child, std::vector<std::string> dirs,
                   std::vector<std::string> spares)
    : pid_(pid), fd_(fd), child_(std::move(child)), dirs_(std::move(dirs)), spares_(std::move(spares)) {}

std::unique_ptr<WarmTask> WarmTask::make(const std::vector<std::string>& group_dirs, const std::vector<int>& inherited,
                                         CgroupPool& pool) {
  if (group_dirs.empty()) return nullptr;
  std::vector<std::string> spares;
  auto undo = [&spares] {
    for (const auto& group : spares) ::rmdir(group.c_str());
    return nullptr;
  };
  for (const auto& dir : group_dirs) {
    std::string spare = pool.spare(dir);
    if (spare.empty()) return undo();
    spares.push_back(std::move(spare));
  }
  auto child = std::make_unique<WarmChild>();
  std::string no_stack;
  if (!child->stack.map(&no_stack)) return undo();
  int ends[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) != 0) return undo();
  child->fd = ends[1];
  child->inherited = inherited;
  child->inherited.push_back(ends[0]);
  for (const auto& spare : spares) child->procs.push_back(spare + "/cgroup.procs");
  // Every signal blocked in the child until become_task has reset their handlers: a
  // handler of the supervisor's must not run in it, on memory they share.
  const uint64_t old = block_every_signal();
  const pid_t pid = ::clone(run_warm, child->stack.top(), CLONE_VM | SIGCHLD, child.get());
  restore_signal_mask(old);
  ::close(ends[1]);
  if (pid < 0) {
    ::close(ends[0]);
    return undo();
  }
  return std::unique_ptr<WarmTask>(new WarmTask(pid, ends[0], std::move(child), group_dirs, std::move(spares)));
}

WarmTask::~WarmTask() { end_process(); }  // before its stack goes

std::vector<std::string> WarmTask::group_dirs(const LaunchRequest& request) {
  std::vector<std::string> dirs;
  if (request.cgroup.empty()) return dirs;
  dirs.push_back(parent_of(request.cgroup));
  for (const auto& group : request.limit_cgroups) dirs.push_back(parent_of(group));
  return dirs;
}

bool WarmTask::fits(const LaunchRequest& request) const { return fd_ >= 0 && group_dirs(request) == dirs_; }

bool WarmTask::ready(int wait_ms) {
  if (ready_ || fd_ < 0) return ready_;
  pollfd pfd{fd_, POLLIN, 0};
  int n;
  do {
    n = ::poll(&pfd, 1, wait_ms);
  } while (n < 0 && errno == EINTR);
  // Peeked, not read: taking the byte would wake the process, which waits on the same
  // socket, for nothing; woken while the other CPU is busy (a gang's other rank
  // starting), it is queued there and stays queued when the launch's frame comes. The
  // launch takes the byte once the frame has woken it anyway.
  char said = 0;
  ready_ = n > 0 && ::recv(fd_, &said, 1, MSG_PEEK) == 1 && said == 'r';
  return ready_;
}

void WarmTask::end_process() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!sharing_) return;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  sharing_ = false;
}

WarmTask::Outcome WarmTask::launch(const LaunchRequest& request, int output_fd, std::string* error) {
  std::vector<std::string> targets{request.cgroup};
  targets.insert(targets.end(), request.limit_cgroups.begin(), request.limit_cgroups.end());
  bool handed = fits(request) && ready_;
  for (size_t i = 0; handed && i < targets.size(); ++i) {
    // A group the agent made is new and empty: the spare takes its place and its name.
    if (!request.make_groups && ::rmdir(targets[i].c_str()) != 0 && errno != ENOENT) {
      handed = false;
    } else if (::rename(spares_[i].c_str(), targets[i].c_str()) != 0) {
      ::mkdir(targets[i].c_str(), 0755);
      handed = false;
    } else {
      spares_[i].clear();
    }
  }
  // The caps go on the spares; after a failed hand-over, the groups still missing are
  // made as they would have been without this process.
  std::string failed = make_task_groups(request);
  if (!failed.empty()) {
    end_process();
    *error = failed;
    return Outcome::kFailed;
  }
  const ExecArgs args(request);
  child_->request = &request;
  child_->args = &args;
  std::atomic_thread_fence(std::memory_order_release);
  if (!handed || !write_frame(fd_, "", output_fd)) {
    end_process();
    return Outcome::kNotUsed;
  }
  char said = 0;
  while (::recv(fd_, &said, 1, 0) < 0 && errno == EINTR) {
  }
  // The exec closes the child's end: then it runs on memory of its own.
  std::string failure = read_start_failure(fd_, request);
  ::close(fd_);
  fd_ = -1;
  if (!failure.empty()) {
    ::waitpid(pid_, nullptr, 0);
    sharing_ = false;
    *error = failure;
    return Outcome::kFailed;
  }
  sharing_ = false;
  return Outcome::kStarted;
}

std::vector<std::string> WarmTask::release(bool reaped) {
  if (reaped) sharing_ = false;
  end_process();
  std::vector<std::string> left;
  for (auto& group : spares_) {
    if (!group.empty()) left.push_back(std::move(group));
  }
  spares_.clear();
  return left;
}

}  // namespace ag::worker
