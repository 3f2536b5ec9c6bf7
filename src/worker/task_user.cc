#include "worker/task_user.h"

#include <grp.h>
#include <pwd.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace ag::worker {
namespace {

std::optional<TaskUser> lookup(const std::string& name) {
  struct passwd pw {};
  struct passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (::getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &found) != 0 || !found) return std::nullopt;
  TaskUser user{name, pw.pw_uid, pw.pw_gid, {}, pw.pw_dir ? pw.pw_dir : "/"};
  int count = 64;
  std::vector<gid_t> groups(static_cast<size_t>(count));
  if (::getgrouplist(name.c_str(), pw.pw_gid, groups.data(), &count) < 0) {
    groups.resize(static_cast<size_t>(count));
    ::getgrouplist(name.c_str(), pw.pw_gid, groups.data(), &count);
  }
  groups.resize(static_cast<size_t>(std::max(count, 0)));
  user.groups = std::move(groups);
  return user;
}

}  // namespace

Result<std::optional<TaskUser>> resolve_task_user(const std::string& name, std::string* note) {
  const bool root = ::geteuid() == 0;
  auto user = lookup(name);
  if (!user) return invalid_argument("--task-user: there is no user '" + name + "' on this machine");
  if (user->uid == 0) {
    return invalid_argument("--task-user: '" + name + "' is root; give an unprivileged account");
  }
  if (!root && user->uid != ::geteuid()) {
    return Error{ErrorCode::kPermissionDenied, "--task-user " + name +
                                                   ": only a worker running as root can start tasks as another "
                                                   "user; start it with sudo, or leave out --task-user"};
  }
  *note = "tasks run as user " + name + " (uid " + std::to_string(user->uid) + ")";
  if (user->uid == ::geteuid()) return std::optional<TaskUser>();  // already this user
  return std::optional<TaskUser>(std::move(*user));
}

Status open_path_to_task_user(const std::string& path, const TaskUser& user) {
  std::filesystem::path dir = std::filesystem::absolute(path).lexically_normal();
  for (dir = dir.parent_path(); !dir.empty(); dir = dir.parent_path()) {
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0) return internal_error("cannot look at " + dir.string() + ": " + std::strerror(errno));
    bool passable = (st.st_mode & S_IXOTH) || (st.st_uid == user.uid && (st.st_mode & S_IXUSR)) ||
                    (st.st_gid == user.gid && (st.st_mode & S_IXGRP));
    if (!passable) {
      if (st.st_uid != ::geteuid()) {
        return Error{ErrorCode::kPermissionDenied, "tasks running as " + user.name + " cannot reach " + path +
                                                       ": " + dir.string() + " is closed to them; choose a --data-dir "
                                                       "they can reach"};
      }
      if (::chmod(dir.c_str(), (st.st_mode & 07777) | S_IXOTH) != 0) {
        return internal_error("cannot let tasks pass through " + dir.string() + ": " + std::strerror(errno));
      }
      spdlog::info("{} opened to pass through (o+x, no listing) so that tasks running as {} reach their folders",
                   dir.string(), user.name);
    }
    if (dir == dir.root_path()) break;
  }
  return {};
}

Status give_to_task_user(const std::string& path, const TaskUser& user, bool recursive) {
  if (::lchown(path.c_str(), user.uid, user.gid) != 0) {
    return internal_error("cannot give " + path + " to user " + user.name + ": " + std::strerror(errno));
  }
  if (!recursive) return {};
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(path, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (::lchown(it->path().c_str(), user.uid, user.gid) != 0) {
      return internal_error("cannot give " + it->path().string() + " to user " + user.name + ": " +
                            std::strerror(errno));
    }
  }
  if (ec) return internal_error("cannot walk " + path + ": " + ec.message());
  return {};
}

}  // namespace ag::worker
