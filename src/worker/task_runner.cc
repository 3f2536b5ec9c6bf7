#include "worker/task_runner.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/ids.h"

namespace ag::worker {

namespace asio = boost::asio;

std::string TaskId::to_string() const {
  return job_id + "/" + std::to_string(attempt) + "/" + std::to_string(task_index);
}

struct TaskRunner::Task {
  TaskId id;
  int64_t pid = 0;
  std::string marker;
  std::unique_ptr<asio::posix::stream_descriptor> output;
  std::array<char, 64 * 1024> buffer{};
  int64_t offset = 0;
  int log_fd = -1;
  std::optional<ExitStatus> exit;
  bool eof = false;
  bool finished = false;
  std::unique_ptr<asio::steady_timer> kill_timer;
  std::unique_ptr<asio::steady_timer> drain_timer;

  ~Task() {
    if (log_fd >= 0) ::close(log_fd);
  }
};

std::vector<int> find_marked_processes(const std::string& marker) {
  std::vector<int> pids;
  std::string needle = "AG_TASK_MARKER=" + marker;
  DIR* proc = opendir("/proc");
  if (!proc) return pids;
  while (dirent* entry = readdir(proc)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    std::string path = std::string("/proc/") + entry->d_name + "/environ";
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    std::string env;
    char buf[8192];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0 && env.size() < (1 << 20)) env.append(buf, static_cast<size_t>(n));
    ::close(fd);
    // Variables are NUL-separated; match a whole entry.
    size_t pos = 0;
    while ((pos = env.find(needle, pos)) != std::string::npos) {
      bool starts = pos == 0 || env[pos - 1] == '\0';
      size_t end = pos + needle.size();
      bool ends = end == env.size() || env[end] == '\0';
      if (starts && ends) {
        pids.push_back(std::atoi(entry->d_name));
        break;
      }
      pos = end;
    }
  }
  closedir(proc);
  return pids;
}

TaskRunner::TaskRunner(asio::io_context& io, std::string logs_dir, RunnerCallbacks callbacks)
    : io_(io), logs_dir_(std::move(logs_dir)), callbacks_(std::move(callbacks)), sigchld_(io, SIGCHLD) {
  std::filesystem::create_directories(logs_dir_);
  watch_children();
}

TaskRunner::~TaskRunner() = default;

void TaskRunner::watch_children() {
  sigchld_.async_wait([this](const boost::system::error_code& ec, int) {
    if (ec) return;
    reap();
    watch_children();
  });
}

bool TaskRunner::has_adopted_orphans() const {
  // The worker runs one thread, so its children are listed under its own task id.
  std::ifstream in("/proc/self/task/" + std::to_string(::getpid()) + "/children");
  if (!in) return true;  // cannot tell: assume the worst
  int64_t child;
  while (in >> child) {
    if (!by_pid_.count(child)) return true;
  }
  return false;
}

void TaskRunner::reap() {
  for (;;) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    auto it = by_pid_.find(pid);
    if (it == by_pid_.end()) continue;  // an orphaned grandchild handed to us as subreaper
    auto task = it->second;
    by_pid_.erase(it);
    ExitStatus exit;
    if (WIFEXITED(status)) exit.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) exit.signal = WTERMSIG(status);
    task->exit = exit;
    // Whatever the task left behind dies with it: no orphans hold GPUs or ports, and
    // the output pipe reaches end-of-file. Scanning /proc for the task's marker is the
    // costly part, so it is done only when something may be left: the task's process
    // group still has members, or orphans were handed to this subreaper.
    if (::kill(-pid, 0) == 0 || has_adopted_orphans()) signal_task(*task, SIGKILL);
    maybe_finish(task);
  }
}

Result<int64_t> TaskRunner::launch(const LaunchSpec& spec) {
  if (tasks_.count(spec.id)) {
    return Error{ErrorCode::kConflict, "task " + spec.id.to_string() + " is already running"};
  }
  std::error_code fs_error;
  // One mkdir when the parent exists (the common case): mkdir is slow on some disks.
  if (::mkdir(spec.working_dir.c_str(), 0755) != 0 && errno != EEXIST) {
    std::filesystem::create_directories(spec.working_dir, fs_error);
  }
  if (fs_error) return internal_error("cannot create working directory " + spec.working_dir + ": " + fs_error.message());

  auto task = std::make_shared<Task>();
  task->id = spec.id;
  task->marker = spec.id.job_id + "." + std::to_string(spec.id.attempt) + "." +
                 std::to_string(spec.id.task_index) + "." + random_hex(4);

  // Everything the child needs is prepared before fork: the child only makes syscalls.
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : spec.env) env_strings.push_back(k + "=" + v);
  env_strings.push_back("AG_TASK_MARKER=" + task->marker);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string sh = "/bin/sh", dash_c = "-c", command = spec.entrypoint;
  char* argv[] = {sh.data(), dash_c.data(), command.data(), nullptr};
  std::string workdir = spec.working_dir;

  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) return internal_error(std::string("pipe: ") + std::strerror(errno));
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    return internal_error(std::string("pipe: ") + std::strerror(errno));
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    int e = errno;
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) ::close(fd);
    return internal_error(std::string("fork: ") + std::strerror(e));
  }
  if (pid == 0) {
    ::setsid();
    sigset_t all;
    sigemptyset(&all);
    ::sigprocmask(SIG_SETMASK, &all, nullptr);
    for (int sig = 1; sig < NSIG; ++sig) ::signal(sig, SIG_DFL);
    int devnull = ::open("/dev/null", O_RDONLY);
    ::dup2(devnull, 0);
    ::dup2(out_pipe[1], 1);
    ::dup2(out_pipe[1], 2);
    auto fail = [&](const char* what) {
      const char* why = std::strerror(errno);
      ssize_t ignored = ::write(err_pipe[1], what, std::strlen(what));
      ignored = ::write(err_pipe[1], why, std::strlen(why));
      (void)ignored;
      ::_exit(127);
    };
    if (::chdir(workdir.c_str()) != 0) fail("cannot enter working directory: ");
    ::execve(argv[0], argv, envp.data());
    fail("cannot execute /bin/sh: ");
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  // exec closes err_pipe (O_CLOEXEC): EOF with no bytes means the task is running.
  std::string child_error;
  char buf[512];
  ssize_t n;
  while ((n = ::read(err_pipe[0], buf, sizeof buf)) != 0) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    child_error.append(buf, static_cast<size_t>(n));
  }
  ::close(err_pipe[0]);
  if (!child_error.empty()) {
    ::close(out_pipe[0]);
    int status;
    ::waitpid(pid, &status, 0);
    return internal_error(child_error);
  }

  task->pid = pid;
  task->log_fd = ::open(log_path(spec.id).c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
  task->output = std::make_unique<asio::posix::stream_descriptor>(io_, out_pipe[0]);
  tasks_[spec.id] = task;
  by_pid_[pid] = task;
  read_output(task);
  return static_cast<int64_t>(pid);
}

void TaskRunner::read_output(const std::shared_ptr<Task>& task) {
  task->output->async_read_some(asio::buffer(task->buffer), [this, task](const boost::system::error_code& ec, size_t n) {
    if (n > 0) {
      std::string_view chunk(task->buffer.data(), n);
      if (task->log_fd >= 0 && ::write(task->log_fd, chunk.data(), chunk.size()) < 0) {
        spdlog::warn("cannot keep a local copy of {}'s output: {}", task->id.to_string(), std::strerror(errno));
      }
      if (callbacks_.on_output) callbacks_.on_output(task->id, task->offset, chunk);
      task->offset += static_cast<int64_t>(n);
    }
    if (ec) {
      task->eof = true;
      maybe_finish(task);
      return;
    }
    read_output(task);
  });
}

void TaskRunner::maybe_finish(const std::shared_ptr<Task>& task) {
  if (task->finished || !task->exit) return;
  if (!task->eof) {
    // A process that escaped every kill may still hold the pipe: stop waiting for it
    // after a short drain so the exit is never held back.
    if (!task->drain_timer) {
      task->drain_timer = std::make_unique<asio::steady_timer>(io_, std::chrono::seconds(2));
      task->drain_timer->async_wait([this, task](const boost::system::error_code& ec) {
        if (ec || task->finished) return;
        task->eof = true;
        boost::system::error_code ignored;
        task->output->close(ignored);
        maybe_finish(task);
      });
    }
    return;
  }
  task->finished = true;
  if (task->kill_timer) task->kill_timer->cancel();
  if (task->drain_timer) task->drain_timer->cancel();
  tasks_.erase(task->id);
  if (callbacks_.on_exit) callbacks_.on_exit(task->id, *task->exit);
}

void TaskRunner::signal_task(Task& task, int sig) {
  ::kill(-static_cast<pid_t>(task.pid), sig);
  for (int pid : find_marked_processes(task.marker)) ::kill(pid, sig);
}

void TaskRunner::kill(const TaskId& id, int64_t grace_ms) {
  auto it = tasks_.find(id);
  if (it == tasks_.end()) return;
  auto task = it->second;
  if (task->kill_timer) return;  // already being stopped
  spdlog::info("stopping task {} (pid {}): SIGTERM, SIGKILL after {} ms", id.to_string(), task->pid, grace_ms);
  signal_task(*task, SIGTERM);
  task->kill_timer = std::make_unique<asio::steady_timer>(io_, std::chrono::milliseconds(grace_ms));
  task->kill_timer->async_wait([this, task](const boost::system::error_code& ec) {
    if (ec || task->finished) return;
    signal_task(*task, SIGKILL);
  });
}

void TaskRunner::kill_all(int64_t grace_ms) {
  std::vector<TaskId> ids;
  for (const auto& [id, _] : tasks_) ids.push_back(id);
  for (const auto& id : ids) kill(id, grace_ms);
}

std::string TaskRunner::log_path(const TaskId& id) const {
  return logs_dir_ + "/" + id.job_id + "." + std::to_string(id.attempt) + "." + std::to_string(id.task_index) + ".log";
}

std::optional<int64_t> TaskRunner::output_offset(const TaskId& id) const {
  auto it = tasks_.find(id);
  if (it == tasks_.end()) return std::nullopt;
  return it->second->offset;
}

std::vector<TaskRunner::Running> TaskRunner::running() const {
  std::vector<Running> out;
  for (const auto& [id, task] : tasks_) out.push_back({id, task->pid});
  return out;
}

}  // namespace ag::worker
