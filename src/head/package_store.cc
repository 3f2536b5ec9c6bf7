#include "head/package_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/sha256.h"

namespace ag::head {
namespace {
std::string mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}
}  // namespace

PackageStore::PackageStore(std::string dir, int64_t max_package_bytes)
    : dir_(std::move(dir)), max_package_bytes_(max_package_bytes) {
  std::filesystem::create_directories(dir_);
}

bool PackageStore::contains(const std::string& hash) const {
  return is_sha256_hex(hash) && std::filesystem::exists(path_for(hash));
}

int64_t PackageStore::count() const {
  int64_t n = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    if (entry.path().extension() == ".gz") ++n;
  }
  return n;
}

Result<bool> PackageStore::put(const std::string& hash, const std::string& bytes) {
  if (!is_sha256_hex(hash)) {
    return invalid_argument("'" + hash + "' is not a package hash; expected 64 lowercase hex digits (SHA-256)");
  }
  if (static_cast<int64_t>(bytes.size()) > max_package_bytes_) {
    return Error{ErrorCode::kTooLarge, "package is " + std::to_string(bytes.size()) + " bytes (" +
                                           mib(static_cast<int64_t>(bytes.size())) + "); the head's limit is " +
                                           std::to_string(max_package_bytes_) + " bytes (" + mib(max_package_bytes_) +
                                           ", ag start-head --max-package-mb)"};
  }
  std::string actual = sha256_hex(bytes);
  if (actual != hash) {
    return invalid_argument("the uploaded bytes hash to sha256:" + actual + ", not sha256:" + hash +
                            " (corrupted upload?); nothing was stored");
  }
  uploads_ += 1;
  bytes_uploaded_ += static_cast<int64_t>(bytes.size());
  if (contains(hash)) return false;
  // Written to a temporary name, synced, then renamed: a package either exists whole
  // or not at all, even across a crash.
  std::string tmp = path_for(hash) + ".tmp" + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
  if (fd < 0) return internal_error("cannot create " + tmp + ": " + std::strerror(errno));
  size_t written = 0;
  while (written < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return Error{e == ENOSPC ? ErrorCode::kResourceExhausted : ErrorCode::kInternal,
                   "cannot store package: " + std::string(std::strerror(e))};
    }
    written += static_cast<size_t>(n);
  }
  bool synced = ::fsync(fd) == 0;
  ::close(fd);
  if (!synced || ::rename(tmp.c_str(), path_for(hash).c_str()) != 0) {
    ::unlink(tmp.c_str());
    return internal_error("cannot store package: " + std::string(std::strerror(errno)));
  }
  return true;
}

Result<std::string> PackageStore::read(const std::string& hash) const {
  if (!contains(hash)) return not_found("no package sha256:" + hash + " on the head");
  std::ifstream in(path_for(hash), std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in) return internal_error("cannot read package sha256:" + hash);
  return ss.str();
}

}  // namespace ag::head
