// PackageStore: the head's content-addressed store of working_dir packages (gzip'd
// tar files), one file per SHA-256 under <data_dir>/packages/. Clients upload a
// package once (HEAD first: an unchanged folder uploads nothing); workers download it
// by hash and verify it. Io thread only.
#pragma once

#include <cstdint>
#include <string>

#include "common/result.h"

namespace ag::head {

class PackageStore {
 public:
  PackageStore(std::string dir, int64_t max_package_bytes);

  bool contains(const std::string& hash) const;

  // Stores `bytes` under `hash` after checking that they hash to it. Returns true
  // when newly stored, false when it was already there. Errors: kInvalidArgument
  // (malformed hash, bytes hash to something else), kTooLarge (over the limit, with
  // the sizes), kResourceExhausted / kInternal when the file cannot be written.
  Result<bool> put(const std::string& hash, const std::string& bytes);

  // The package's bytes. Errors: kNotFound, kInternal.
  Result<std::string> read(const std::string& hash) const;

  int64_t max_package_bytes() const { return max_package_bytes_; }
  int64_t bytes_uploaded() const { return bytes_uploaded_; }
  int64_t uploads() const { return uploads_; }
  int64_t count() const;

 private:
  std::string path_for(const std::string& hash) const { return dir_ + "/" + hash + ".tar.gz"; }

  std::string dir_;
  int64_t max_package_bytes_;
  int64_t bytes_uploaded_ = 0;
  int64_t uploads_ = 0;
};

}  // namespace ag::head
