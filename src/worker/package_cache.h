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
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/result.h"
#include "net/http_client.h"

namespace ag::worker {

struct PackageCacheConfig {
  std::string dir;  // <worker data dir>/packages
  int64_t budget_bytes = int64_t{10} << 30;
  net::Endpoint head;
  std::string token;
};

class PackageCache {
 public:
  PackageCache(boost::asio::io_context& io, PackageCacheConfig config);
  ~PackageCache();

  // Makes package `hash` available unpacked for `job_id`; `done` gets the directory,
  // or an error naming what was wrong (download failed, hash mismatch, unsafe entry).
  void prepare(const std::string& job_id, const std::string& hash, std::function<void(Result<std::string>)> done);

 private:
  Result<std::string> prepare_blocking(const std::string& job_id, const std::string& hash);
  Result<std::string> fetch_archive(const std::string& hash);
  void evict_over_budget(const std::string& keep);

  boost::asio::io_context& io_;
  PackageCacheConfig config_;
  boost::asio::thread_pool pool_{1};
  std::map<std::string, std::vector<std::function<void(Result<std::string>)>>> waiting_;  // by job id
};

// Unpacks a gzip'd tar into `dest` (which must not exist yet), refusing unsafe
// entries. Errors: kInvalidArgument naming the entry, kInternal for I/O failures.
Status extract_package(const std::string& archive_path, const std::string& dest);

}  // namespace ag::worker
