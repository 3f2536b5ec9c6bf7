#include "worker/container_engine.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>

#include "worker/async_command.h"

extern char** environ;

namespace ag::worker {
namespace {

namespace asio = boost::asio;

bool exists(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0;
}

// The first `name` on PATH that can be run, or "".
std::string find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "/usr/local/bin:/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (dir.empty()) continue;
    std::string candidate = dir;
    candidate += "/";
    candidate += name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// Runs a command to its end (at most `timeout_ms`); its exit code (-1 on a signal or a
// timeout) and output. Only for use before the agent reaps children itself.
int run_sync(std::vector<std::string> argv, int timeout_ms, std::string* output) {
  int fd = -1;
  pid_t pid = spawn_with_output(std::move(argv), &fd, output);
  if (pid == 0) return -1;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  char buf[4096];
  for (;;) {
    int left = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count());
    if (left <= 0) {
      ::kill(pid, SIGKILL);
      *output += " (no answer within " + std::to_string(timeout_ms / 1000) + " s)";
      break;
    }
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, left) <= 0) continue;
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    output->append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string first_line(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  return line.size() > 300 ? line.substr(0, 300) + "..." : line;
}

// The last lines of an engine's output, for a reason shown to people.
std::string tail_lines(const std::string& text, size_t max_lines) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) lines.push_back(line);
  }
  std::string out;
  for (size_t i = lines.size() > max_lines ? lines.size() - max_lines : 0; i < lines.size(); ++i) {
    out += (out.empty() ? "" : " / ") + lines[i];
  }
  return out.size() > 1000 ? out.substr(out.size() - 1000) : out;
}

// What an engine said went wrong: its last "Error: ..." line (the retries' warnings
// before it only repeat it), else its last lines.
std::string engine_error(const std::string& output) {
  std::istringstream in(output);
  std::string error;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Error: ", 0) == 0 || line.rfind("Error response", 0) == 0) error = line;
  }
  if (error.empty()) return tail_lines(output, 3);
  return error.size() > 1000 ? error.substr(0, 1000) + "..." : error;
}

}  // namespace

std::optional<ContainerEngine> detect_container_engine(const std::string& wanted, std::string* why_not) {
  if (wanted == "none") {
    *why_not = "the worker runs with --container-engine none";
    return std::nullopt;
  }
  std::vector<std::string> candidates;
  if (wanted == "auto" || wanted == "podman") candidates.push_back("podman");
  if (wanted == "auto" || wanted == "docker") candidates.push_back("docker");
  std::string reasons;
  for (const auto& name : candidates) {
    std::string path = find_on_path(name);
    if (path.empty()) {
      reasons += (reasons.empty() ? "" : "; ") + name + " is not installed";
      continue;
    }
    std::string output;
    // docker's client answers alone; only its daemon runs containers.
    int code = name == "podman" ? run_sync({path, "version", "--format", "{{.Client.Version}}"}, 10000, &output)
                                : run_sync({path, "version", "--format", "{{.Server.Version}}"}, 10000, &output);
    std::string version = first_line(output);
    if (code != 0 || version.empty()) {
      reasons += reasons.empty() ? "" : "; ";
      reasons += name + " does not answer (`" + name + " version`: ";
      reasons += version.empty() ? "exit " + std::to_string(code) : version;
      reasons += ")";
      continue;
    }
    return ContainerEngine{name, path, version};
  }
  *why_not = reasons.empty() ? "no engine named '" + wanted + "'" : reasons;
  return std::nullopt;
}

std::string container_name(const std::string& job_id, int attempt, int task_index) {
  return "ag-" + job_id + "-" + std::to_string(attempt) + "-" + std::to_string(task_index);
}

std::vector<std::string> container_run_args(const ContainerRun& run) {
  std::vector<std::string> args = {run.engine.path, "run", "--rm"};
  if (run.engine.name == "podman") args.push_back("--replace");  // what a lost launch left
  args.insert(args.end(), {"--name", run.name, "--label", "aethergrid.node=" + run.node_id,
                           // An init that passes signals on and reaps: the task's own
                           // process is not PID 1, which ignores SIGTERM.
                           "--init", "--network", "host", "--ipc", "host", "--pull", "never",
                           "--ulimit", "nofile=" + std::to_string(run.nofile_soft) + ":" + std::to_string(run.nofile_hard),
                           "--ulimit", "nproc=" + std::to_string(run.nproc) + ":" + std::to_string(run.nproc)});
  if (!run.cgroup_parent.empty()) {
    args.insert(args.end(), {"--cgroup-parent", run.cgroup_parent});
  } else {
    if (run.memory_bytes > 0) {
      args.insert(args.end(), {"--memory", std::to_string(run.memory_bytes), "--memory-swap",
                               std::to_string(run.memory_bytes)});
    }
    if (run.cpu_millis > 0) {
      args.insert(args.end(), {"--cpus", std::to_string(run.cpu_millis / 1000) + "." +
                                             std::to_string(1000 + run.cpu_millis % 1000).substr(1)});
    }
  }
  args.insert(args.end(), {"--env-file", run.env_file, "--volume", run.working_dir + ":" + run.working_dir,
                           "--workdir", run.working_dir});
  for (const auto& m : run.mounts) {
    args.insert(args.end(), {"--mount", "type=bind,source=" + m.source + ",target=" + m.target +
                                            (m.read_only ? ",readonly=true" : "")});
  }
  for (const auto& device : run.devices) args.insert(args.end(), {"--device", device});
  if (run.user) args.insert(args.end(), {"--user", std::to_string(run.user->first) + ":" + std::to_string(run.user->second)});
  args.insert(args.end(), {run.image, "/bin/sh", "-c", run.entrypoint});
  return args;
}

GpuDevices gpu_devices(const std::vector<int>& visible_gpu_ids, bool cdi, const std::vector<std::string>& control_nodes) {
  GpuDevices out;
  if (visible_gpu_ids.empty()) return out;
  for (size_t i = 0; i < visible_gpu_ids.size(); ++i) {
    const std::string id = std::to_string(visible_gpu_ids[i]);
    out.devices.push_back(cdi ? "nvidia.com/gpu=" + id : "/dev/nvidia" + id);
    out.visible += (i ? "," : "") + std::to_string(i);
  }
  if (!cdi) out.devices.insert(out.devices.end(), control_nodes.begin(), control_nodes.end());
  return out;
}

bool nvidia_cdi_present() {
  for (const char* dir : {"/etc/cdi", "/var/run/cdi"}) {
    for (const char* file : {"/nvidia.yaml", "/nvidia.json"}) {
      if (exists(std::string(dir) + file)) return true;
    }
  }
  return false;
}

std::vector<std::string> nvidia_control_nodes() {
  std::vector<std::string> out;
  for (const char* node : {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"}) {
    if (exists(node)) out.push_back(node);
  }
  return out;
}

std::optional<std::map<std::string, std::string>> parse_image_env(const std::string& json_text) {
  // An image without PATH (a bare root file system, imported) gets the one engines
  // give such containers.
  std::map<std::string, std::string> env{{"PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}};
  auto parsed = nlohmann::json::parse(json_text, nullptr, false);
  if (parsed.is_null()) return env;  // an image without Env
  if (!parsed.is_array()) return std::nullopt;
  for (const auto& item : parsed) {
    if (!item.is_string()) return std::nullopt;
    const std::string& entry = item.get_ref<const std::string&>();
    size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  return env;
}

ContainerImages::ContainerImages(asio::io_context& io, const std::optional<ContainerEngine>& engine)
    : io_(io), engine_(engine.value_or(ContainerEngine{})) {}

void ContainerImages::prepare(const std::string& image, std::function<void(const std::string&)> on_progress,
                              std::function<void(Result<ImageConfig>)> done) {
  if (engine_.name.empty()) {
    asio::post(io_, [done] {
      done(Error{ErrorCode::kUnavailable, "this node has no container engine (install podman or docker)"});
    });
    return;
  }
  if (auto it = known_.find(image); it != known_.end()) {
    asio::post(io_, [done, config = it->second] { done(config); });
    return;
  }
  auto& waiters = waiting_[image];
  waiters.push_back({std::move(on_progress), std::move(done)});
  if (waiters.size() == 1) inspect(image, true);
}

void ContainerImages::inspect(const std::string& image, bool pull_if_missing) {
  AsyncCommand::run(io_, {engine_.path, "image", "inspect", "--format", "{{json .Config.Env}}", image}, nullptr,
                    [this, image, pull_if_missing](const AsyncCommand::Ended& ended) {
                      if (ended.exit_code == 0) {
                        auto env = parse_image_env(ended.output);
                        if (!env) {
                          return finish(image, internal_error(engine_.name + " image inspect gave an environment "
                                                              "that is not a list of NAME=value: " +
                                                              tail_lines(ended.output, 2)));
                        }
                        return finish(image, ImageConfig{*env});
                      }
                      if (pull_if_missing) return pull(image);
                      finish(image, internal_error(engine_.name + " image inspect " + image + " failed: " +
                                                   engine_error(ended.output)));
                    });
}

void ContainerImages::pull(const std::string& image) {
  auto last_note = std::make_shared<std::chrono::steady_clock::time_point>();
  auto on_line = [this, image, last_note](const std::string& line) {
    // At most one note a second: a pull's output is many lines.
    auto now = std::chrono::steady_clock::now();
    if (now - *last_note < std::chrono::seconds(1)) return;
    *last_note = now;
    for (const auto& w : waiting_[image]) {
      if (w.on_progress) w.on_progress("pulling " + image + ": " + line.substr(0, 200));
    }
  };
  for (const auto& w : waiting_[image]) {
    if (w.on_progress) w.on_progress("pulling " + image + " with " + engine_.summary());
  }
  AsyncCommand::run(io_, {engine_.path, "pull", image}, on_line, [this, image](const AsyncCommand::Ended& ended) {
    if (ended.exit_code == 0) return inspect(image, false);
    std::string said = engine_error(ended.output);
    bool missing = said.find("not found") != std::string::npos || said.find("unknown") != std::string::npos ||
                   said.find("does not exist") != std::string::npos;
    finish(image, Error{missing ? ErrorCode::kNotFound : ErrorCode::kInternal,
                        engine_.name + " could not pull " + image + ": " + (said.empty() ? "exit " + std::to_string(ended.exit_code) : said)});
  });
}

void ContainerImages::finish(const std::string& image, Result<ImageConfig> result) {
  if (result.ok()) known_[image] = result.value();
  auto waiters = std::move(waiting_[image]);
  waiting_.erase(image);
  for (auto& w : waiters) w.done(result);
}

}  // namespace ag::worker
