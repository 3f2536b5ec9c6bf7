#include "worker/task_cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

namespace ag::worker {
namespace {

bool make_dir(const std::string& path) { return ::mkdir(path.c_str(), 0755) == 0 || errno == EEXIST; }

bool exists(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

std::string prepare_cgroup_root(const std::string& node_id, std::string* why_not) {
  std::vector<std::string> candidates;
  if (exists("/sys/fs/cgroup/cgroup.controllers")) candidates.push_back("/sys/fs/cgroup");  // v2
  candidates.push_back("/sys/fs/cgroup/pids");     // v1
  candidates.push_back("/sys/fs/cgroup/freezer");  // v1
  std::vector<std::string> reasons;
  for (const auto& hierarchy : candidates) {
    if (!exists(hierarchy + "/cgroup.procs")) continue;
    std::string root = hierarchy + "/aethergrid";
    bool made = make_dir(root);
    if (made) {
      root += "/" + node_id;
      made = make_dir(root);
    }
    if (!made) {
      reasons.push_back("cannot create " + root + ": " + std::strerror(errno));
      continue;
    }
    // A group that cannot be joined is no use: try with a probe group.
    std::string probe = create_task_cgroup(root, "probe");
    if (probe.empty()) {
      reasons.push_back("cannot create a task group in " + root + " with a writable cgroup.procs");
      continue;
    }
    remove_cgroup(probe);
    return root;
  }
  if (reasons.empty()) reasons.push_back("no cgroup v2 hierarchy, nor a v1 pids or freezer one, is mounted at /sys/fs/cgroup");
  std::string joined;
  for (const auto& reason : reasons) joined += (joined.empty() ? "" : "; ") + reason;
  if (why_not) *why_not = joined;
  return "";
}

std::string create_task_cgroup(const std::string& root, const std::string& name) {
  if (root.empty()) return "";
  std::string path = root + "/" + name;
  if (!make_dir(path)) return "";
  if (::access((path + "/cgroup.procs").c_str(), W_OK) != 0) {
    ::rmdir(path.c_str());
    return "";
  }
  return path;
}

bool join_cgroup(const char* group) {
  if (!group || !*group) return true;
  char path[4096];
  std::snprintf(path, sizeof path, "%s/cgroup.procs", group);
  int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char pid[32];
  int len = std::snprintf(pid, sizeof pid, "%d\n", static_cast<int>(::getpid()));
  const bool written = ::write(fd, pid, static_cast<size_t>(len)) == len;
  ::close(fd);
  return written;
}

std::vector<int> cgroup_pids(const std::string& group) {
  std::vector<int> pids;
  if (group.empty()) return pids;
  std::ifstream in(group + "/cgroup.procs");
  int pid;
  while (in >> pid) pids.push_back(pid);
  // Groups below it: a container's, made by its engine under the task's group.
  DIR* dir = ::opendir(group.c_str());
  if (!dir) return pids;
  while (dirent* entry = ::readdir(dir)) {
    if (entry->d_type != DT_DIR || entry->d_name[0] == '.') continue;
    for (int child : cgroup_pids(group + "/" + entry->d_name)) pids.push_back(child);
  }
  ::closedir(dir);
  return pids;
}

bool remove_cgroup(const std::string& group) {
  if (group.empty()) return true;
  // Most groups have none below them: the rmdir alone. EBUSY: groups below (a
  // container engine's) go first, or a process still holds it.
  if (::rmdir(group.c_str()) == 0 || errno == ENOENT) return true;
  if (errno != EBUSY) return false;
  if (DIR* dir = ::opendir(group.c_str())) {
    std::vector<std::string> children;
    while (dirent* entry = ::readdir(dir)) {
      if (entry->d_type == DT_DIR && entry->d_name[0] != '.') children.push_back(group + "/" + entry->d_name);
    }
    ::closedir(dir);
    if (children.empty()) {
      errno = EBUSY;  // a process holds it
      return false;
    }
    for (const auto& child : children) remove_cgroup(child);
  }
  return ::rmdir(group.c_str()) == 0 || errno == ENOENT;
}

}  // namespace ag::worker
