#include "worker/package_cache.h"

#include <sys/statvfs.h>

#include <limits>

#include <archive.h>
#include <archive_entry.h>
#include <spdlog/spdlog.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include "common/dir_spread.h"
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

using ArchiveReader = std::unique_ptr<archive, decltype(&archive_read_free)>;

ArchiveReader new_reader() {
  ArchiveReader in(archive_read_new(), archive_read_free);
  archive_read_support_filter_gzip(in.get());
  archive_read_support_filter_none(in.get());
  archive_read_support_format_tar(in.get());
  return in;
}

Status not_an_archive(archive* in) {
  return invalid_argument("package is not a readable tar archive: " + std::string(archive_error_string(in)));
}

// Unpacks the entries of the opened archive `in` into `dest`.
Status extract_entries(archive* in, const std::string& dest, const UnpackLimits& limits) {
  int64_t entries = 0, bytes = 0;
  std::unique_ptr<archive, decltype(&archive_write_free)> out(archive_write_disk_new(), archive_write_free);
  // Entries are written to absolute paths under `dest` after the checks below, so
  // libarchive's own absolute-path and symlink guards (which would also trip over a
  // data dir reached through a symlink) are replaced by those checks.
  archive_write_disk_set_options(out.get(), ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_SECURE_NODOTDOT);
  std::error_code ec;
  fs::create_directories(dest, ec);
  if (ec) return internal_error("cannot create " + dest + ": " + ec.message());
  // The disk's room now, less what must stay free: the most this package may take.
  int64_t room = std::numeric_limits<int64_t>::max();
  if (struct statvfs fs_stat {}; ::statvfs(dest.c_str(), &fs_stat) == 0) {
    const int64_t available = static_cast<int64_t>(fs_stat.f_bavail) * static_cast<int64_t>(fs_stat.f_frsize);
    room = available - limits.keep_free_bytes;
  }
  archive_entry* entry = nullptr;
  int rc;
  while ((rc = archive_read_next_header(in, &entry)) == ARCHIVE_OK) {
    std::string name = archive_entry_pathname(entry) ? archive_entry_pathname(entry) : "";
    fs::path rel = fs::path(name).lexically_normal();
    if (rel == ".") continue;  // the root itself
    if (++entries > limits.max_entries) {
      return invalid_argument("package has more than " + std::to_string(limits.max_entries) +
                              " entries, the most a worker unpacks; ship fewer files (e.g. an archive of them)");
    }
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
    while ((rc = archive_read_data_block(in, &buf, &size, &offset)) == ARCHIVE_OK) {
      bytes += static_cast<int64_t>(size);
      if (bytes > limits.max_bytes) {
        return invalid_argument("package unpacks to more than " + std::to_string(limits.max_bytes >> 20) +
                                " MiB (at '" + name + "'), the most a worker unpacks");
      }
      const int64_t packed = archive_filter_bytes(in, -1);  // read from the archive so far
      if (limits.max_ratio > 0 && bytes > limits.ratio_floor_bytes + limits.max_ratio * packed) {
        return invalid_argument("package unpacks to more than " + std::to_string(limits.max_ratio) +
                                " times its packed size (" + std::to_string(bytes >> 20) + " MiB from " +
                                std::to_string(packed >> 10) + " KiB so far, at '" + name +
                                "'), the most a worker unpacks (ag start-worker --max-unpack-ratio); ship the large "
                                "file some other way, or compress it less");
      }
      if (bytes > room) {
        return Error{ErrorCode::kResourceExhausted,
                     "package does not fit on the worker's disk: " + std::to_string(bytes >> 20) + " MiB unpacked (at '" +
                         name + "') with " + std::to_string(std::max<int64_t>(room, 0) >> 20) +
                         " MiB left to unpack into (" + std::to_string(limits.keep_free_bytes >> 20) +
                         " MiB more kept free)"};
      }
      if (archive_write_data_block(out.get(), buf, size, offset) != ARCHIVE_OK) {
        return internal_error("cannot write " + name + ": " + archive_error_string(out.get()));
      }
    }
    if (rc != ARCHIVE_EOF) return invalid_argument("package is corrupt at '" + name + "': " + archive_error_string(in));
    archive_write_finish_entry(out.get());
  }
  if (rc != ARCHIVE_EOF) return invalid_argument(std::string("package is corrupt: ") + archive_error_string(in));
  return {};
}

}  // namespace

Status extract_package(const std::string& archive_path, const std::string& dest, const UnpackLimits& limits) {
  ArchiveReader in = new_reader();
  if (archive_read_open_filename(in.get(), archive_path.c_str(), 1 << 20) != ARCHIVE_OK) return not_an_archive(in.get());
  return extract_entries(in.get(), dest, limits);
}

Status extract_package_stream(const std::function<std::string_view()>& next_piece, const std::string& dest,
                              const UnpackLimits& limits) {
  struct Source {
    const std::function<std::string_view()>* next;
  } source{&next_piece};
  auto read = [](archive*, void* data, const void** buffer) -> la_ssize_t {
    std::string_view piece = (*static_cast<Source*>(data)->next)();
    *buffer = piece.data();
    return static_cast<la_ssize_t>(piece.size());
  };
  ArchiveReader in = new_reader();
  if (archive_read_open(in.get(), &source, nullptr, read, nullptr) != ARCHIVE_OK) return not_an_archive(in.get());
  return extract_entries(in.get(), dest, limits);
}

PieceQueue::PieceQueue(size_t max_pieces) : max_pieces_(max_pieces) {}

void PieceQueue::push(const char* data, size_t size) {
  std::unique_lock lock(mu_);
  room_.wait(lock, [&] { return stopped_ || pieces_.size() < max_pieces_; });
  if (stopped_) return;
  pieces_.emplace_back(data, size);
  ready_.notify_one();
}

void PieceQueue::finish() {
  std::lock_guard lock(mu_);
  finished_ = true;
  ready_.notify_one();
}

std::string_view PieceQueue::pop() {
  std::unique_lock lock(mu_);
  ready_.wait(lock, [&] { return finished_ || !pieces_.empty(); });
  if (pieces_.empty()) return {};
  current_ = std::move(pieces_.front());
  pieces_.pop_front();
  room_.notify_one();
  return current_;
}

void PieceQueue::stop_reading() {
  std::lock_guard lock(mu_);
  stopped_ = true;
  pieces_.clear();
  room_.notify_all();
}

PackageCache::PackageCache(boost::asio::io_context& io, PackageCacheConfig config)
    : io_(io), config_(std::move(config)) {
  // A folder that cannot be made fails each prepare() with the path and the reason.
  std::error_code ec;
  fs::create_directories(config_.dir + "/archives", ec);
  fs::create_directories(config_.dir + "/jobs", ec);
  spread_subdirectories(config_.dir + "/jobs");
}

PackageCache::~PackageCache() { pool_.join(); }

void PackageCache::prepare(const std::string& job_id, const std::string& hash, const std::string& owner,
                           std::function<void(Result<std::string>)> done) {
  users_[job_id] += 1;  // counted from the request on: a release meanwhile must not remove it
  auto& waiters = waiting_[job_id];
  waiters.push_back(std::move(done));
  if (waiters.size() > 1) return;  // the first task of this job is already preparing it
  boost::asio::post(pool_, [this, job_id, hash, owner] {
    Result<std::string> result = prepare_blocking(job_id, hash, owner);
    boost::asio::post(io_, [this, job_id, result] {
      auto callbacks = std::move(waiting_[job_id]);
      waiting_.erase(job_id);
      for (auto& cb : callbacks) {
        if (!result.ok()) release(job_id);
        cb(result);
      }
    });
  });
}

void PackageCache::release(const std::string& job_id) {
  auto it = users_.find(job_id);
  if (it == users_.end()) return;
  if (--it->second > 0) return;
  users_.erase(it);
  // On the pool, so that it is ordered with the job's next prepare, if any.
  boost::asio::post(pool_, [this, job_id] { remove_job_dir(job_id); });
}

bool PackageCache::retain(const std::string& job_id) {
  std::error_code ec;
  if (!fs::exists(config_.dir + "/jobs/" + job_id + ".unpacked", ec)) return false;
  users_[job_id] += 1;
  return true;
}

void PackageCache::remove_unused() {
  std::error_code ec;
  std::vector<std::string> unused;
  for (const auto& entry : fs::directory_iterator(config_.dir + "/jobs", ec)) {
    std::string name = entry.path().filename().string();
    std::string job_id = name.substr(0, name.find('.'));
    if (!users_.count(job_id) && !waiting_.count(job_id)) unused.push_back(job_id);
  }
  std::sort(unused.begin(), unused.end());
  unused.erase(std::unique(unused.begin(), unused.end()), unused.end());
  for (const auto& job_id : unused) boost::asio::post(pool_, [this, job_id] { remove_job_dir(job_id); });
}

void PackageCache::remove_job_dir(const std::string& job_id) {
  std::string dest = config_.dir + "/jobs/" + job_id;
  std::error_code ec;
  fs::remove(dest + ".unpacked", ec);  // first: a half-removed dir is never taken as whole
  fs::remove_all(dest, ec);
  fs::remove_all(dest + ".unpacking", ec);
}

std::string PackageCache::archive_path(const std::string& hash) const {
  return config_.dir + "/archives/" + hash + ".tar.gz";
}

Result<std::string> PackageCache::download_archive(const std::string& hash,
                                                   const std::function<void(const char*, size_t)>& tee) {
  std::string path = archive_path(hash);
  std::error_code ec;
  // Streamed to a temporary file and hashed as it arrives; named only once verified.
  std::string tmp = path + ".download";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
  if (fd < 0) return internal_error("cannot create " + tmp + ": " + std::strerror(errno));
  Sha256 sha;
  auto res = net::http_download(config_.head(), "/api/packages/" + hash, config_.token(), 10 * 60 * 1000,
                                [&](const char* data, size_t size) -> Status {
                                  if (tee) tee(data, size);
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

bool PackageCache::unpack_cached(const std::string& path, const std::string& hash, const std::string& staging,
                                 Status* extracted) {
  // Hashed again as it is read: a file cut short by a crash, or changed on disk, is
  // never taken for the package.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  Sha256 sha;
  std::vector<char> buffer(1 << 20);
  auto next = [&]() -> std::string_view {
    ssize_t n;
    do {
      n = ::read(fd, buffer.data(), buffer.size());
    } while (n < 0 && errno == EINTR);
    if (n <= 0) return {};
    sha.update(buffer.data(), static_cast<size_t>(n));
    return {buffer.data(), static_cast<size_t>(n)};
  };
  *extracted = extract_package_stream(next, staging, config_.unpack);
  while (!next().empty()) {  // what the unpacker did not need (end padding)
  }
  ::close(fd);
  return sha.finish_hex() == hash;
}

Result<std::string> PackageCache::prepare_blocking(const std::string& job_id, const std::string& hash,
                                                   const std::string& owner) {
  std::string dest = config_.dir + "/jobs/" + job_id;
  std::error_code ec;
  // The marker sits beside the job dir, not in it: the task's folder holds only its files.
  std::string marker = dest + ".unpacked";
  if (fs::exists(marker, ec)) return dest;
  auto t0 = std::chrono::steady_clock::now();
  // Unpacked beside the destination and renamed: a job dir is whole or absent.
  std::string staging = dest + ".unpacking";
  fs::remove_all(staging, ec);
  auto account = config_.accounts ? config_.accounts->for_owner(owner) : Result<std::optional<TaskUser>>(std::nullopt);
  if (!account.ok()) return account.error();
  // A job's files are its tasks' alone: another local account that learns the job's
  // id (every cluster user sees them) must not read its code through packages/jobs/,
  // which other users' tasks cross, not even while it is unpacked. (Without task
  // accounts the whole data dir is the worker's alone, and a container may run as its
  // image's own user.)
  if (account.value() && ::mkdir(staging.c_str(), 0700) != 0) {
    return internal_error("cannot create " + staging + ": " + std::strerror(errno));
  }
  std::string cached = archive_path(hash);
  Status extracted;
  bool downloaded = false;
  bool from_cache = fs::exists(cached, ec);
  if (from_cache) {
    fs::last_write_time(cached, fs::file_time_type::clock::now(), ec);  // most recently used
    if (!unpack_cached(cached, hash, staging, &extracted)) {
      spdlog::warn("cached package sha256:{} does not match its hash (cut short by a crash?): downloading it again",
                   hash.substr(0, 12));
      fs::remove(cached, ec);
      fs::remove_all(staging, ec);
      from_cache = false;
    }
  }
  if (!from_cache) {
    // Downloaded and unpacked in one pass: each piece goes to the cache file, into the
    // hash and to the unpacking thread as it arrives. The unpacked files count only
    // once the whole download matched its hash.
    downloaded = true;
    PieceQueue pieces(8);
    std::thread unpacker([&] {
      extracted = extract_package_stream([&] { return pieces.pop(); }, staging, config_.unpack);
      pieces.stop_reading();
    });
    auto fetched = download_archive(hash, [&](const char* data, size_t size) { pieces.push(data, size); });
    pieces.finish();
    unpacker.join();
    if (!fetched.ok()) {
      fs::remove_all(staging, ec);
      return fetched.error();
    }
  }
  if (!extracted) {
    fs::remove_all(staging, ec);
    return extracted.error();
  }
  if (account.value()) {
    if (::chmod(staging.c_str(), 0700) != 0) {
      const std::string why = std::strerror(errno);
      fs::remove_all(staging, ec);
      return internal_error("cannot make " + staging + " private: " + why);
    }
    if (Status s = give_to_task_user(staging, *account.value(), true); !s) {
      fs::remove_all(staging, ec);
      return s.error();
    }
  }
  fs::remove_all(dest, ec);
  fs::rename(staging, dest, ec);
  if (ec) return internal_error("cannot move the unpacked package into " + dest + ": " + ec.message());
  std::ofstream(marker) << hash << "\n";
  auto ms = [](auto d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); };
  spdlog::info("package sha256:{} ready for {} in {} ms ({})", hash.substr(0, 12), job_id,
               ms(std::chrono::steady_clock::now() - t0), downloaded ? "downloaded and unpacked" : "unpacked from the cache");
  return dest;
}

}  // namespace ag::worker
