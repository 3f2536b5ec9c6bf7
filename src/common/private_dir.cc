#include "common/private_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace ag {

Status ensure_private_dir(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) return internal_error("cannot look at " + path + ": " + std::strerror(errno));
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
    if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
      return internal_error("cannot create " + path + ": " + std::strerror(errno));
    }
    if (::lstat(path.c_str(), &st) != 0) return internal_error("cannot look at " + path + ": " + std::strerror(errno));
  }
  if (S_ISLNK(st.st_mode)) {
    return Error{ErrorCode::kPermissionDenied,
                 path + " is a symbolic link, not a folder; AetherGrid does not follow it (someone may have planted "
                        "it): remove it, or choose another folder"};
  }
  if (!S_ISDIR(st.st_mode)) return invalid_argument(path + " is not a folder");
  if (st.st_uid != ::geteuid()) {
    return Error{ErrorCode::kPermissionDenied, path + " belongs to uid " + std::to_string(st.st_uid) +
                                                   ", not to this user; remove it, or choose another folder"};
  }
  // A folder others can list or write is closed (0700). One they may only pass
  // through stays so: a worker whose tasks run as another account opens that much
  // (worker/task_user.h).
  if ((st.st_mode & 066) != 0 && ::chmod(path.c_str(), 0700) != 0) {
    return internal_error("cannot make " + path + " private (chmod 700): " + std::strerror(errno));
  }
  return {};
}

}  // namespace ag
