#include "cli/ignore_rules.h"

#include <cctype>

namespace ag::cli {
namespace {

// Translates one gitignore glob into an ECMAScript regex over a relative path. A
// pattern matches the path itself only; the packer does not descend into an ignored
// folder, which is how a folder rule covers what is inside it (as in git).
std::string glob_to_regex(const std::string& glob, bool anchored) {
  std::string re = anchored ? "^" : "^(?:.*/)?";
  for (size_t i = 0; i < glob.size(); ++i) {
    char c = glob[i];
    if (c == '*') {
      bool double_star = i + 1 < glob.size() && glob[i + 1] == '*';
      bool segment_start = i == 0 || glob[i - 1] == '/';
      bool segment_end = i + 2 >= glob.size() || glob[i + 2] == '/';
      if (double_star && segment_start && segment_end) {
        if (i + 2 < glob.size()) {
          re += "(?:.*/)?";  // "**/": zero or more folders
          i += 2;
        } else {
          re += ".*";  // a trailing "/**": everything inside
          i += 1;
        }
      } else {
        // "*", or "**" inside a name, which git reads as a plain "*".
        re += "[^/]*";
        if (double_star) ++i;
      }
    } else if (c == '?') {
      re += "[^/]";
    } else if (c == '[') {
      size_t close = glob.find(']', i + 2);
      if (close == std::string::npos) {
        re += "\\[";
      } else {
        std::string cls = glob.substr(i + 1, close - i - 1);
        bool negated = cls[0] == '!' || cls[0] == '^';
        if (negated) cls.erase(0, 1);
        std::string escaped;
        for (char k : cls) escaped += (k == '\\' || k == '[') ? std::string("\\") + k : std::string(1, k);
        // A bracket expression never matches a slash.
        re += negated ? "[^/" + escaped + "]" : "(?!/)[" + escaped + "]";
        i = close;
      }
    } else if (c == '\\' && i + 1 < glob.size()) {
      char next = glob[++i];
      if (std::isalnum(static_cast<unsigned char>(next))) {
        re += next;
      } else {
        re += "\\";
        re += next;
      }
    } else if (std::string(".^$|()+{}").find(c) != std::string::npos) {
      re += "\\";
      re += c;
    } else {
      re += c;
    }
  }
  return re + "$";
}

}  // namespace

void IgnoreRules::add(const std::string& base, const std::vector<std::string>& lines) {
  for (std::string line : lines) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    // Trailing spaces are dropped unless escaped with a backslash ("q\ ").
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t') &&
           !(line.size() >= 2 && line[line.size() - 2] == '\\')) {
      line.pop_back();
    }
    if (line.empty() || line[0] == '#') continue;
    Rule rule;
    rule.base = base;
    if (line[0] == '!') {
      rule.negate = true;
      line.erase(0, 1);
    } else if (line[0] == '\\') {
      line.erase(0, 1);
    }
    if (!line.empty() && line.back() == '/') {
      rule.dir_only = true;
      line.pop_back();
    }
    if (line.empty()) continue;
    bool anchored = line.find('/') != std::string::npos;
    if (line[0] == '/') line.erase(0, 1);
    try {
      rule.pattern = std::regex(glob_to_regex(line, anchored), std::regex::ECMAScript | std::regex::optimize);
    } catch (const std::regex_error&) {
      continue;  // git ignores patterns it cannot read; so do we
    }
    rules_.push_back(std::move(rule));
  }
}

bool IgnoreRules::matches(const std::string& path, bool is_dir) const {
  bool result = false;
  for (const auto& rule : rules_) {
    std::string rel = path;
    if (!rule.base.empty()) {
      if (path.rfind(rule.base + "/", 0) != 0) continue;
      rel = path.substr(rule.base.size() + 1);
    }
    if (rule.dir_only && !is_dir) continue;
    if (!std::regex_match(rel, rule.pattern)) continue;
    result = !rule.negate;
  }
  return result;
}

bool IgnoreRules::ignored(const std::string& path, bool is_dir) const {
  // As in git, nothing inside an ignored folder can be brought back by a later rule.
  for (size_t slash = path.find('/'); slash != std::string::npos; slash = path.find('/', slash + 1)) {
    if (matches(path.substr(0, slash), /*is_dir=*/true)) return true;
  }
  return matches(path, is_dir);
}

}  // namespace ag::cli
