#include "worker/package_cache.h"

#include <archive.h>
#include <archive_entry.h>
#include <spdlog/spdlog.h>
#include <fcntl.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "common/sha256.h"

namespace ag::worker {
namespace fs = std::filesystem;

namespace {

// True when `path` (relative, already normalised) stays inside the root.
bool stays_inside(const fs::path& relative) {
  if (relative.empty() || relative.is_absolute()) return false;
  int depth = 0;
  for (const auto& part : relative) {
    if (part == "..") {
      if (--depth < 0) return false;
    } else if (part != "." && !part.empty()) {
      ++depth;
    }
  }
  return true;
}

std::string entry_error(const std::string& name, const std::string& why) {
  return "package entry '" + name + "' " + why + "; nothing was unpacked";
}

}  // namespace

Status extract_package(const std::string& archive_path, const std::string& dest) {
  std::unique_ptr<archive, decltype(&archive_read_free)> in(archive_read_new(), archive_read_free);
  archive_read_support_filter_gzip(in.get());
  archive_read_support_filter_none(in.get());
  archive_read_support_format_tar(in.get());
  if (archive_read_open_filename(in.get(), archive_path.c_str(), 1 << 20) != ARCHIVE_OK) {
    return invalid_argument("package is not a readable tar archive: " + std::string(archive_error_string(in.get())));
  }
  std::unique_ptr<archive, decltype(&archive_write_free)> out(archive_write_disk_new(), archive_write_free);
  // Entries are written to absolute paths under `dest` after the checks below, so
  // libarchive's own absolute-path and symlink guards (which would also trip over a
  // data dir reached through a symlink) are replaced by those checks.
  archive_write_disk_set_options(out.get(), ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_SECURE_NODOTDOT);
  std::error_code ec;
  fs::create_directories(dest, ec);
  if (ec) return internal_error("cannot create " + dest + ": " + ec.message());
  archive_entry* entry = nullptr;
  int rc;
  while ((rc = archive_read_next_header(in.get(), &entry)) == ARCHIVE_OK) {
    std::string name = archive_entry_pathname(entry) ? archive_entry_pathname(entry) : "";
    fs::path rel = fs::path(name).lexically_normal();
    if (rel == ".") continue;  // the root itself
    if (name.empty() || !stays_inside(rel)) return invalid_argument(entry_error(name, "escapes the working directory"));
    mode_t type = archive_entry_filetype(entry);
    const char* hardlink_target = archive_entry_hardlink(entry);
    if (!hardlink_target && type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK) {
      return invalid_argument(entry_error(name, "is not a file, directory or symlink"));
    }
    if (type == AE_IFLNK) {
      const char* target = archive_entry_symlink(entry);
      // Links may only point downwards from their own directory (no "..", not
      // absolute): then every chain of links stays inside the job directory.
      bool goes_up = false;
      for (const auto& part : fs::path(target ? target : "")) goes_up |= part == "..";
      if (!target || !*target || fs::path(target).is_absolute() || goes_up) {
        return invalid_argument(entry_error(name, std::string("is a link pointing outside (to '") +
                                                      (target ? target : "") + "')"));
      }
    }
    if (hardlink_target) {
      fs::path target = fs::path(hardlink_target).lexically_normal();
      if (!stays_inside(target)) return invalid_argument(entry_error(name, "is a hard link pointing outside"));
      archive_entry_set_hardlink(entry, (fs::path(dest) / target).c_str());
    }
    archive_entry_set_pathname(entry, (fs::path(dest) / rel).c_str());
    // No setuid, setgid or sticky bits from a user's package on a shared machine.
    archive_entry_set_perm(entry, archive_entry_perm(entry) & 0777);
    archive_entry_set_uid(entry, ::getuid());
    archive_entry_set_gid(entry, ::getgid());
    if (archive_write_header(out.get(), entry) != ARCHIVE_OK) {
      return invalid_argument(entry_error(name, std::string("could not be written: ") + archive_error_string(out.get())));
    }
    const void* buf;
    size_t size;
    la_int64_t offset;
    while ((rc = archive_read_data_block(in.get(), &buf, &size, &offset)) == ARCHIVE_OK) {
      if (archive_write_data_block(out.get(), buf, size, offset) != ARCHIVE_OK) {
        return internal_error("cannot write " + name + ": " + archive_error_string(out.get()));
      }
    }
    if (rc != ARCHIVE_EOF) return invalid_argument("package is corrupt at '" + name + "': " + archive_error_string(in.get()));
    archive_write_finish_entry(out.get());
  }
  if (rc != ARCHIVE_EOF) return invalid_argument(std::string("package is corrupt: ") + archive_error_string(in.get()));
  return {};
}

PackageCache::PackageCache(boost::asio::io_context& io, PackageCacheConfig config)
    : io_(io), config_(std::move(config)) {
  fs::create_directories(config_.dir + "/archives");
  fs::create_directories(config_.dir + "/jobs");
}

PackageCache::~PackageCache() { pool_.join(); }

void PackageCache::prepare(const std::string& job_id, const std::string& hash,
                           std::function<void(Result<std::string>)> done) {
  auto& waiters = waiting_[job_id];
  waiters.push_back(std::move(done));
  if (waiters.size() > 1) return;  // the first task of this job is already preparing it
  boost::asio::post(pool_, [this, job_id, hash] {
    Result<std::string> result = prepare_blocking(job_id, hash);
    boost::asio::post(io_, [this, job_id, result] {
      auto callbacks = std::move(waiting_[job_id]);
      waiting_.erase(job_id);
      for (auto& cb : callbacks) cb(result);
    });
  });
}

Result<std::string> PackageCache::fetch_archive(const std::string& hash) {
  std::string path = config_.dir + "/archives/" + hash + ".tar.gz";
  std::error_code ec;
  if (fs::exists(path, ec)) {
    fs::last_write_time(path, fs::file_time_type::clock::now(), ec);  // most recently used
    return path;
  }
  // Streamed to a temporary file and hashed as it arrives; named only once verified.
  std::string tmp = path + ".download";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
  if (fd < 0) return internal_error("cannot create " + tmp + ": " + std::strerror(errno));
  Sha256 sha;
  auto res = net::http_download(config_.head, "/api/packages/" + hash, config_.token, 10 * 60 * 1000,
                                [&](const char* data, size_t size) -> Status {
                                  sha.update(data, size);
                                  for (size_t done = 0; done < size;) {
                                    ssize_t n = ::write(fd, data + done, size - done);
                                    if (n < 0 && errno == EINTR) continue;
                                    if (n < 0) return internal_error("cannot write " + tmp + ": " + std::strerror(errno));
                                    done += static_cast<size_t>(n);
                                  }
                                  return {};
                                });
  ::close(fd);
  auto fail = [&](Error error) -> Result<std::string> {
    fs::remove(tmp, ec);
    return error;
  };
  if (!res.ok()) {
    if (res.error().code != ErrorCode::kUnavailable) return fail(res.error());
    return fail({ErrorCode::kUnavailable, "cannot download package sha256:" + hash + ": " + res.error().message});
  }
  if (res->status != 200) {
    return fail({ErrorCode::kNotFound, "the head answered HTTP " + std::to_string(res->status) + " for package sha256:" +
                                           hash + ": " + res->body.substr(0, 300)});
  }
  std::string actual = sha.finish_hex();
  if (actual != hash) {
    return fail(invalid_argument("package sha256:" + hash + " arrived corrupted (its bytes hash to sha256:" + actual + ")"));
  }
  fs::rename(tmp, path, ec);
  if (ec) return fail(internal_error("cannot store " + path + ": " + ec.message()));
  evict_over_budget(path);
  return path;
}

void PackageCache::evict_over_budget(const std::string& keep) {
  std::vector<std::pair<fs::file_time_type, fs::path>> archives;
  int64_t total = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(config_.dir + "/archives", ec)) {
    if (!entry.is_regular_file(ec)) continue;
    total += static_cast<int64_t>(entry.file_size(ec));
    archives.emplace_back(entry.last_write_time(ec), entry.path());
  }
  std::sort(archives.begin(), archives.end());  // least recently used first
  for (const auto& [_, path] : archives) {
    if (total <= config_.budget_bytes) break;
    if (path == keep) continue;
    int64_t size = static_cast<int64_t>(fs::file_size(path, ec));
    if (fs::remove(path, ec)) {
      total -= size;
      spdlog::info("package cache over budget: evicted {}", path.filename().string());
    }
  }
}

Result<std::string> PackageCache::prepare_blocking(const std::string& job_id, const std::string& hash) {
  std::string dest = config_.dir + "/jobs/" + job_id;
  std::error_code ec;
  // The marker sits beside the job dir, not in it: the task's folder holds only its files.
  std::string marker = dest + ".unpacked";
  if (fs::exists(marker, ec)) return dest;
  auto archive_path = fetch_archive(hash);
  if (!archive_path.ok()) return archive_path.error();
  // Unpack beside the destination and rename: a job dir is whole or absent.
  std::string staging = dest + ".unpacking";
  fs::remove_all(staging, ec);
  Status extracted = extract_package(archive_path.value(), staging);
  if (!extracted) {
    fs::remove_all(staging, ec);
    return extracted.error();
  }
  fs::remove_all(dest, ec);
  fs::rename(staging, dest, ec);
  if (ec) return internal_error("cannot move the unpacked package into " + dest + ": " + ec.message());
  std::ofstream(marker) << hash << "\n";
  return dest;
}

}  // namespace ag::worker
