// Filesystem helpers for tests that work on real folders: a temporary directory
// removed at the end of the test, file writers and a sorted listing of a tree.
// Test-only; each helper is used from the test's own thread.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace ag::testing {

namespace fs = std::filesystem;

// A fresh folder under the system temp directory, removed (with everything in it)
// when the object goes out of scope.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "ag_unit_XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed for " << pattern;
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& relative) const { return path_ / relative; }

 private:
  fs::path path_;
};

// Writes `content` to `path`, creating the parent folders, and sets `perms`.
inline void write_file(const fs::path& path, const std::string& content, fs::perms perms = fs::perms(0644)) {
  fs::create_directories(path.parent_path());
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << content;
  }
  fs::permissions(path, perms);
}

inline std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every path under `root`, relative and sorted; folders end in "/", symlinks are
// shown as "name -> target" and are not followed.
inline std::vector<std::string> list_tree(const fs::path& root) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(root, ec))) return out;
  for (auto it = fs::recursive_directory_iterator(root, ec); it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    // lexically: fs::relative would resolve a symlink to its target.
    std::string rel = it->path().lexically_relative(root).generic_string();
    fs::file_type type = it->symlink_status(ec).type();
    if (type == fs::file_type::directory) {
      out.push_back(rel + "/");
    } else if (type == fs::file_type::symlink) {
      out.push_back(rel + " -> " + fs::read_symlink(it->path(), ec).string());
    } else {
      out.push_back(rel);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The permission bits (including set-user-ID, set-group-ID and sticky) of `path`,
// without following a symlink.
inline unsigned mode_bits(const fs::path& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return 0;
  return static_cast<unsigned>(st.st_mode) & 07777u;
}

}  // namespace ag::testing
