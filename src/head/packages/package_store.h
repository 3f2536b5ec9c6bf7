// PackageStore: the head's content-addressed store of working_dir packages (tar
// files), one file per SHA-256 under <data_dir>/packages/. Clients upload a package
// once (HEAD first: an unchanged folder uploads nothing); workers download it by hash
// and verify it. Uploads stream to disk while they are hashed, so a package never
// sits whole in the head's memory. Io thread only (the final sync of an upload runs on
// the store's own thread).
//
// The store holds at most `quota_bytes`. A package no pending or running job uses
// (`in_use`, from the job table) may be removed: the least recently used first when
// an upload needs room, and any left unused for a week by remove_unused(). A client
// that submits a job with a removed package simply uploads it again (HEAD says 404).
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include "common/result.h"
#include "common/sha256.h"
#include "net/http_types.h"

namespace ag::head {

class PackageStore;

// One upload in progress: bytes go to a temporary file and into the hash as they
// arrive. Refused (too large, a full disk, a wrong hash), it deletes its file at once,
// before the answer goes out; dropped unfinished (client gone), as it goes.
class PackageUpload final : public net::BodySink {
 public:
  ~PackageUpload() override;
  // Errors: kTooLarge past the head's limit; kResourceExhausted / kInternal when the
  // file cannot be written. After an error, later writes return it again.
  Status write(const char* data, size_t size) override;
  const std::string& hash() const { return hash_; }
  int64_t size() const { return size_; }

 private:
  friend class PackageStore;
  PackageUpload(std::string hash, std::string tmp_path, int fd, int64_t max_bytes);
  // Closes and deletes the temporary file, if it is still there.
  void discard();

  std::string hash_;
  std::string tmp_path_;
  int fd_;
  int64_t max_bytes_;
  int64_t size_ = 0;
  int64_t flushed_ = 0;  // bytes whose write-back to disk was started
  Sha256 sha_;
  std::optional<Error> error_;
};

class PackageStore {
 public:
  PackageStore(std::string dir, int64_t max_package_bytes,
               int64_t quota_bytes = std::numeric_limits<int64_t>::max());

  bool contains(const std::string& hash) const;

  // Whether a pending or running job needs the package (never removed then).
  void set_in_use(std::function<bool(const std::string& hash)> in_use) { in_use_ = std::move(in_use); }
  // The package was just asked for (a submission, a client's check): it is the last
  // to be removed for room.
  void touch(const std::string& hash);
  // Removes packages no job uses that were last used more than `max_age_s` ago;
  // returns how many.
  int remove_unused(int64_t max_age_s);
  // Removes one package (the last job that had it was deleted); false when there was
  // none.
  bool remove(const std::string& hash);

  // Starts an upload of the package named `hash`. Errors: kInvalidArgument for a
  // malformed hash; kInternal when the temporary file cannot be created.
  Result<std::shared_ptr<PackageUpload>> begin_upload(const std::string& hash);
  // Ends an upload whose bytes all arrived: checks them against the hash, makes the
  // file durable and gives it its name. Returns true when newly stored, false when
  // the package was already there. Errors: the upload's write error; kInvalidArgument
  // when the bytes hash to something else (nothing is stored); kInternal.
  Result<bool> finish_upload(PackageUpload& upload);

  // finish_upload with the sync and rename on the store's own thread; `done` runs on
  // `io` (or at once, when nothing is left to write).
  void finish_upload_async(boost::asio::io_context& io, const std::shared_ptr<PackageUpload>& upload,
                           std::function<void(Result<bool>)> done);

  // begin_upload + write + finish_upload of bytes at hand.
  Result<bool> put(const std::string& hash, const std::string& bytes);

  // Where the package's file is (for sending it from disk). Errors: kNotFound.
  Result<std::string> file(const std::string& hash) const;
  // The package's bytes. Errors: kNotFound, kInternal.
  Result<std::string> read(const std::string& hash) const;

  int64_t max_package_bytes() const { return max_package_bytes_; }
  int64_t quota_bytes() const { return quota_bytes_; }
  int64_t stored_bytes() const { return stored_bytes_; }
  int64_t bytes_uploaded() const { return bytes_uploaded_; }
  int64_t uploads() const { return uploads_; }
  int64_t count() const;

 private:
  std::string path_for(const std::string& hash) const { return dir_ + "/" + hash + ".tar.gz"; }
  // Checks the bytes against the hash and counts the upload; true when the package
  // still has to be stored.
  Result<bool> check_upload(PackageUpload& upload);
  // fdatasync, rename to `path`, fsync of `dir`. Any thread.
  static Status make_durable(PackageUpload& upload, const std::string& path, const std::string& dir);
  // Makes room for `bytes` more within the quota (removing unused packages, least
  // recently used first) and sets them aside for an upload being stored. Errors:
  // kResourceExhausted saying what holds the room.
  Status reserve(int64_t bytes);
  // The reservation ends; `stored`: the package is in the store now.
  void settle(int64_t bytes, bool stored);

  std::string dir_;
  int64_t max_package_bytes_;
  int64_t quota_bytes_;
  int64_t stored_bytes_ = 0;    // sizes of the stored packages
  int64_t reserved_bytes_ = 0;  // uploads being made durable
  std::function<bool(const std::string&)> in_use_;
  int64_t bytes_uploaded_ = 0;
  int64_t uploads_ = 0;
  int64_t next_upload_ = 0;
  boost::asio::thread_pool syncer_{1};
};

}  // namespace ag::head
