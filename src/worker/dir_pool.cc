#include "worker/dir_pool.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

namespace ag::worker {
namespace {

// Unlinks every entry of the folder; false when one is a folder or cannot go.
bool empty_files(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  DIR* listing = ::fdopendir(fd);
  if (!listing) {
    ::close(fd);
    return false;
  }
  bool emptied = true;
  while (dirent* entry = ::readdir(listing)) {
    const char* name = entry->d_name;
    if (name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0))) continue;
    if (::unlinkat(fd, name, 0) != 0) {
      emptied = false;
      break;
    }
  }
  ::closedir(listing);
  return emptied;
}

}  // namespace

DirPool::DirPool(std::string spare_dir, size_t keep) : dir_(std::move(spare_dir)), keep_(keep) {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
  ::mkdir(dir_.c_str(), 0700);
}

int DirPool::take(const std::string& path) {
  while (!spares_.empty()) {
    if (::rename(spares_.back().c_str(), path.c_str()) == 0) {
      spares_.pop_back();
      return 0;
    }
    if (errno == EEXIST || errno == ENOTEMPTY) break;  // `path` is there: the spare stays
    std::error_code ec;
    std::filesystem::remove_all(spares_.back(), ec);  // it went, or cannot be used
    spares_.pop_back();
  }
  return ::mkdir(path.c_str(), 0755) == 0 ? 0 : errno;
}

void DirPool::give_back(const std::string& path) {
  if (spares_.size() < keep_ && empty_files(path)) {
    std::string spare = dir_ + "/" + std::to_string(++sequence_);
    if (::rename(path.c_str(), spare.c_str()) == 0) {
      spares_.push_back(std::move(spare));
      return;
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

}  // namespace ag::worker
