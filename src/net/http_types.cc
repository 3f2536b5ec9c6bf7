#include "net/http_types.h"

#include <cctype>

namespace ag::net {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool url_decode(const std::string& in, bool plus_is_space, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c == '%') {
      if (i + 2 >= in.size()) return false;
      int hi = hex_value(in[i + 1]);
      int lo = hex_value(in[i + 2]);
      if (hi < 0 || lo < 0) return false;
      out->push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out->push_back(' ');
    } else {
      out->push_back(c);
    }
  }
  return true;
}

}  // namespace

const std::string& HttpRequest::header(const std::string& name) const {
  static const std::string kEmpty;
  auto it = headers.find(name);
  return it == headers.end() ? kEmpty : it->second;
}

std::vector<std::string> query_values(const std::string& target, const std::string& name) {
  std::vector<std::string> values;
  size_t q = target.find('?');
  if (q == std::string::npos) return values;
  const std::string rest = target.substr(q + 1);
  for (size_t start = 0; start <= rest.size();) {
    size_t amp = rest.find('&', start);
    std::string pair = rest.substr(start, amp == std::string::npos ? std::string::npos : amp - start);
    size_t eq = pair.find('=');
    std::string key, value;
    if (url_decode(pair.substr(0, eq), true, &key) && key == name &&
        (eq == std::string::npos || url_decode(pair.substr(eq + 1), true, &value))) {
      values.push_back(std::move(value));
    }
    if (amp == std::string::npos) break;
    start = amp + 1;
  }
  return values;
}

bool parse_target(const std::string& target, std::string* path,
                  std::map<std::string, std::string>* query) {
  size_t q = target.find('?');
  if (!url_decode(target.substr(0, q), false, path)) return false;
  query->clear();
  if (q == std::string::npos) return true;
  std::string rest = target.substr(q + 1);
  size_t start = 0;
  while (start <= rest.size()) {
    size_t amp = rest.find('&', start);
    std::string pair = rest.substr(start, amp == std::string::npos ? std::string::npos : amp - start);
    if (!pair.empty()) {
      size_t eq = pair.find('=');
      std::string key, value;
      if (!url_decode(pair.substr(0, eq), true, &key)) return false;
      if (eq != std::string::npos && !url_decode(pair.substr(eq + 1), true, &value)) return false;
      (*query)[key] = value;
    }
    if (amp == std::string::npos) break;
    start = amp + 1;
  }
  return true;
}

std::string url_encode(const std::string& value) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : value) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

}  // namespace ag::net
