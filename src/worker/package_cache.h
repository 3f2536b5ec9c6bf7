// PackageCache: working_dir packages on this node.
//
//   prepare(job, hash) --> archive cached? --no--> GET /api/packages/<hash>, verify SHA-256,
//                           keep in archives/ (least recently used evicted past the budget)
//                      --> unpacked for this job? --no--> safe extract into jobs/<job>/
//                      --> done(jobs/<job>)   (on the io thread)
//
// Downloads and extraction run on one background thread so that heartbeats and other
// tasks never wait for a large package. Extraction refuses absolute paths, `..`,
// links that point outside the job directory, and device files. prepare() and its
// callbacks belong to the io thread.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "net/http_client.h"
#include "worker/task_accounts.h"

namespace ag::worker {

// How much one package may unpack to, checked while unpacking: a small compressed
// archive can expand without end (a 1 MB gzip of zeros is 1 GB).
struct UnpackLimits {
  int64_t max_bytes = int64_t{5} << 30;  // ten times the head's default upload limit
  int64_t max_entries = 1'000'000;
  // At most this many times the packed bytes read so far, past a first
  // `ratio_floor_bytes` (source trees compress 5-20x; a bomb a thousandfold). 0: no bound.
  int64_t max_ratio = 200;
  int64_t ratio_floor_bytes = int64_t{64} << 20;
  // What must stay free on the disk unpacked into; the unpacking stops before it.
  int64_t keep_free_bytes = int64_t{256} << 20;
};

struct PackageCacheConfig {
  std::string dir;  // <worker data dir>/packages
  int64_t budget_bytes = int64_t{10} << 30;
  // The head to download from: the one the worker talks to now (head_addresses.h), read
  // at each download. Thread-safe.
  std::function<net::Endpoint()> head;
  // The node's credential for downloads, read at each download (it changes once, when
  // the head gives the node its own). Thread-safe.
  std::function<std::string()> token;
  // Where tasks run as other accounts, each unpacked job folder is handed to its
  // owner's. Null: tasks run as the worker's own user.
  TaskAccounts* accounts = nullptr;
  UnpackLimits unpack;
};

// What the agent needs of working_dir packages: PackageCache in the product, a fake
// in unit tests.
class PackageProvider {
 public:
  virtual ~PackageProvider() = default;
  // `owner`: the user who submitted the job (whose tasks' account gets the folder).
  virtual void prepare(const std::string& job_id, const std::string& hash, const std::string& owner,
                       std::function<void(Result<std::string>)> done) = 0;
  virtual void release(const std::string& job_id) = 0;
  virtual bool retain(const std::string& job_id) = 0;
  virtual void remove_unused() = 0;
};

class PackageCache final : public PackageProvider {
 public:
  PackageCache(boost::asio::io_context& io, PackageCacheConfig config);
  ~PackageCache() override;

  // Makes package `hash` available unpacked for `job_id`; `done` gets the directory,
  // or an error naming what was wrong (download failed, hash mismatch, unsafe entry).
  // Each successful prepare counts the job's directory as in use by one more task,
  // until release().
  void prepare(const std::string& job_id, const std::string& hash, const std::string& owner,
               std::function<void(Result<std::string>)> done) override;

  // A task that used the job's directory ended: once no task of the job uses it, the
  // directory is removed (soon enough, its pages are dropped before ever being written
  // back). A later task of the job unpacks it again from the cached archive.
  void release(const std::string& job_id) override;

  // Counts a task a previous agent left behind as using the job's directory. Returns
  // false when the job has no unpacked directory here (the task used none).
  bool retain(const std::string& job_id) override;

  // Removes unpacked job directories no task uses (left by a previous agent): call
  // once, after retain() for every recovered task.
  void remove_unused() override;

 private:
  Result<std::string> prepare_blocking(const std::string& job_id, const std::string& hash, const std::string& owner);
  std::string archive_path(const std::string& hash) const;
  // Unpacks the cached archive at `path` into `staging` (result in `extracted`) while
  // hashing it; false when the file does not hash to `hash`.
  bool unpack_cached(const std::string& path, const std::string& hash, const std::string& staging, Status* extracted);
  // Downloads the package into the archive cache, verifying its hash; every piece is
  // also handed to `tee` (may be empty) as it arrives. Returns the archive's path.
  Result<std::string> download_archive(const std::string& hash, const std::function<void(const char*, size_t)>& tee);
  void evict_over_budget(const std::string& keep);
  void remove_job_dir(const std::string& job_id);  // on the pool

  boost::asio::io_context& io_;
  PackageCacheConfig config_;
  boost::asio::thread_pool pool_{1};
  std::map<std::string, std::vector<std::function<void(Result<std::string>)>>> waiting_;  // by job id
  std::map<std::string, int> users_;  // job id -> tasks using (or about to use) its directory
};


// Unpacks a tar (gzip'd or not) into `dest` (which must not exist yet), refusing
// unsafe entries and stopping at `limits`. Errors: kInvalidArgument naming the entry
// or the limit, kInternal for I/O failures.
Status extract_package(const std::string& archive_path, const std::string& dest, const UnpackLimits& limits = {});

// The same, reading the archive from `next_piece`, which returns the next piece of
// it (valid until the next call) and an empty piece at the end.
Status extract_package_stream(const std::function<std::string_view()>& next_piece, const std::string& dest,
                              const UnpackLimits& limits = {});

// Pieces of a download handed from the thread that receives them to the thread that
// unpacks them, at most `max_pieces` waiting.
class PieceQueue {
 public:
  explicit PieceQueue(size_t max_pieces);
  // Producer: copies a piece in, waiting while the queue is full; dropped once the
  // reader stopped.
  void push(const char* data, size_t size);
  // Producer: nothing more comes.
  void finish();
  // Consumer: the next piece (valid until the next pop), or an empty one at the end.
  std::string_view pop();
  // Consumer: reads no more; pending and later pieces are dropped.
  void stop_reading();

 private:
  std::mutex mu_;
  std::condition_variable ready_;
  std::condition_variable room_;
  std::deque<std::string> pieces_;
  std::string current_;
  size_t max_pieces_;
  bool finished_ = false;
  bool stopped_ = false;
};

}  // namespace ag::worker
