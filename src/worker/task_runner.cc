#include "worker/task_runner.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "common/dir_spread.h"
#include "common/ids.h"
#include "common/shell_quote.h"
#include "worker/async_command.h"
#include "worker/container_engine.h"
#include "worker/task_cgroup.h"
#include "worker/task_record.h"
#include "worker/task_start.h"
#include "worker/task_supervisor.h"

namespace ag::worker {
namespace {

// Writes `text` as the whole of the file at `path` (made with `mode`): plain system calls,
// which a launch's few hundred bytes cost less through than a stream. False with errno.
bool write_small_file(const std::string& path, const std::string& text, mode_t mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return false;
  const bool whole = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const int error = errno;
  ::close(fd);
  errno = error;
  return whole;
}

}  // namespace

namespace asio = boost::asio;
namespace fs = std::filesystem;

struct TaskRunner::Task {
  api::TaskKey id;
  std::string dir;
  int64_t pid = 0;
  std::string marker;
  std::string cgroup;  // "" where the node has none
  std::vector<std::string> limit_cgroups;
  int64_t memory_limit_bytes = 0;
  std::string container;    // its container's name, "" for a host task
  std::string engine_path;  // the engine that runs it
  std::string cgroup_parent;
  std::optional<TaskUser> account;  // who it runs as; unset: the worker's own user
  int output_fd = -1;  // read side of output.log
  int64_t supervisor_pid = 0;
  bool finished = false;
  std::unique_ptr<asio::steady_timer> kill_timer;

  ~Task() {
    if (output_fd >= 0) ::close(output_fd);
  }
  void remove_groups() const {
    remove_cgroup(cgroup);
    for (const auto& group : limit_cgroups) remove_cgroup(group);
  }
  // What removes a container task's leftovers (its container, the engine's groups in
  // each hierarchy mounted at `mounts`); the supervisor runs it when the task ends,
  // remove_container where no supervisor will.
  std::vector<std::string> container_cleanup_argv(const std::vector<std::string>& mounts) const;
};

std::vector<std::string> TaskRunner::Task::container_cleanup_argv(const std::vector<std::string>& mounts) const {
  // The engine removes a container that ends by itself (--rm), so one whose client
  // exited 0 is gone. Any other end is removed here ($1: the exit code, or "signal";
  // none from remove_container, which always removes). A client killed while the
  // engine was still creating the container leaves it created but never started, and
  // may leave it locked for a moment: the removal is tried again, for up to 10 s, until
  // the engine no longer knows the container. Then the groups the engine made below the
  // task's, in every hierarchy.
  const std::string engine = shell_quote(engine_path), name = shell_quote(container);
  std::string script = "if [ \"$1\" != 0 ]; then n=0; while [ $n -lt 20 ]; do " + engine + " rm --force " + name +
                       " >/dev/null 2>&1; " + engine + " container inspect " + name +
                       " >/dev/null 2>&1 || break; sleep 0.5; n=$((n+1)); done; fi";
  if (!cgroup_parent.empty()) {
    // The engine's monitor may outlive the client a moment: up to 5 s for its groups.
    std::string groups;
    for (const auto& mount : mounts) groups += " " + shell_quote(mount + cgroup_parent);
    script += "; n=0; while [ $n -lt 25 ]; do left=; for g in" + groups +
              "; do [ -d \"$g\" ] || continue; find \"$g\" -depth -type d -exec rmdir {} + 2>/dev/null;"
              " [ -d \"$g\" ] && left=1; done; [ -z \"$left\" ] && break; sleep 0.2; n=$((n+1)); done; true";
  }
  return {"/bin/sh", "-c", script};
}

Result<std::unique_ptr<TaskRunner>> TaskRunner::create(asio::io_context& io, std::string data_dir,
                                                      std::string cgroup_root, LimitRoots limits,
                                                      std::string supervisor) {
  std::error_code ec;
  fs::create_directories(data_dir + "/tasks", ec);
  if (ec) return internal_error("cannot create " + data_dir + "/tasks: " + ec.message());
  // Its folders serve a few tasks each (DirPool); a new one goes to a block group of
  // its own, away from where the last ones' files came and went.
  spread_subdirectories(data_dir + "/tasks");
  const int inotify_fd = TaskFilesWatch::open_inotify();
  return std::unique_ptr<TaskRunner>(new TaskRunner(io, std::move(data_dir), std::move(cgroup_root), std::move(limits),
                                                    std::move(supervisor), inotify_fd));
}

TaskRunner::TaskRunner(asio::io_context& io, std::string data_dir, std::string cgroup_root, LimitRoots limits,
                       std::string supervisor, int inotify_fd)
    : io_(io),
      folders_(std::move(data_dir)),
      cgroup_root_(std::move(cgroup_root)),
      limits_(std::move(limits)),
      groups_by_supervisor_(!cgroup_root_.empty() && !limits_.unified && !on_cgroup2(cgroup_root_)),
      sigchld_(io, SIGCHLD),
      supervisor_(std::move(supervisor)),
      files_(io, inotify_fd,
             {[this](const api::TaskKey& id) {
                if (events_.on_output) events_.on_output(id);
              },
              [this](const api::TaskKey& id, const api::TaskExit& exit) {
                auto it = tasks_.find(id);
                if (it == tasks_.end()) return;
                const std::shared_ptr<Task> task = it->second;  // finish() drops it from tasks_
                finish(task, exit);
              }}) {
  sigchld_.async_wait([this](const boost::system::error_code& ec, int) {
    if (!ec) reap_children();
  });
}

TaskRunner::~TaskRunner() = default;

std::string TaskRunner::log_path(const api::TaskKey& id) const { return folders_.task_dir(id) + "/output.log"; }

int64_t TaskRunner::output_size(const api::TaskKey& id) const {
  struct stat st {};
  return ::stat(log_path(id).c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : -1;
}

Result<size_t> TaskRunner::read_output(const api::TaskKey& id, int64_t offset, int64_t max_bytes,
                                       std::string& out) const {
  std::string path = log_path(id);
  // A running task's file is open already; an ended one's is opened for the read.
  auto it = tasks_.find(id);
  int live_fd = it != tasks_.end() ? it->second->output_fd : -1;
  int fd = live_fd >= 0 ? live_fd : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return not_found("no output kept for task " + id.to_string() + ": " + std::strerror(errno));
  const size_t before = out.size();
  out.resize(before + static_cast<size_t>(std::max<int64_t>(0, max_bytes)));
  ssize_t n = ::pread(fd, out.data() + before, out.size() - before, offset);
  int err = errno;
  if (fd != live_fd) ::close(fd);
  out.resize(before + static_cast<size_t>(std::max<ssize_t>(n, 0)));
  if (n < 0) return internal_error("cannot read " + path + ": " + std::strerror(err));
  return static_cast<size_t>(n);
}

void TaskRunner::reap_children() {
  // The agent's only children are task supervisors. One leaves only once its agent is
  // gone, so reaping one here means it died (or was killed for not answering): its
  // tasks can no longer record their ends.
  pid_t pid;
  int status = 0;
  while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
    if (AsyncCommand::reaped(pid, status)) continue;
    supervisor_.on_reaped(pid);
    end_tasks_of_lost_supervisor(pid);
  }
  sigchld_.async_wait([this](const boost::system::error_code& ec, int) {
    if (!ec) reap_children();
  });
}

void TaskRunner::end_tasks_of_lost_supervisor(int64_t supervisor_pid) {
  std::vector<std::shared_ptr<Task>> orphans;
  for (const auto& [_, task] : tasks_) {
    if (task->supervisor_pid == supervisor_pid) orphans.push_back(task);
  }
  if (orphans.empty()) return;
  spdlog::error("the task supervisor (pid {}) died; its {} task(s) are ended as lost", supervisor_pid, orphans.size());
  for (const auto& task : orphans) {
    // An end it recorded just before dying still counts.
    if (auto exit = read_exit_record(task->dir)) {
      finish(task, *exit);
      continue;
    }
    signal_task(*task, SIGKILL);
    task->remove_groups();
    remove_container(*task);
    finish(task, api::TaskExit{std::nullopt, std::nullopt, "its supervisor on the node died"});
  }
}

void TaskRunner::check() {
  // Supervisors of a previous agent are not this agent's children: their death is
  // noticed here instead (the current one's by reaping it).
  std::set<int64_t> gone;
  for (const auto& [_, task] : tasks_) {
    int64_t pid = task->supervisor_pid;
    if (pid > 0 && pid != supervisor_.pid() && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) gone.insert(pid);
  }
  for (int64_t pid : gone) end_tasks_of_lost_supervisor(pid);
}

void TaskRunner::track(const std::shared_ptr<Task>& task) {
  if (task->output_fd < 0) task->output_fd = ::open((task->dir + "/output.log").c_str(), O_RDONLY | O_CLOEXEC);
  tasks_[task->id] = task;
  files_.follow(task->id, task->dir);
}

void TaskRunner::finish(const std::shared_ptr<Task>& task, const api::TaskExit& exit) {
  if (task->finished) return;
  task->finished = true;
  if (task->kill_timer) {
    task->kill_timer->cancel();
    // Stopped while its engine was still creating the container, the client may exit 0
    // and leave the container created, never started: a stopped task's is removed here
    // whatever its exit code said.
    remove_container(*task);
  }
  files_.stop(task->id);
  tasks_.erase(task->id);
  api::TaskExit ended = exit;
  if (ended.out_of_memory) ended.memory_limit_bytes = task->memory_limit_bytes;
  if (events_.on_exit) events_.on_exit(task->id, ended);
}

Result<std::map<std::string, std::string>> TaskRunner::identity(const std::string& owner) {
  std::map<std::string, std::string> env;
  if (!accounts_) return env;
  auto account = accounts_->for_owner(owner);
  if (!account.ok()) return account.error();
  if (account.value()) {
    env["HOME"] = account.value()->home;
    env["USER"] = account.value()->name;
    env["LOGNAME"] = account.value()->name;
  }
  return env;
}

Result<int64_t> TaskRunner::launch(const LaunchSpec& spec) {
  if (tasks_.count(spec.id)) {
    return Error{ErrorCode::kConflict, "task " + spec.id.to_string() + " is already running"};
  }
  auto account = accounts_ ? accounts_->for_owner(spec.owner) : Result<std::optional<TaskUser>>(std::nullopt);
  if (!account.ok()) return account.error();
  const std::optional<TaskUser>& task_user = account.value();
  std::error_code fs_error;
  // One rename or mkdir when the parent exists (the common case): mkdir is slow on
  // some disks. The task's own folder may be a spare another task left empty.
  // The task's own folder comes from the pool already the task's (its account's, 0700);
  // a folder made here otherwise is handed over below (a package's is handed over
  // whole when it is unpacked).
  const bool own_folder = spec.working_dir == own_working_dir(folders_.data_dir(), spec.id);
  const int made = own_folder
                       ? (task_user ? folders_.make_working_dir(spec.working_dir, task_user->uid, task_user->gid, 0700)
                                    : folders_.make_working_dir(spec.working_dir, ::geteuid(), ::getegid(), 0755))
                       : (::mkdir(spec.working_dir.c_str(), 0755) == 0 ? 0 : errno);
  bool made_working_dir = made == 0;
  if (!made_working_dir && made != EEXIST) {
    fs::create_directories(spec.working_dir, fs_error);
    if (fs_error) return internal_error("cannot create working directory " + spec.working_dir + ": " + fs_error.message());
    made_working_dir = true;
  }
  if (task_user && made_working_dir && !(own_folder && made == 0)) {
    ::chmod(spec.working_dir.c_str(), 0700);
    if (Status s = give_to_task_user(spec.working_dir, *task_user, false); !s) return s.error();
  }
  auto task = std::make_shared<Task>();
  task->account = task_user;
  task->id = spec.id;
  task->dir = folders_.task_dir(spec.id);
  task->marker = spec.id.job_id + "." + std::to_string(spec.id.attempt) + "." +
                 std::to_string(spec.id.task_index) + "." + random_hex(4);
  folders_.release_task_dir(task->dir);  // a relaunch after a lost launch starts clean
  const std::string group_name = fs::path(task->dir).filename().string();
  // On v1 the supervisor makes a host task's groups with it: a ready-made process's
  // spare groups become them (worker/warm_task.h).
  const bool supervisor_makes_groups = groups_by_supervisor_ && !spec.container;
  task->cgroup =
      supervisor_makes_groups ? cgroup_root_ + "/" + group_name : create_task_cgroup(cgroup_root_, group_name);
  LimitRoots roots = limits_;
  if (spec.container) {
    task->container = container_name(spec.id.job_id, spec.id.attempt, spec.id.task_index);
    task->engine_path = spec.container->engine.path;
    // The container goes below the task's own groups, and its caps on those groups;
    // without a tracking group the engine caps it itself.
    if (!task->cgroup.empty() && !limits_.tracking_base.empty()) {
      task->cgroup_parent = limits_.tracking_base + "/" + group_name;
      roots.memory = limits_.container_memory;
      roots.cpu = limits_.container_cpu;
    } else {
      roots.memory.clear();
      roots.cpu.clear();
    }
  }
  auto limit_groups = supervisor_makes_groups
                          ? Result<TaskLimitGroups>(plan_v1_limit_groups(roots, group_name, spec.limits))
                          : create_limit_groups(roots, task->cgroup, group_name, spec.limits);
  if (!limit_groups.ok()) {
    remove_cgroup(task->cgroup);
    return limit_groups.error();
  }
  task->limit_cgroups = limit_groups.value().extra;
  if (!limit_groups.value().memory.empty()) task->memory_limit_bytes = spec.limits.memory_bytes;
  if (int err = folders_.make_task_dir(task->dir); err != 0) {
    task->remove_groups();
    return internal_error("cannot create " + task->dir + ": " + std::strerror(err));
  }

  // The task's exec, for the supervisor to start.
  LaunchRequest request;
  request.task_dir = task->dir;
  request.working_dir = spec.working_dir;
  request.cgroup = task->cgroup;
  request.cgroup_home = limits_.home;
  // A container's caps hold the container (made below them by its engine), not the
  // engine's client: a client held to half a CPU would start the container late. Its
  // cleanup removes them.
  if (!spec.container) {
    request.limit_cgroups = task->limit_cgroups;
    request.limits = spec.limits;
    request.make_groups = supervisor_makes_groups;
  }
  request.memory_cgroup = limit_groups.value().memory;
  request.marker = task->marker;
  request.orphan_timeout_ms = spec.orphan_timeout_ms;
  request.argv = {"/bin/sh", "-c", spec.entrypoint};
  if (spec.container) {
    auto argv = container_argv(*task, spec);
    if (!argv.ok()) {
      folders_.release_task_dir(task->dir);
      task->remove_groups();
      return argv.error();
    }
    request.argv = std::move(argv.value());
    // Whoever ends it (the task itself, a stop, the supervisor after the agent was gone
    // too long), what its engine left goes then.
    request.cleanup_argv = task->container_cleanup_argv(limits_.mounts);
  }
  std::map<std::string, std::string> env = spec.env;
  if (stack_dumps_ && !spec.container) {
    if (Status s = stack_dumps_->arm(spec.id, task_user, env); !s) {
      spdlog::warn("task {}: `ag stack` will not see its Python processes: {}", spec.id.to_string(), s.error().message);
    }
  }
  for (const auto& [k, v] : env) {
    std::string entry = k;
    entry += '=';
    entry += v;
    request.envp.push_back(std::move(entry));
  }
  request.envp.push_back("AG_TASK_MARKER=" + task->marker);
  // A container's client runs as the agent (the images are the agent's); the container
  // itself runs as the task user (container_argv).
  // Who the task is, HOME included, is in its environment already (identity()).
  if (task_user && !spec.container) {
    request.run_as = LaunchRequest::RunAs{task_user->uid, task_user->gid, {}};
    for (gid_t g : task_user->groups) request.run_as->groups.push_back(g);
  }
  // One descriptor serves both sides: the task appends through it, the runner reads
  // from it by offset.
  int output_fd = ::open((task->dir + "/output.log").c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (output_fd < 0) return internal_error("cannot create " + task->dir + "/output.log: " + std::strerror(errno));
  auto started = supervisor_.launch(request, output_fd, folders_.data_dir() + "/agent.pid");
  if (!started.ok()) {
    ::close(output_fd);
    folders_.release_task_dir(task->dir);
    task->remove_groups();
    return started.error();
  }
  task->output_fd = output_fd;
  int64_t pid = started.value();
  int64_t supervisor = supervisor_.pid();
  task->supervisor_pid = supervisor;
  task->pid = pid;
  {
    // What a restarted agent needs to find the task again.
    const TaskRecord record{spec.id,          task->marker,        task->cgroup,        task->limit_cgroups,
                            task->memory_limit_bytes, task->container, task->engine_path, task->cgroup_parent,
                            supervisor,       pid};
    if (!write_small_file(task->dir + "/task.json", encode_task_record(record), 0644)) {
      spdlog::warn("cannot write {}/task.json ({}): a restarted agent will not find task {}", task->dir,
                   std::strerror(errno), spec.id.to_string());
    }
  }
  // An end recorded already is reported from the io_context.
  track(task);
  if (events_.on_output) events_.on_output(task->id);  // whatever it wrote before the watch existed
  return pid;
}

std::vector<TaskRunner::Recovered> TaskRunner::recover() {
  std::vector<Recovered> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(folders_.data_dir() + "/tasks", ec)) {
    std::ifstream state_in(entry.path() / "task.json");
    std::stringstream text;
    text << state_in.rdbuf();
    auto record = decode_task_record(text.str());
    if (!record) {
      end_unrecorded_launch(entry.path().filename().string());
      fs::remove_all(entry.path(), ec);
      continue;
    }
    auto task = std::make_shared<Task>();
    task->id = record->id;
    task->dir = entry.path().string();
    task->marker = record->marker;
    task->cgroup = record->cgroup;
    task->limit_cgroups = record->limit_cgroups;
    task->memory_limit_bytes = record->memory_limit_bytes;
    task->container = record->container;
    task->engine_path = record->engine_path;
    task->cgroup_parent = record->cgroup_parent;
    const int64_t supervisor = record->supervisor_pid;
    task->supervisor_pid = supervisor;
    task->pid = record->pid;
    Recovered r{task->id, task->pid, std::nullopt};
    if (fs::exists(entry.path() / "exit")) {
      r.exit = read_exit_record(task->dir).value_or(api::TaskExit{});
      if (r.exit->out_of_memory) r.exit->memory_limit_bytes = task->memory_limit_bytes;
      remove_container(*task);
    } else if (supervisor <= 0 || ::kill(static_cast<pid_t>(supervisor), 0) != 0) {
      // Its supervisor is gone without recording an end: nothing may outlive it.
      for (int pid : cgroup_pids(task->cgroup)) ::kill(pid, SIGKILL);
      for (int pid : find_marked_processes(task->marker)) ::kill(pid, SIGKILL);
      task->remove_groups();
      remove_container(*task);
      r.exit = api::TaskExit{std::nullopt, std::nullopt, "its supervisor on the node died"};
    }
    if (!r.exit) {
      // Its output is sent from where the head asks (log_resume) on.
      track(task);
      spdlog::info("adopted task {} (pid {}) left running by the previous agent", task->id.to_string(), task->pid);
    }
    found.push_back(std::move(r));
  }
  return found;
}

void TaskRunner::end_unrecorded_launch(const std::string& folder_name) {
  // The head sends the launch again (the registration does not list it): a first copy
  // left running would run beside it, in the group of the same name, and its end would
  // take the second copy's processes with it. Nothing of it may outlive this.
  if (cgroup_root_.empty()) return;
  const std::string group = cgroup_root_ + "/" + folder_name;
  size_t ended = 0;
  for (int round = 0; round < 200; ++round) {  // 2 s at most: SIGKILL is not refused
    const std::vector<int> pids = cgroup_pids(group);
    if (pids.empty()) break;
    if (round == 0) ended = pids.size();
    for (int pid : pids) ::kill(pid, SIGKILL);
    ::usleep(10000);
  }
  if (ended > 0) {
    spdlog::warn(
        "task folder {}: the previous agent started its task without recording it; ended its {} process(es) "
        "(the head sends the launch again)",
        folder_name, ended);
  }
}

void TaskRunner::forget(const api::TaskKey& id) {
  if (tasks_.count(id)) return;  // still running: keep its folder
  folders_.release_task_dir(folders_.task_dir(id));
  folders_.release_working_dir(id);
  if (stack_dumps_) stack_dumps_->forget(id);
}

void TaskRunner::signal_task(Task& task, int sig) {
  std::vector<int> listed = cgroup_pids(task.cgroup);
  for (int pid : find_marked_processes(task.marker)) listed.push_back(pid);
  signal_task_processes(static_cast<pid_t>(task.pid), listed, sig);
}

Result<std::vector<std::string>> TaskRunner::container_argv(const Task& task, const LaunchSpec& spec) const {
  const ContainerTask& c = *spec.container;
  // The task's environment goes in a file only the agent can read: on the command line
  // anyone on the node would see it.
  std::string env_text;
  auto add = [&env_text](const std::string& name, const std::string& value) -> Status {
    if (name.find_first_of("\n=") != std::string::npos || value.find('\n') != std::string::npos) {
      return invalid_argument("environment variable " + name.substr(0, 64) +
                              " holds a newline, which a container engine's environment file cannot carry");
    }
    env_text += name + "=" + value + "\n";
    return {};
  };
  std::map<std::string, std::string> env = c.env;
  std::vector<api::Mount> mounts = c.mounts;
  if (stack_dumps_) {
    if (Status s = stack_dumps_->arm_container(spec.id, task.account, env, mounts); !s) {
      spdlog::warn("task {}: `ag stack` will not see its Python processes: {}", spec.id.to_string(), s.error().message);
    }
  }
  for (const auto& [name, value] : env) {
    if (Status s = add(name, value); !s) return s.error();
  }
  if (Status s = add("AG_TASK_MARKER", task.marker); !s) return s.error();
  const std::string env_file = task.dir + "/container.env";
  {
    if (!write_small_file(env_file, env_text, 0600)) {
      return internal_error("cannot write " + env_file + ": " + std::strerror(errno));
    }
  }
  ContainerRun run;
  run.engine = c.engine;
  run.name = task.container;
  run.node_id = c.node_id;
  run.image = c.image;
  run.entrypoint = spec.entrypoint;
  run.working_dir = spec.working_dir;
  run.env_file = env_file;
  run.mounts = std::move(mounts);
  run.cgroup_parent = task.cgroup_parent;
  if (run.cgroup_parent.empty()) {
    run.memory_bytes = spec.limits.memory_bytes;
    run.cpu_millis = spec.limits.cpu_millis;
  }
  run.devices = c.devices;
  if (task.account) run.user = std::pair{task.account->uid, task.account->gid};
  // No higher than the node's own hard limits: engines that try more are refused on
  // hosts that deny raising them.
  rlimit files{}, procs{};
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0) {
    run.nofile_soft = files.rlim_cur;
    run.nofile_hard = files.rlim_max;
  }
  uint64_t pid_max = 32768;
  std::ifstream("/proc/sys/kernel/pid_max") >> pid_max;
  run.nproc = pid_max;
  if (::getrlimit(RLIMIT_NPROC, &procs) == 0 && procs.rlim_max != RLIM_INFINITY) {
    run.nproc = std::min<uint64_t>(pid_max, procs.rlim_max);
  }
  return container_run_args(run);
}

void TaskRunner::remove_container(const Task& task) {
  if (task.container.empty()) return;
  AsyncCommand::run(io_, task.container_cleanup_argv(limits_.mounts), nullptr, [](const AsyncCommand::Ended&) {});
}

Result<TaskLauncher::ExecTarget> TaskRunner::exec_target(const api::TaskKey& id) const {
  auto it = tasks_.find(id);
  if (it == tasks_.end() || it->second->finished) return not_found("task " + id.to_string() + " does not run on this node");
  const Task& task = *it->second;
  ExecTarget target{task.pid, {}, task.container, task.engine_path, {}};
  // A container's processes are in its engine's groups, below the task's: by marker.
  target.processes = task.cgroup.empty() || !task.container.empty() ? find_marked_processes(task.marker)
                                                                     : cgroup_pids(task.cgroup);
  if (!task.container.empty()) return target;  // the container is in the task's groups already
  if (!task.cgroup.empty()) target.cgroups.push_back(task.cgroup);
  for (const auto& group : task.limit_cgroups) target.cgroups.push_back(group);
  return target;
}

void TaskRunner::kill(const api::TaskKey& id, int64_t grace_ms) {
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
  std::vector<api::TaskKey> ids;
  for (const auto& [id, _] : tasks_) ids.push_back(id);
  for (const auto& id : ids) kill(id, grace_ms);
}

std::vector<TaskRunner::Running> TaskRunner::running() const {
  std::vector<Running> out;
  for (const auto& [id, task] : tasks_) out.push_back({id, task->pid, task->cgroup});
  return out;
}

}  // namespace ag::worker
