#include "cli/ignore_rules.h"

namespace ag::cli {
namespace {

// Translates one gitignore glob into an ECMAScript regex over a relative path.
std::string glob_to_regex(const std::string& glob, bool anchored) {
  std::string re = anchored ? "^" : "^(?:.*/)?";
  for (size_t i = 0; i < glob.size(); ++i) {
    char c = glob[i];
    if (c == '*') {
      if (i + 1 < glob.size() && glob[i + 1] == '*') {
        bool slash_after = i + 2 < glob.size() && glob[i + 2] == '/';
        if (slash_after) {
          re += "(?:.*/)?";  // "**/": zero or more folders
          i += 2;
        } else {
          re += ".*";  // "/**" or a bare "**": everything
          i += 1;
        }
      } else {
        re += "[^/]*";
      }
    } else if (c == '?') {
      re += "[^/]";
    } else if (c == '[') {
      size_t close = glob.find(']', i + 1);
      if (close == std::string::npos) {
        re += "\\[";
      } else {
        std::string cls = glob.substr(i + 1, close - i - 1);
        if (!cls.empty() && cls[0] == '!') cls[0] = '^';
        re += "[" + cls + "]";
        i = close;
      }
    } else if (c == '\\' && i + 1 < glob.size()) {
      re += "\\";
      re += glob[++i];
    } else if (std::string(".^$|()+{}").find(c) != std::string::npos) {
      re += "\\";
      re += c;
    } else {
      re += c;
    }
  }
  // A match on a folder covers everything inside it.
  return re + "(?:/.*)?$";
}

}  // namespace

void IgnoreRules::add(const std::string& base, const std::vector<std::string>& lines) {
  for (std::string line : lines) {
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r' || line.back() == '\t')) line.pop_back();
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

bool IgnoreRules::ignored(const std::string& path, bool is_dir) const {
  bool result = false;
  for (const auto& rule : rules_) {
    std::string rel = path;
    if (!rule.base.empty()) {
      if (path.rfind(rule.base + "/", 0) != 0) continue;
      rel = path.substr(rule.base.size() + 1);
    }
    if (rule.dir_only && !is_dir) {
      // "build/" still covers files inside a folder named build.
      size_t slash = rel.rfind('/');
      if (slash == std::string::npos || !std::regex_match(rel.substr(0, slash), rule.pattern)) continue;
    } else if (!std::regex_match(rel, rule.pattern)) {
      continue;
    }
    result = !rule.negate;
  }
  return result;
}

}  // namespace ag::cli
