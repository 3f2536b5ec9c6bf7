#include "head/packages/package_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "common/sha256.h"

#include <boost/asio/post.hpp>

namespace ag::head {
namespace {
std::string mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

struct StoredPackage {
  std::string hash;
  std::string path;
  int64_t size = 0;
  int64_t used_s = 0;  // last use (the file's modification time)
};

// The stored packages, least recently used first.
std::vector<StoredPackage> stored_packages(const std::string& dir) {
  std::vector<StoredPackage> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    const std::string suffix = ".tar.gz";
    if (name.size() != 64 + suffix.size() || name.compare(64, suffix.size(), suffix) != 0) continue;
    struct stat st {};
    if (::stat(entry.path().c_str(), &st) != 0) continue;
    out.push_back({name.substr(0, 64), entry.path().string(), st.st_size, st.st_mtim.tv_sec});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.used_s < b.used_s; });
  return out;
}
}  // namespace

PackageStore::PackageStore(std::string dir, int64_t max_package_bytes, int64_t quota_bytes)
    : dir_(std::move(dir)), max_package_bytes_(max_package_bytes), quota_bytes_(quota_bytes) {
  // A folder that cannot be made fails each upload with the path and the reason.
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  // Uploads a previous run left unfinished (the head stopped mid-upload), in this
  // naming or the earlier ".tmp<pid>" one.
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    std::string name = entry.path().filename().string();
    if (name.find(".upload-") != std::string::npos || name.find(".tar.gz.tmp") != std::string::npos) {
      std::filesystem::remove(entry.path(), ec);
    }
  }
  for (const auto& package : stored_packages(dir_)) stored_bytes_ += package.size;
}

void PackageStore::touch(const std::string& hash) {
  if (is_sha256_hex(hash)) ::utimensat(AT_FDCWD, path_for(hash).c_str(), nullptr, 0);
}

int PackageStore::remove_unused(int64_t max_age_s) {
  const int64_t now = ::time(nullptr);
  int removed = 0;
  for (const auto& package : stored_packages(dir_)) {
    if (package.used_s > now - max_age_s) break;  // newer ones follow
    if (in_use_ && in_use_(package.hash)) continue;
    if (::unlink(package.path.c_str()) == 0) {
      stored_bytes_ -= package.size;
      ++removed;
    }
  }
  return removed;
}

bool PackageStore::remove(const std::string& hash) {
  struct stat st{};
  const std::string path = path_for(hash);
  if (::stat(path.c_str(), &st) != 0 || ::unlink(path.c_str()) != 0) return false;
  stored_bytes_ -= st.st_size;
  return true;
}

Status PackageStore::reserve(int64_t bytes) {
  auto fits = [&] { return stored_bytes_ + reserved_bytes_ + bytes <= quota_bytes_; };
  if (!fits()) {
    // Room is made from packages no pending or running job needs, oldest use first.
    for (const auto& package : stored_packages(dir_)) {
      if (fits()) break;
      if (in_use_ && in_use_(package.hash)) continue;
      if (::unlink(package.path.c_str()) == 0) stored_bytes_ -= package.size;
    }
  }
  if (!fits()) {
    return Error{ErrorCode::kResourceExhausted,
                 "the head's package store is full: this package needs " + mib(bytes) + " and " +
                     mib(stored_bytes_ + reserved_bytes_) + " of its " + mib(quota_bytes_) +
                     " quota hold packages of pending or running jobs; wait for jobs to finish, or raise the quota "
                     "(ag start-head --package-store-gb)"};
  }
  reserved_bytes_ += bytes;
  return {};
}

void PackageStore::settle(int64_t bytes, bool stored) {
  reserved_bytes_ -= bytes;
  if (!stored) return;
  // Counted from the folder: two uploads of one package may both have been stored
  // (the second replacing the first), which adds its size once.
  stored_bytes_ = 0;
  for (const auto& package : stored_packages(dir_)) stored_bytes_ += package.size;
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

PackageUpload::PackageUpload(std::string hash, std::string tmp_path, int fd, int64_t max_bytes)
    : hash_(std::move(hash)), tmp_path_(std::move(tmp_path)), fd_(fd), max_bytes_(max_bytes) {}

PackageUpload::~PackageUpload() { discard(); }

void PackageUpload::discard() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!tmp_path_.empty()) ::unlink(tmp_path_.c_str());
  tmp_path_.clear();
}

Status PackageUpload::write(const char* data, size_t size) {
  if (error_) return *error_;
  if (size_ + static_cast<int64_t>(size) > max_bytes_) {
    error_ = Error{ErrorCode::kTooLarge, "package is over the head's limit of " + std::to_string(max_bytes_) +
                                             " bytes (" + mib(max_bytes_) + ", ag start-head --max-package-mb)"};
    discard();
    return *error_;
  }
  sha_.update(data, size);
  size_t written = 0;
  while (written < size) {
    ssize_t n = ::write(fd_, data + written, size - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      error_ = Error{e == ENOSPC ? ErrorCode::kResourceExhausted : ErrorCode::kInternal,
                     "cannot store package: " + std::string(std::strerror(e))};
      discard();
      return *error_;
    }
    written += static_cast<size_t>(n);
  }
  size_ += static_cast<int64_t>(size);
  // Start writing back every few MiB as they come, so that the sync at the end has
  // little left to wait for.
  constexpr int64_t kFlushEvery = 8 << 20;
  if (size_ - flushed_ >= kFlushEvery) {
    ::sync_file_range(fd_, flushed_, size_ - flushed_, SYNC_FILE_RANGE_WRITE);
    flushed_ = size_;
  }
  return {};
}

Result<std::shared_ptr<PackageUpload>> PackageStore::begin_upload(const std::string& hash) {
  if (!is_sha256_hex(hash)) {
    return invalid_argument("'" + hash + "' is not a package hash; expected 64 lowercase hex digits (SHA-256)");
  }
  // Unique per upload: two clients may send the same package at once.
  std::string tmp = path_for(hash) + ".upload-" + std::to_string(::getpid()) + "-" + std::to_string(next_upload_++);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
  if (fd < 0) return internal_error("cannot create " + tmp + ": " + std::strerror(errno));
  return std::shared_ptr<PackageUpload>(new PackageUpload(hash, tmp, fd, max_package_bytes_));
}

Result<bool> PackageStore::check_upload(PackageUpload& upload) {
  if (upload.error_) {
    upload.discard();
    return *upload.error_;
  }
  std::string actual = upload.sha_.finish_hex();
  upload.error_ = Error{ErrorCode::kInternal, "upload already finished"};
  if (actual != upload.hash_) {
    upload.discard();
    return invalid_argument("the uploaded bytes hash to sha256:" + actual + ", not sha256:" + upload.hash_ +
                            " (corrupted upload?); nothing was stored");
  }
  uploads_ += 1;
  bytes_uploaded_ += upload.size_;
  const bool needed = !contains(upload.hash_);
  if (!needed) upload.discard();  // a package the head already holds
  return needed;
}

Status PackageStore::make_durable(PackageUpload& upload, const std::string& path, const std::string& dir) {
  // Synced, then renamed: a package exists whole or not at all, even across a crash.
  bool synced = ::fdatasync(upload.fd_) == 0;
  ::close(upload.fd_);
  upload.fd_ = -1;
  if (!synced || ::rename(upload.tmp_path_.c_str(), path.c_str()) != 0) {
    const int err = errno;
    upload.discard();
    return internal_error("cannot store package: " + std::string(std::strerror(err)));
  }
  upload.tmp_path_.clear();
  // The new name itself is made durable too.
  int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
  return {};
}

Result<bool> PackageStore::finish_upload(PackageUpload& upload) {
  auto needed = check_upload(upload);
  if (!needed.ok() || !needed.value()) return needed;
  if (Status s = reserve(upload.size_); !s) {
    upload.discard();
    return s.error();
  }
  Status stored = make_durable(upload, path_for(upload.hash_), dir_);
  settle(upload.size_, static_cast<bool>(stored));
  if (!stored) return stored.error();
  return true;
}

void PackageStore::finish_upload_async(boost::asio::io_context& io, const std::shared_ptr<PackageUpload>& upload,
                                       std::function<void(Result<bool>)> done) {
  auto needed = check_upload(*upload);
  if (!needed.ok() || !needed.value()) return done(needed);
  if (Status s = reserve(upload->size()); !s) {
    upload->discard();
    return done(s.error());
  }
  // The sync waits for the disk (seconds for a large package on a slow one): off the
  // io thread, which keeps serving requests and heartbeats meanwhile.
  boost::asio::post(syncer_, [this, &io, upload, path = path_for(upload->hash_), dir = dir_, done = std::move(done)] {
    Status stored = make_durable(*upload, path, dir);
    boost::asio::post(io, [this, upload, stored, done] {
      settle(upload->size(), static_cast<bool>(stored));
      done(stored ? Result<bool>(true) : Result<bool>(stored.error()));
    });
  });
}

Result<bool> PackageStore::put(const std::string& hash, const std::string& bytes) {
  if (static_cast<int64_t>(bytes.size()) > max_package_bytes_) {
    return Error{ErrorCode::kTooLarge, "package is " + std::to_string(bytes.size()) + " bytes (" +
                                           mib(static_cast<int64_t>(bytes.size())) + "); the head's limit is " +
                                           std::to_string(max_package_bytes_) + " bytes (" + mib(max_package_bytes_) +
                                           ", ag start-head --max-package-mb)"};
  }
  auto upload = begin_upload(hash);
  if (!upload.ok()) return upload.error();
  if (Status s = upload.value()->write(bytes.data(), bytes.size()); !s) return s.error();
  return finish_upload(*upload.value());
}

Result<std::string> PackageStore::file(const std::string& hash) const {
  if (!contains(hash)) return not_found("no package sha256:" + hash + " on the head");
  return path_for(hash);
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
