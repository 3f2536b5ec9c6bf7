// Packs a working_dir for upload: a tar whose bytes depend only on the folder's
// contents (sorted entries, zero mtimes and owners, normalised modes), so the same
// folder always has the same SHA-256 and uploads once.
// Skips .git, __pycache__, what .gitignore files exclude and the user's excludes.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/result.h"

namespace ag::cli {

struct Package {
  std::string bytes;   // the tar
  std::string sha256;  // hex
  int64_t files = 0;
  std::vector<std::pair<std::string, int64_t>> biggest;  // up to 5 largest files, largest first
  // What .gitignore files and the user's excludes left out (.git and __pycache__ are
  // not counted): files, and their bytes.
  int64_t skipped_files = 0;
  int64_t skipped_bytes = 0;
};

// Errors: kInvalidArgument when `dir` is missing or not a folder; kInternal when a
// file cannot be read.
Result<Package> pack_directory(const std::string& dir, const std::vector<std::string>& excludes);

}  // namespace ag::cli
