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
#include <cmath>
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
    if (!line.empty() && line.back() == '\r') line.pop_back();
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

std::string strip_terminal_codes(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\x1b' && i + 1 < text.size() && text[i + 1] == '[') {
      i += 2;
      while (i < text.size() && !std::isalpha(static_cast<unsigned char>(text[i]))) ++i;
      continue;
    }
    out.push_back(text[i]);
  }
  return out;
}

namespace {

// "23.7MiB", "409.0b", "1.2GiB", "57MB" -> bytes; nullopt for anything else.
std::optional<double> parse_size(const std::string& token) {
  size_t end = 0;
  while (end < token.size() && (std::isdigit(static_cast<unsigned char>(token[end])) || token[end] == '.')) ++end;
  if (end == 0) return std::nullopt;
  const double value = std::atof(token.substr(0, end).c_str());
  static const std::map<std::string, double> kUnits = {
      {"b", 1},          {"B", 1},          {"KiB", 1024.0},      {"MiB", 1048576.0},     {"GiB", 1073741824.0},
      {"kB", 1000.0},    {"KB", 1000.0},    {"MB", 1e6},          {"GB", 1e9},            {"TiB", 1099511627776.0}};
  auto unit = kUnits.find(token.substr(end));
  if (unit == kUnits.end()) return std::nullopt;
  return value * unit->second;
}

std::string with_thousands(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

}  // namespace

bool PullProgress::add(std::string_view line) {
  std::istringstream in(strip_terminal_codes(line));
  std::vector<std::string> tokens;
  for (std::string token; in >> token;) tokens.push_back(token);
  if (tokens.size() < 3 || tokens[0] != "Copying" || tokens[1] != "blob") return false;
  const std::string& blob = tokens[2];
  for (size_t i = 3; i + 2 < tokens.size(); ++i) {
    if (tokens[i + 1] != "/") continue;
    auto copied = parse_size(tokens[i]);
    auto total = parse_size(tokens[i + 2]);
    if (!copied || !total) return false;
    auto& entry = blobs_[blob];
    if (entry == std::pair{*copied, *total}) return false;
    entry = {*copied, *total};
    return true;
  }
  if (tokens.back() == "done") {
    auto it = blobs_.find(blob);
    if (it == blobs_.end() || it->second.first == it->second.second) return false;
    it->second.first = it->second.second;
    return true;
  }
  return false;
}

std::string PullProgress::text() const {
  if (blobs_.empty()) return "";
  double copied = 0, total = 0;
  for (const auto& [_, sizes] : blobs_) {
    copied += sizes.first;
    total += sizes.second;
  }
  constexpr double kMiB = 1048576.0;
  return with_thousands(static_cast<int64_t>(copied / kMiB)) + "/" +
         with_thousands(std::llround(total / kMiB)) + " MiB";
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
  auto progress = std::make_shared<PullProgress>();
  auto on_line = [this, image, last_note, progress](const std::string& raw) {
    const bool counted = progress->add(raw);
    const std::string line = strip_terminal_codes(raw);
    // Bytes when the engine shows them ("pulling IMAGE 412/1,630 MiB"), else its lines;
    // at most one note a second: a pull's output is many lines.
    if (!counted && (line.empty() || !progress->text().empty())) return;
    auto now = std::chrono::steady_clock::now();
    if (now - *last_note < std::chrono::seconds(1)) return;
    *last_note = now;
    const std::string note = counted ? "pulling " + image + " " + progress->text()
                                     : "pulling " + image + ": " + line.substr(0, 200);
    for (const auto& w : waiting_[image]) {
      if (w.on_progress) w.on_progress(note);
    }
  };
  for (const auto& w : waiting_[image]) {
    if (w.on_progress) w.on_progress("pulling " + image + " with " + engine_.summary());
  }
  // podman shows byte counts only to a terminal.
  const bool terminal = engine_.name == "podman";
  AsyncCommand::run(io_, {engine_.path, "pull", image}, on_line, [this, image, progress](const AsyncCommand::Ended& ended) {
    if (ended.exit_code == 0) {
      const std::string copied = progress->text();
      std::string note = "pulled " + image;
      note += " (" + copied + ")";
      for (const auto& w : waiting_[image]) {
        if (w.on_progress && !copied.empty()) w.on_progress(note);
      }
      return inspect(image, false);
    }
    std::string said = engine_error(strip_terminal_codes(ended.output));
    bool missing = said.find("not found") != std::string::npos || said.find("unknown") != std::string::npos ||
                   said.find("does not exist") != std::string::npos;
    finish(image, Error{missing ? ErrorCode::kNotFound : ErrorCode::kInternal,
                        engine_.name + " could not pull " + image + ": " + (said.empty() ? "exit " + std::to_string(ended.exit_code) : said)});
  }, terminal);
}

void ContainerImages::finish(const std::string& image, Result<ImageConfig> result) {
  if (result.ok()) known_[image] = result.value();
  auto waiters = std::move(waiting_[image]);
  waiting_.erase(image);
  for (auto& w : waiters) w.done(result);
}

}  // namespace ag::worker
