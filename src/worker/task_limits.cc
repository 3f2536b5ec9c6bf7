#include "worker/task_limits.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace ag::worker {
namespace {

constexpr int64_t kCfsPeriodUs = 100000;

bool exists(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Writes `value` into a control file; "" when it took, else why not.
std::string write_control(const std::string& path, const std::string& value) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return path + ": " + std::strerror(errno);
  std::string error;
  if (::write(fd, value.data(), value.size()) != static_cast<ssize_t>(value.size())) {
    error = path + ": " + std::strerror(errno);
  }
  ::close(fd);
  return error;
}

bool make_dir(const std::string& path) { return ::mkdir(path.c_str(), 0755) == 0 || errno == EEXIST; }

// "/a//b/" -> "/a/b"
std::string join_path(const std::string& a, const std::string& b) {
  std::string out = a + "/" + b;
  std::string clean;
  for (char c : out) {
    if (c == '/' && !clean.empty() && clean.back() == '/') continue;
    clean.push_back(c);
  }
  while (clean.size() > 1 && clean.back() == '/') clean.pop_back();
  return clean;
}

std::vector<std::string> split(std::string_view text, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == sep) {
      out.emplace_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

// Makes <mount><own group>/aethergrid/<node> in a v1 hierarchy with `controller`, and
// checks a group made there takes `probe_file`; "" when it cannot be used.
std::string v1_root(const std::vector<CgroupMount>& mounts, const std::string& own_cgroups,
                    const std::string& controller, const std::string& node_id, const std::string& probe_file) {
  for (const auto& mount : mounts) {
    if (mount.version != 1 || !mount.controllers.count(controller)) continue;
    std::string base = join_path(mount.path, own_cgroup_path(own_cgroups, controller));
    std::string root = join_path(base, "aethergrid");
    if (!make_dir(root)) return "";
    root = join_path(root, node_id);
    if (!make_dir(root)) return "";
    std::string probe = join_path(root, "probe");
    if (!make_dir(probe)) return "";
    bool usable = ::access(join_path(probe, probe_file).c_str(), W_OK) == 0 &&
                  ::access((probe + "/cgroup.procs").c_str(), W_OK) == 0;
    ::rmdir(probe.c_str());
    return usable ? root : "";
  }
  return "";
}

}  // namespace

std::vector<CgroupMount> parse_cgroup_mounts(std::string_view mountinfo) {
  // <id> <parent> <major:minor> <root> <mount point> <options> [optional...] - <type> <source> <super options>
  std::vector<CgroupMount> out;
  for (const auto& line : split(mountinfo, '\n')) {
    auto fields = split(line, ' ');
    auto dash = std::find(fields.begin(), fields.end(), "-");
    if (fields.size() < 5 || dash == fields.end() || dash + 1 == fields.end()) continue;
    const std::string& type = *(dash + 1);
    if (type != "cgroup" && type != "cgroup2") continue;
    CgroupMount mount;
    mount.path = fields[4];
    mount.version = type == "cgroup2" ? 2 : 1;
    if (mount.version == 1 && fields.end() - dash > 3) {
      for (const auto& option : split(*(dash + 3), ',')) mount.controllers.insert(option);
    }
    out.push_back(std::move(mount));
  }
  return out;
}

std::string own_cgroup_path(std::string_view proc_cgroup, const std::string& controller) {
  // <hierarchy id>:<controllers, comma-separated>:<path>; v2's line is "0::<path>".
  for (const auto& line : split(proc_cgroup, '\n')) {
    size_t first = line.find(':');
    size_t second = first == std::string::npos ? std::string::npos : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    std::string controllers = line.substr(first + 1, second - first - 1);
    std::string path = line.substr(second + 1);
    if (controller.empty()) {
      if (controllers.empty() && line.substr(0, first) == "0") return path;
      continue;
    }
    for (const auto& name : split(controllers, ',')) {
      if (name == controller) return path;
    }
  }
  return "";
}

std::string cfs_quota_text(int64_t cpu_millis) {
  return std::to_string(std::max<int64_t>(1000, cpu_millis * kCfsPeriodUs / 1000));
}

std::string cpu_max_text(int64_t cpu_millis) { return cfs_quota_text(cpu_millis) + " " + std::to_string(kCfsPeriodUs); }

int64_t parse_oom_kills(std::string_view text) {
  for (const auto& line : split(text, '\n')) {
    if (line.rfind("oom_kill ", 0) == 0) return std::atoll(line.c_str() + 9);
  }
  return 0;
}

LimitRoots prepare_limit_roots(const std::string& node_id, const std::string& tracking_root) {
  LimitRoots roots;
  const std::string own = read_text("/proc/self/cgroup");
  const auto mounts = parse_cgroup_mounts(read_text("/proc/self/mountinfo"));
  if (!tracking_root.empty() && exists(tracking_root + "/cgroup.controllers")) {
    // v2: the controllers must be handed down from the mount to the task groups, and
    // no process may stay in a group that hands them on: the supervisor waits in a
    // leaf of its own.
    const CgroupMount* unified = nullptr;
    for (const auto& mount : mounts) {
      if (mount.version == 2 && tracking_root.rfind(mount.path + "/", 0) == 0) unified = &mount;
    }
    std::string home = join_path(tracking_root, "supervisor");
    if (unified && make_dir(home)) {
      std::vector<std::string> chain = {unified->path};
      for (const auto& part : split(tracking_root.substr(unified->path.size()), '/')) {
        if (!part.empty()) chain.push_back(join_path(chain.back(), part));
      }
      for (const char* controller : {"+memory", "+cpu"}) {
        for (const auto& group : chain) write_control(group + "/cgroup.subtree_control", controller);
      }
      std::string enabled = read_text(tracking_root + "/cgroup.subtree_control");
      auto has = [&](const std::string& name) {
        for (const auto& word : split(enabled, ' ')) {
          if (word == name || word == name + "\n") return true;
        }
        return false;
      };
      roots.unified = true;
      roots.home = home;
      if (has("memory")) roots.memory = tracking_root;
      if (has("cpu")) roots.cpu = tracking_root;
    }
  } else {
    roots.memory = v1_root(mounts, own, "memory", node_id, "memory.limit_in_bytes");
    roots.cpu = v1_root(mounts, own, "cpu", node_id, "cpu.cfs_quota_us");
  }
  // Where containers' groups go, relative to each hierarchy.
  size_t longest = 0;  // the tracking root's own mount is the longest that holds it
  for (const auto& mount : mounts) {
    roots.mounts.push_back(mount.path);
    if (!tracking_root.empty() && tracking_root.rfind(mount.path + "/", 0) == 0 && mount.path.size() > longest) {
      longest = mount.path.size();
      roots.tracking_base = tracking_root.substr(mount.path.size());
    }
  }
  if (roots.unified) {
    roots.container_memory = roots.memory;
    roots.container_cpu = roots.cpu;
  } else if (!roots.tracking_base.empty()) {
    for (auto [controller, out] : {std::pair{"memory", &roots.container_memory}, std::pair{"cpu", &roots.container_cpu}}) {
      if (std::string(controller) == "memory" ? roots.memory.empty() : roots.cpu.empty()) continue;
      for (const auto& mount : mounts) {
        if (mount.version != 1 || !mount.controllers.count(controller)) continue;
        std::string path = mount.path;
        bool made = true;
        for (const auto& part : split(roots.tracking_base, '/')) {
          if (part.empty()) continue;
          path = join_path(path, part);
          made = made && make_dir(path);
        }
        if (made) *out = path;
      }
    }
  }
  const char* version = roots.unified ? "cgroup v2" : "cgroup v1";
  if (!roots.memory.empty() && !roots.cpu.empty()) {
    roots.summary = std::string("memory, cpu (") + version + ")";
  } else if (!roots.memory.empty()) {
    roots.summary = std::string("memory (") + version + "); cpu not enforced: no writable cpu controller";
  } else if (!roots.cpu.empty()) {
    roots.summary = std::string("cpu (") + version + "); memory not enforced: no writable memory controller";
  } else {
    roots.summary = "not enforced: no writable memory or cpu cgroup controller";
  }
  return roots;
}

namespace {

std::string write_v1_memory_cap(const std::string& group, int64_t bytes) {
  // Swap must not let the task past its cap either (memsw is absent without swap
  // accounting); memsw may never be below the plain limit, hence the order.
  const std::string text = std::to_string(bytes);
  write_control(group + "/memory.memsw.limit_in_bytes", "-1");
  std::string error = write_control(group + "/memory.limit_in_bytes", text);
  write_control(group + "/memory.memsw.limit_in_bytes", text);
  return error;
}

std::string write_v1_cpu_cap(const std::string& group, int64_t cpu_millis) {
  std::string error = write_control(group + "/cpu.cfs_period_us", std::to_string(kCfsPeriodUs));
  return error.empty() ? write_control(group + "/cpu.cfs_quota_us", cfs_quota_text(cpu_millis)) : error;
}

}  // namespace

TaskLimitGroups plan_v1_limit_groups(const LimitRoots& roots, const std::string& name, const TaskLimits& limits) {
  TaskLimitGroups out;
  if (limits.memory_bytes > 0 && !roots.memory.empty()) {
    out.memory = join_path(roots.memory, name);
    out.extra.push_back(out.memory);
  }
  if (limits.cpu_millis > 0 && !roots.cpu.empty()) out.extra.push_back(join_path(roots.cpu, name));
  return out;
}

std::string v1_caps_key(const TaskLimits& limits) {
  return "memory " + std::to_string(limits.memory_bytes) + ", cpu " + std::to_string(limits.cpu_millis);
}

std::string write_v1_caps(const std::string& group, const TaskLimits& limits) {
  struct stat st {};
  std::string error;
  if (limits.memory_bytes > 0 && ::stat((group + "/memory.limit_in_bytes").c_str(), &st) == 0) {
    error = write_v1_memory_cap(group, limits.memory_bytes);
  }
  if (error.empty() && limits.cpu_millis > 0 && ::stat((group + "/cpu.cfs_quota_us").c_str(), &st) == 0) {
    error = write_v1_cpu_cap(group, limits.cpu_millis);
  }
  return error;
}

Result<TaskLimitGroups> create_limit_groups(const LimitRoots& roots, const std::string& tracking_group,
                                            const std::string& name, const TaskLimits& limits) {
  TaskLimitGroups out;
  std::vector<std::string> made;
  auto fail = [&](const std::string& why) -> Result<TaskLimitGroups> {
    for (const auto& group : made) ::rmdir(group.c_str());
    return internal_error("cannot apply the task's limits: " + why);
  };
  auto group_for = [&](const std::string& root) -> std::string {
    if (roots.unified) return tracking_group;
    std::string group = join_path(root, name);
    if (::mkdir(group.c_str(), 0755) == 0) made.push_back(group);
    else if (errno != EEXIST) return "";
    return group;
  };
  if (limits.memory_bytes > 0 && !roots.memory.empty()) {
    std::string group = group_for(roots.memory);
    if (group.empty()) return fail("cannot create a memory group under " + roots.memory + ": " + std::strerror(errno));
    const std::string bytes = std::to_string(limits.memory_bytes);
    std::string error;
    if (roots.unified) {
      error = write_control(group + "/memory.max", bytes);
      write_control(group + "/memory.swap.max", "0");  // not there without swap accounting
    } else {
      error = write_v1_memory_cap(group, limits.memory_bytes);
    }
    if (!error.empty()) return fail(error);
    out.memory = group;
    if (!roots.unified) out.extra.push_back(group);
  }
  if (limits.cpu_millis > 0 && !roots.cpu.empty()) {
    std::string group = group_for(roots.cpu);
    if (group.empty()) return fail("cannot create a cpu group under " + roots.cpu + ": " + std::strerror(errno));
    std::string error;
    if (roots.unified) {
      error = write_control(group + "/cpu.max", cpu_max_text(limits.cpu_millis));
    } else {
      error = write_v1_cpu_cap(group, limits.cpu_millis);
    }
    if (!error.empty()) return fail(error);
    if (!roots.unified) out.extra.push_back(group);
  }
  return out;
}

int64_t oom_kills(const std::string& memory_group) {
  if (memory_group.empty()) return 0;
  std::string events = read_text(memory_group + "/memory.events");  // v2: counts the subtree
  if (!events.empty()) return parse_oom_kills(events);
  int64_t kills = parse_oom_kills(read_text(memory_group + "/memory.oom_control"));
  if (DIR* dir = ::opendir(memory_group.c_str())) {
    while (dirent* entry = ::readdir(dir)) {
      if (entry->d_type == DT_DIR && entry->d_name[0] != '.') kills += oom_kills(memory_group + "/" + entry->d_name);
    }
    ::closedir(dir);
  }
  return kills;
}

bool ran_out_of_memory(const std::string& memory_group, bool killed) {
  if (memory_group.empty()) return false;
  if (oom_kills(memory_group) > 0) return true;
  if (!killed) return false;
  // v1: a peak at the cap (within a page or two: charges go in pages and batches).
  const std::string peak = read_text(memory_group + "/memory.max_usage_in_bytes");
  const std::string cap = read_text(memory_group + "/memory.limit_in_bytes");
  if (peak.empty() || cap.empty()) return false;
  return std::atoll(peak.c_str()) >= std::atoll(cap.c_str()) - 64 * 1024;
}

}  // namespace ag::worker
