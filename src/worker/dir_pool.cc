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

// Whether the folder has no entry; false when it cannot be read.
bool holds_nothing(const std::string& path) {
  DIR* listing = ::opendir(path.c_str());
  if (!listing) return false;
  bool empty = true;
  while (dirent* entry = ::readdir(listing)) {
    const char* name = entry->d_name;
    if (name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0))) continue;
    empty = false;
    break;
  }
  ::closedir(listing);
  return empty;
}

}  // namespace

DirPool::DirPool(std::string spare_dir, size_t keep, int uses) : dir_(std::move(spare_dir)), keep_(keep), uses_(uses) {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
  ::mkdir(dir_.c_str(), 0700);
}

int DirPool::take(const std::string& path) {
  while (!spares_.empty()) {
    Spare& spare = spares_.back();
    if (::rename(spare.path.c_str(), path.c_str()) == 0) {
      taken_[path] = spare.used + 1;
      spares_.pop_back();
      return 0;
    }
    if (errno == EEXIST || errno == ENOTEMPTY) break;  // `path` is there: the spare stays
    std::error_code ec;
    std::filesystem::remove_all(spare.path, ec);  // it went, or cannot be used
    spares_.pop_back();
  }
  if (::mkdir(path.c_str(), 0755) != 0) return errno;
  taken_[path] = 1;
  return 0;
}

void DirPool::give_back(const std::string& path) {
  auto taken = taken_.find(path);
  const int used = taken == taken_.end() ? uses_ : taken->second;
  if (taken != taken_.end()) taken_.erase(taken);
  if (used < uses_ && spares_.size() < keep_ && empty_files(path)) {
    std::string spare = dir_ + "/" + std::to_string(++sequence_);
    if (::rename(path.c_str(), spare.c_str()) == 0) {
      spares_.push_back({std::move(spare), used});
      return;
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

void DirPool::give_back_if_empty(const std::string& path) {
  auto taken = taken_.find(path);
  const int used = taken == taken_.end() ? 0 : taken->second;
  if (taken != taken_.end()) taken_.erase(taken);
  if (used >= uses_ || spares_.size() >= keep_ || !holds_nothing(path)) return;
  std::string spare = dir_ + "/" + std::to_string(++sequence_);
  if (::rename(path.c_str(), spare.c_str()) == 0) spares_.push_back({std::move(spare), used});
}

}  // namespace ag::worker
