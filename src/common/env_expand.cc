#include "common/env_expand.h"

#include <cctype>

namespace ag {
namespace {
bool is_name_char(char c, bool first) {
  return c == '_' || std::isalpha(static_cast<unsigned char>(c)) ||
         (!first && std::isdigit(static_cast<unsigned char>(c)));
}
}  // namespace

std::optional<std::string> expand_env_vars(const std::string& value, const std::map<std::string, std::string>& env,
                                           size_t max_bytes) {
  std::string out;
  out.reserve(value.size());
  for (size_t i = 0; i < value.size(); ++i) {
    char c = value[i];
    if (c != '$' || i + 1 >= value.size()) {
      out.push_back(c);
      continue;
    }
    char next = value[i + 1];
    if (next == '$') {
      out.push_back('$');
      ++i;
      continue;
    }
    std::string name;
    size_t end = i + 1;
    if (next == '{') {
      size_t close = value.find('}', i + 2);
      if (close == std::string::npos) {
        out.push_back(c);
        continue;
      }
      name = value.substr(i + 2, close - i - 2);
      end = close + 1;
    } else {
      while (end < value.size() && is_name_char(value[end], end == i + 1)) ++end;
      name = value.substr(i + 1, end - i - 1);
    }
    if (name.empty()) {
      out.push_back(c);
      continue;
    }
    auto it = env.find(name);
    if (it != env.end()) {
      if (out.size() + it->second.size() > max_bytes) return std::nullopt;
      out += it->second;
    }
    i = end - 1;
  }
  if (out.size() > max_bytes) return std::nullopt;
  return out;
}

}  // namespace ag
