#include "worker/cgroup_pool.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "worker/task_cgroup.h"

namespace ag::worker {
namespace {

constexpr char kSparePrefix[] = "warm.";

std::string parent_of(const std::string& group) { return group.substr(0, group.rfind('/')); }

}  // namespace

bool is_spare_name(const std::string& name) { return name.rfind(kSparePrefix, 0) == 0; }

std::string CgroupPool::next_name(const std::string& dir) {
  return dir + "/" + kSparePrefix + std::to_string(::getpid()) + "." + std::to_string(++sequence_);
}

// Spares a supervisor that is gone left in `dir` (their processes left with it).
void CgroupPool::sweep(const std::string& dir) {
  if (!swept_.insert(dir).second) return;
  DIR* listing = ::opendir(dir.c_str());
  if (!listing) return;
  std::vector<std::string> stale;
  while (dirent* entry = ::readdir(listing)) {
    const std::string name = entry->d_name;
    if (!is_spare_name(name)) continue;
    const long owner = std::strtol(name.c_str() + sizeof kSparePrefix - 1, nullptr, 10);
    if (owner > 0 && owner != ::getpid() && ::kill(static_cast<pid_t>(owner), 0) != 0 && errno == ESRCH) {
      stale.push_back(dir + "/" + name);
    }
  }
  ::closedir(listing);
  for (const auto& group : stale) remove_cgroup(group);
}

std::optional<std::string> CgroupPool::take(const std::string& group) {
  auto it = kept_.find(parent_of(group));
  while (it != kept_.end() && !it->second.empty()) {
    Spare spare = std::move(it->second.back());
    it->second.pop_back();
    if (::rename(spare.path.c_str(), group.c_str()) == 0) return std::move(spare.controls);
    if (errno == EEXIST || errno == ENOTEMPTY) {  // the group is there already: the spare stays kept
      it->second.push_back(std::move(spare));
      return std::nullopt;
    }
    ::rmdir(spare.path.c_str());  // gone, or unusable: the next one
  }
  return std::nullopt;
}

std::string CgroupPool::spare(const std::string& dir) {
  sweep(dir);
  auto it = kept_.find(dir);
  if (it != kept_.end() && !it->second.empty()) {
    std::string spare = std::move(it->second.back().path);
    it->second.pop_back();
    return spare;
  }
  std::string made = next_name(dir);
  return ::mkdir(made.c_str(), 0755) == 0 ? made : "";
}

bool CgroupPool::keep(const std::string& group, std::string controls) {
  const std::string dir = parent_of(group);
  sweep(dir);
  auto& spares = kept_[dir];
  if (spares.size() >= per_dir_) return false;
  std::string name = next_name(dir);
  if (::rename(group.c_str(), name.c_str()) != 0) return false;
  spares.push_back({std::move(name), std::move(controls)});
  return true;
}

void CgroupPool::clear() {
  for (auto& [_, spares] : kept_) {
    for (const auto& spare : spares) remove_cgroup(spare.path);
    spares.clear();
  }
}

size_t CgroupPool::kept(const std::string& dir) const {
  auto it = kept_.find(dir);
  return it == kept_.end() ? 0 : it->second.size();
}

}  // namespace ag::worker
