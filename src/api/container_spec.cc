#include "api/container_spec.h"

#include <cctype>
#include <set>

#include "common/path_prefix.h"

namespace ag::api {
namespace {

bool lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// A repository path component: lowercase letters and digits, with single '.', '_' or
// '-' (or "__") between them.
bool valid_component(std::string_view part) {
  if (part.empty() || !lower_alnum(part.front()) || !lower_alnum(part.back())) return false;
  for (size_t i = 0; i < part.size(); ++i) {
    char c = part[i];
    if (lower_alnum(c)) continue;
    if (c != '.' && c != '_' && c != '-') return false;
    if (!lower_alnum(part[i - 1]) && !(c == '_' && part[i - 1] == '_' && (i < 2 || lower_alnum(part[i - 2])))) {
      return false;
    }
  }
  return true;
}

bool valid_host(std::string_view host) {
  // name[:port], where name may be a dotted host name or "localhost"
  size_t colon = host.rfind(':');
  std::string_view name = host.substr(0, colon);
  if (name.empty()) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-') return false;
  }
  if (colon != std::string_view::npos) {
    std::string_view port = host.substr(colon + 1);
    if (port.empty() || port.size() > 5) return false;
    for (char c : port) {
      if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    }
  }
  return true;
}

}  // namespace

std::string image_reference_problem(std::string_view ref) {
  const std::string hint = "; write it as [REGISTRY/]NAME[:TAG][@sha256:DIGEST], e.g. docker.io/library/python:3.11";
  if (ref.empty()) return "is empty" + hint;
  if (ref.size() > kMaxImageBytes) return "is " + std::to_string(ref.size()) + " bytes; at most " + std::to_string(kMaxImageBytes);
  for (char c : ref) {
    if (std::isspace(static_cast<unsigned char>(c)) || std::iscntrl(static_cast<unsigned char>(c))) {
      return "holds a space or control character" + hint;
    }
  }
  if (ref.front() == '-') return "starts with '-'" + hint;
  std::string_view rest = ref;
  size_t at = rest.find('@');
  if (at != std::string_view::npos) {
    std::string_view digest = rest.substr(at + 1);
    size_t colon = digest.find(':');
    std::string_view hex = colon == std::string_view::npos ? "" : digest.substr(colon + 1);
    bool hex_ok = hex.size() >= 32;
    for (char c : hex) hex_ok = hex_ok && std::isxdigit(static_cast<unsigned char>(c));
    if (colon == std::string_view::npos || colon == 0 || !hex_ok) return "has a malformed digest '" + std::string(digest) + "'" + hint;
    rest = rest.substr(0, at);
  }
  // A tag follows the last ':' after the last '/'.
  size_t slash = rest.rfind('/');
  size_t colon = rest.rfind(':');
  if (colon != std::string_view::npos && (slash == std::string_view::npos || colon > slash)) {
    std::string_view tag = rest.substr(colon + 1);
    bool ok = !tag.empty() && tag.size() <= 128 && tag.front() != '.' && tag.front() != '-';
    for (char c : tag) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-');
    if (!ok) return "has a malformed tag '" + std::string(tag) + "'" + hint;
    rest = rest.substr(0, colon);
  }
  std::vector<std::string_view> parts;
  for (size_t start = 0;;) {
    size_t end = rest.find('/', start);
    parts.push_back(rest.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  // The first part names a registry when it looks like a host: a '.', a port, or localhost.
  size_t first = 0;
  if (parts.size() > 1 && (parts[0].find_first_of(".:") != std::string_view::npos || parts[0] == "localhost")) {
    if (!valid_host(parts[0])) return "has a malformed registry '" + std::string(parts[0]) + "'" + hint;
    first = 1;
  }
  for (size_t i = first; i < parts.size(); ++i) {
    if (!valid_component(parts[i])) {
      return "has a malformed name part '" + std::string(parts[i]) +
             "' (lowercase letters, digits and single '.', '_' or '-' between them)" + hint;
    }
  }
  return "";
}

std::string mount_path_problem(std::string_view path) {
  if (path.empty()) return "is empty";
  if (path.size() > kMaxMountPathBytes) return "is longer than " + std::to_string(kMaxMountPathBytes) + " bytes";
  if (path.front() != '/') return "'" + std::string(path) + "' is not an absolute path (it must start with '/')";
  for (char c : path) {
    if (c == ',' || c == ':' || std::iscntrl(static_cast<unsigned char>(c))) {
      return "'" + std::string(path) + "' holds ',', ':' or a control character, which container engines cannot mount";
    }
  }
  for (size_t start = 1; start <= path.size();) {
    size_t end = path.find('/', start);
    std::string_view part = path.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    if (part == "." || part == "..") return "'" + std::string(path) + "' has a '" + std::string(part) + "' part; give the plain path";
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return "";
}

std::string mounts_problem(const std::vector<Mount>& mounts) {
  std::set<std::string> targets;
  for (const auto& m : mounts) {
    std::string target = m.target;
    while (target.size() > 1 && target.back() == '/') target.pop_back();
    if (target == "/") return "target '/' would hide the whole image";
    if (!targets.insert(target).second) return "target '" + target + "' is mounted twice";
  }
  return "";
}

std::optional<std::string> allowing_prefix(std::string_view path, const std::vector<std::string>& allowed) {
  for (const auto& prefix : allowed) {
    if (path_under(path, prefix)) return prefix;
  }
  return std::nullopt;
}

}  // namespace ag::api
