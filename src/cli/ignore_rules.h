// Gitignore-style rules for packing a working_dir: the patterns of every .gitignore
// on the way down plus the user's excludes. Supports comments, `!` negation, a
// trailing `/` (directories only), a leading or inner `/` (anchored to the file's
// folder), `*`, `?`, `[...]` and `**`. The last matching rule wins.
#pragma once

#include <regex>
#include <string>
#include <vector>

namespace ag::cli {

class IgnoreRules {
 public:
  // Adds the pattern lines of a .gitignore (or of excludes) that sits in `base`
  // (a folder relative to the packed root, "" for the root).
  void add(const std::string& base, const std::vector<std::string>& lines);

  // True when `path` (relative to the root, '/'-separated) or a folder above it is
  // ignored. The last rule matching a path decides for it; a folder that is ignored
  // takes everything inside with it.
  bool ignored(const std::string& path, bool is_dir) const;

 private:
  struct Rule {
    std::string base;
    std::regex pattern;
    bool negate = false;
    bool dir_only = false;
  };
  bool matches(const std::string& path, bool is_dir) const;

  std::vector<Rule> rules_;
};

}  // namespace ag::cli
