#include "worker/stack_dumps.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/steady_timer.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace ag::worker {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;

// Run by every Python process of a task at start (PYTHONPATH). It must not fail the
// program: any error leaves the process unarmed, nothing else.
constexpr const char* kSiteCustomize = R"PY(# AetherGrid's hook for `ag stack`, put on a task's PYTHONPATH by its worker.
# On AG_STACK_SIGNAL this process writes the stacks of all its threads to
# $AG_STACK_DIR/PID.stack (faulthandler, from its C signal handler: a thread blocked in
# native code answers too). Nothing else changes; the sitecustomize this file shadows,
# if there is one, runs next as it would have.
import os
import sys

_ag_stack_file = None


def _ag_arm_stacks():
    global _ag_stack_file
    folder = os.environ.get("AG_STACK_DIR")
    number = os.environ.get("AG_STACK_SIGNAL")
    if not folder or not number:
        return
    try:
        import atexit
        import faulthandler
        os.makedirs(folder, mode=0o700, exist_ok=True)  # the first Python process of the task makes it
        path = os.path.join(folder, "%d.stack" % os.getpid())
        stack_file = open(path, "w")
        faulthandler.register(int(number), file=stack_file, all_threads=True, chain=False)
        _ag_stack_file = stack_file  # faulthandler keeps only its descriptor
        atexit.register(_ag_forget, path, os.getpid())  # short-lived processes leave no file behind
    except Exception:
        pass


def _ag_forget(path, pid):
    if os.getpid() != pid:  # a forked child exiting: the file is its parent's
        return
    try:
        os.unlink(path)
    except OSError:
        pass


def _ag_next_sitecustomize():
    here = os.path.dirname(os.path.abspath(__file__))
    import importlib.machinery
    rest = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    import importlib.util
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


_ag_arm_stacks()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_ag_arm_stacks)  # a forked child writes its own file
_ag_next_sitecustomize()
)PY";

constexpr int kPollMs = 25;

struct ProcessInfo {
  int pid = 0;
  int own_pid = 0;  // its number in its own pid namespace (a container's), the file's name
  int ppid = 0;
  char state = '?';
  uid_t uid = 0;
  std::string command;
  bool armed = false;
};

ProcessInfo read_process(int pid, int signal) {
  ProcessInfo p;
  p.pid = pid;
  p.own_pid = pid;
  const std::string proc = "/proc/" + std::to_string(pid);
  std::ifstream status(proc + "/status");
  for (std::string line; std::getline(status, line);) {
    std::istringstream fields(line);
    std::string key;
    fields >> key;
    if (key == "State:") fields >> p.state;
    if (key == "PPid:") fields >> p.ppid;
    if (key == "Uid:") fields >> p.uid;
    if (key == "NSpid:") {
      for (int n; fields >> n;) p.own_pid = n;  // the innermost
    }
    if (key == "SigCgt:") {
      std::string mask;
      fields >> mask;
      const unsigned long long bits = std::strtoull(mask.c_str(), nullptr, 16);
      p.armed = signal >= 1 && signal <= 64 && (bits >> (signal - 1)) & 1;
    }
  }
  std::ifstream cmdline(proc + "/cmdline", std::ios::binary);
  for (std::string arg; std::getline(cmdline, arg, '\0');) p.command += (p.command.empty() ? "" : " ") + arg;
  if (p.command.size() > 300) p.command = p.command.substr(0, 300) + " ...";
  return p;
}

// The processes as a tree (children under their parents, in pid order).
std::string process_tree(const std::vector<ProcessInfo>& processes) {
  std::map<int, std::vector<const ProcessInfo*>> children;
  std::map<int, bool> present;
  for (const auto& p : processes) present[p.pid] = true;
  for (const auto& p : processes) children[present.count(p.ppid) ? p.ppid : 0].push_back(&p);
  std::string out = "    PID  STATE  COMMAND\n";
  std::function<void(int, int)> walk = [&](int parent, int depth) {
    auto it = children.find(parent);
    if (it == children.end()) return;
    for (const ProcessInfo* p : it->second) {
      char head[32];
      std::snprintf(head, sizeof head, "%7d  %c      ", p->pid, p->state);
      out += head + std::string(static_cast<size_t>(depth) * 2, ' ') + p->command + "\n";
      walk(p->pid, depth + 1);
    }
  };
  walk(0, 0);
  return out;
}

off_t file_size(int fd) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 ? st.st_size : -1;
}

// One armed process being asked: its file, and how far it had been written.
struct Probe {
  ProcessInfo process;
  int fd = -1;
  off_t before = 0;
  off_t last = 0;
  bool settled = false;
  std::string note;  // why it could not be asked
};

class Take : public std::enable_shared_from_this<Take> {
 public:
  Take(asio::io_context& io, api::StackRequest request, std::function<void(api::StackReport)> done)
      : timer_(io), request_(std::move(request)), done_(std::move(done)) {}
  ~Take() {
    for (auto& probe : probes_) {
      if (probe.fd >= 0) ::close(probe.fd);
    }
  }

  void start(const std::string& dir, const std::vector<int>& pids) {
    const int signal = StackDumps::signal_number();
    for (int pid : pids) {
      ProcessInfo process = read_process(pid, signal);
      if (process.command.empty()) continue;  // gone, or a kernel thread
      processes_.push_back(process);
      if (!process.armed) continue;
      Probe probe;
      probe.process = process;
      probe.fd = open_stack_file(dir, process, &probe.note);
      if (probe.fd >= 0) {
        probe.before = probe.last = file_size(probe.fd);
        if (::kill(pid, signal) != 0) probe.note = std::string("cannot signal it: ") + std::strerror(errno);
      }
      probes_.push_back(std::move(probe));
    }
    deadline_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(StackDumps::kAnswerMs);
    poll();
  }

 private:
  // The process's stack file: a plain file of its own user's, never a link.
  static int open_stack_file(const std::string& dir, const ProcessInfo& process, std::string* note) {
    if (dir.empty()) {
      *note = "its stack file is missing (no Python process of the task armed itself)";
      return -1;
    }
    const std::string path = dir + "/" + std::to_string(process.own_pid) + ".stack";
    const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    struct stat st {};
    if (fd < 0 || ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != process.uid) {
      if (fd >= 0) ::close(fd);
      *note = "armed for another task's hook, or its stack file is missing";
      return -1;
    }
    return fd;
  }

  void poll() {
    bool waiting = false;
    for (auto& probe : probes_) {
      if (probe.fd < 0 || probe.settled || !probe.note.empty()) continue;
      const off_t size = file_size(probe.fd);
      probe.settled = size > probe.before && size == probe.last;
      probe.last = size;
      waiting = waiting || !probe.settled;
    }
    if (!waiting || std::chrono::steady_clock::now() >= deadline_) return finish();
    timer_.expires_after(std::chrono::milliseconds(kPollMs));
    timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (!ec) self->poll();
    });
  }

  void finish() {
    api::StackReport report;
    report.request = request_.request;
    report.task = request_.task;
    for (auto& probe : probes_) {
      report.text += "Process " + std::to_string(probe.process.pid) + ": " + probe.process.command + "\n";
      if (!probe.note.empty()) {
        report.text += "  (" + probe.note + ")\n\n";
        continue;
      }
      if (probe.last <= probe.before) {
        report.text += "  (no answer within " + std::to_string(StackDumps::kAnswerMs / 1000) +
                       " s: it is stopped, or its signals are blocked)\n\n";
        continue;
      }
      report.python = true;
      const size_t length = std::min<size_t>(static_cast<size_t>(probe.last - probe.before), StackDumps::kProcessBytes);
      std::string text(length, '\0');
      const ssize_t n = ::pread(probe.fd, text.data(), length, probe.before);
      text.resize(n > 0 ? static_cast<size_t>(n) : 0);
      report.text += text + (text.empty() || text.back() == '\n' ? "" : "\n") + "\n";
    }
    if (!report.python) {
      report.text = (processes_.empty() ? "The task has no process left.\n"
                                        : "No Python process of this task answered: it runs no Python, or its Python "
                                          "started without the hook (-I, -E or -S, or another PYTHONPATH).\n") +
                    (report.text.empty() ? "" : "\n" + report.text) +
                    (processes_.empty() ? "" : "\nIts processes:\n" + process_tree(processes_));
    }
    if (report.text.size() > StackDumps::kReportBytes) {
      report.text = report.text.substr(0, StackDumps::kReportBytes) + "\n... (cut at 1 MiB)\n";
    }
    done_(std::move(report));
  }

  asio::steady_timer timer_;
  api::StackRequest request_;
  std::function<void(api::StackReport)> done_;
  std::vector<ProcessInfo> processes_;
  std::vector<Probe> probes_;
  std::chrono::steady_clock::time_point deadline_;
};

}  // namespace

int StackDumps::signal_number() { return SIGRTMIN + 6; }

Result<std::unique_ptr<StackDumps>> StackDumps::create(asio::io_context& io, const std::string& data_dir) {
  const std::string hook = data_dir + "/python-hook";
  std::error_code ec;
  fs::create_directories(hook, ec);
  if (ec) return internal_error("cannot create " + hook + ": " + ec.message());
  const std::string file = hook + "/sitecustomize.py";
  {
    std::ofstream out(file + ".new", std::ios::trunc);
    out << kSiteCustomize;
    if (!out.flush()) return internal_error("cannot write " + file);
  }
  fs::rename(file + ".new", file, ec);
  if (ec) return internal_error("cannot write " + file + ": " + ec.message());
  ::chmod(hook.c_str(), 0755);
  ::chmod(file.c_str(), 0644);
  const std::string stacks = data_dir + "/stacks";
  fs::create_directories(stacks, ec);
  if (ec) return internal_error("cannot create " + stacks + ": " + ec.message());
  ::chmod(stacks.c_str(), 0711);  // each user's folder inside is theirs alone
  return std::unique_ptr<StackDumps>(new StackDumps(io, data_dir));
}

std::string StackDumps::task_name(const api::TaskKey& task) {
  return task.job_id + "." + std::to_string(task.attempt) + "." + std::to_string(task.task_index);
}

std::string StackDumps::find_task_dir(const api::TaskKey& task) const {
  struct stat st {};
  // Armed by this agent: where it was named, and nowhere else.
  if (auto armed = armed_.find(task); armed != armed_.end()) {
    return ::lstat(armed->second.c_str(), &st) == 0 && S_ISDIR(st.st_mode) ? armed->second : "";
  }
  const std::string stacks = data_dir_ + "/stacks/";
  const std::string name = task_name(task);
  // A task armed by an agent before user folders existed.
  if (::lstat((stacks + name).c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return stacks + name;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(stacks, ec)) {
    const std::string candidate = entry.path().string() + "/" + name;
    if (entry.path().filename().string().rfind("u", 0) == 0 && ::lstat(candidate.c_str(), &st) == 0 &&
        S_ISDIR(st.st_mode)) {
      return candidate;
    }
  }
  return "";
}

Result<std::string> StackDumps::user_dir(const std::optional<TaskUser>& user) {
  const uid_t uid = user ? user->uid : ::geteuid();
  const std::string dir = data_dir_ + "/stacks/u" + std::to_string(uid);
  if (made_.count(uid)) return dir;
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return internal_error("cannot create " + dir + ": " + std::strerror(errno));
  }
  if (user && ::chown(dir.c_str(), user->uid, user->gid) != 0) {
    return internal_error("cannot give " + dir + " to " + user->name + ": " + std::strerror(errno));
  }
  made_.insert(uid);
  return dir;
}

Result<std::string> StackDumps::task_dir_for(const api::TaskKey& task, const std::optional<TaskUser>& user) {
  auto parent = user_dir(user);
  if (!parent.ok()) return parent.error();
  const std::string dir = parent.value() + "/" + task_name(task);
  std::error_code ec;
  fs::remove_all(dir, ec);  // a relaunch starts clean
  armed_[task] = dir;
  return dir;
}

void StackDumps::name_in_env(std::map<std::string, std::string>& env, const std::string& dir, const std::string& hook) {
  env["AG_STACK_DIR"] = dir;
  env["AG_STACK_SIGNAL"] = std::to_string(signal_number());
  auto path = env.find("PYTHONPATH");
  // Last: the task's own entries keep their places (and a sitecustomize of its own wins).
  env["PYTHONPATH"] = (path != env.end() && !path->second.empty() ? path->second + ":" : "") + hook;
}

Status StackDumps::arm(const api::TaskKey& task, const std::optional<TaskUser>& user,
                       std::map<std::string, std::string>& env) {
  // Made by the task's first Python process: a task that runs none costs no folder.
  auto dir = task_dir_for(task, user);
  if (!dir.ok()) return dir.error();
  name_in_env(env, dir.value(), data_dir_ + "/python-hook");
  return {};
}

Status StackDumps::arm_container(const api::TaskKey& task, const std::optional<TaskUser>& user,
                                 std::map<std::string, std::string>& env, std::vector<api::Mount>& mounts) {
  // Mounted into the container: made now.
  auto dir = task_dir_for(task, user);
  if (!dir.ok()) return dir.error();
  if (::mkdir(dir.value().c_str(), 0700) != 0) {
    return internal_error("cannot create " + dir.value() + ": " + std::strerror(errno));
  }
  if (user && ::chown(dir.value().c_str(), user->uid, user->gid) != 0) {
    return internal_error("cannot give " + dir.value() + " to " + user->name + ": " + std::strerror(errno));
  }
  mounts.push_back({data_dir_ + "/python-hook", kContainerHook, true});
  mounts.push_back({dir.value(), kContainerStacks, false});
  name_in_env(env, kContainerStacks, kContainerHook);
  return {};
}

void StackDumps::forget(const api::TaskKey& task) {
  std::error_code ec;
  for (std::string dir; !(dir = find_task_dir(task)).empty();) {
    if (fs::remove_all(dir, ec) == 0 || ec) break;
  }
  armed_.erase(task);
}

void StackDumps::take(const api::StackRequest& request, std::vector<int> pids,
                      std::function<void(api::StackReport)> done) {
  std::sort(pids.begin(), pids.end());
  std::make_shared<Take>(io_, request, std::move(done))->start(find_task_dir(request.task), pids);
}

}  // namespace ag::worker
