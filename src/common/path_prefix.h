// Whether a path lies under a prefix, by whole parts: "/data" holds "/data" and
// "/data/x", never "/database". Paths are absolute and already normalised.
#pragma once

#include <string_view>

namespace ag {

inline bool path_under(std::string_view path, std::string_view prefix) {
  while (prefix.size() > 1 && prefix.back() == '/') prefix.remove_suffix(1);
  if (prefix == "/") return !path.empty() && path.front() == '/';
  if (path.substr(0, prefix.size()) != prefix) return false;
  return path.size() == prefix.size() || path[prefix.size()] == '/';
}

}  // namespace ag
