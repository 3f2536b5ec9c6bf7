#include "worker/warm_task.h"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "worker/fd_frames.h"
#include "worker/task_cgroup.h"
#include "worker/task_start.h"

namespace ag::worker {
namespace {

std::string parent_of(const std::string& group) { return group.substr(0, group.rfind('/')); }

LaunchRequest sample_request() {
  LaunchRequest sample;
  sample.task_dir = "/var/lib/aethergrid/tasks/job_000000000000.0.0";
  sample.working_dir = "/var/lib/aethergrid/work/job_000000000000.0.0";
  sample.cgroup = "/sys/fs/cgroup/pids/aethergrid/job_000000000000.0.0";
  sample.limit_cgroups = {"/sys/fs/cgroup/cpu/aethergrid/job_000000000000.0.0"};
  sample.marker = "job_000000000000.0.0.00000000";
  sample.argv = {"/bin/sh", "-c", "python3 train.py --epochs 1"};
  // A task's environment: the worker's own and the job's, a few dozen variables.
  for (int i = 0; i < 48; ++i) sample.envp.push_back("AG_SAMPLE_" + std::to_string(i) + "=" + std::string(40, 'x'));
  sample.envp.push_back("PATH=/usr/local/bin:/usr/bin:/bin");
  return sample;
}

// The ready-made process: into its groups (the slow part, while nothing waits), then
// it waits for its task.
[[noreturn]] void run_warm(int fd, const std::vector<std::string>& spares) {
  for (const auto& group : spares) {
    if (!join_cgroup(group.c_str())) ::_exit(1);
  }
  rehearse_launch();
  if (::write(fd, "r", 1) != 1) ::_exit(1);
  std::string payload;
  int output_fd = -1;
  if (!read_frame(fd, &payload, &output_fd)) ::_exit(0);  // released unused
  auto request = decode_launch(payload);
  if (!request || output_fd < 0) {
    const char step[] = "request";
    const int code = EINVAL;
    ssize_t ignored = ::write(fd, step, sizeof step);
    ignored = ::write(fd, &code, sizeof code);
    (void)ignored;
    ::_exit(127);
  }
  const ExecArgs args(*request);
  StartReport report;
  report.fd = fd;
  become_task(*request, args, output_fd, report);
}

}  // namespace

void rehearse_launch() {
  static const std::string payload = encode_launch(sample_request());
  std::optional<LaunchRequest> decoded = decode_launch(payload);
  if (decoded) ExecArgs args(*decoded);
}

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
  int ends[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) != 0) return undo();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(ends[0]);
    for (int fd : inherited) {
      if (fd >= 0) ::close(fd);
    }
    ::prctl(PR_SET_NAME, "ag-warm-task");
    run_warm(ends[1], spares);
  }
  ::close(ends[1]);
  if (pid < 0) {
    ::close(ends[0]);
    return undo();
  }
  return std::unique_ptr<WarmTask>(new WarmTask(pid, ends[0], group_dirs, std::move(spares)));
}

WarmTask::~WarmTask() {
  if (fd_ >= 0) ::close(fd_);
}

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
  char said = 0;
  ready_ = n > 0 && ::read(fd_, &said, 1) == 1 && said == 'r';
  return ready_;
}

void WarmTask::end_process() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
}

WarmTask::Outcome WarmTask::launch(const LaunchRequest& request, const std::string& payload, int output_fd,
                                   std::string* error) {
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
  if (!handed || !write_frame(fd_, payload, output_fd)) {
    end_process();
    return Outcome::kNotUsed;
  }
  std::string failure = read_start_failure(fd_, request);
  ::close(fd_);
  fd_ = -1;
  if (!failure.empty()) {
    ::waitpid(pid_, nullptr, 0);
    *error = failure;
    return Outcome::kFailed;
  }
  return Outcome::kStarted;
}

std::vector<std::string> WarmTask::release() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  std::vector<std::string> left;
  for (auto& group : spares_) {
    if (!group.empty()) left.push_back(std::move(group));
  }
  spares_.clear();
  return left;
}

}  // namespace ag::worker
