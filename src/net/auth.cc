#include "net/auth.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/ids.h"

namespace ag::net {

std::string_view bearer_token(const HttpRequest& request) {
  std::string_view header = request.header("authorization");
  constexpr std::string_view kPrefix = "Bearer ";
  if (header.size() <= kPrefix.size() || header.substr(0, kPrefix.size()) != kPrefix) return {};
  return header.substr(kPrefix.size());
}

std::string cookie_value(const HttpRequest& request, const std::string& name) {
  const std::string& header = request.header("cookie");
  size_t pos = 0;
  while (pos < header.size()) {
    size_t end = header.find(';', pos);
    if (end == std::string::npos) end = header.size();
    size_t start = header.find_first_not_of(' ', pos);
    if (start < end) {
      size_t eq = header.find('=', start);
      if (eq < end && eq - start == name.size() && header.compare(start, eq - start, name) == 0) {
        return header.substr(eq + 1, end - eq - 1);
      }
    }
    pos = end + 1;
  }
  return "";
}

std::string session_set_cookie(const std::string& name, const std::string& value) {
  return name + "=" + value + "; Path=/; Max-Age=" + std::to_string(kSessionCookieLifetimeS) +
         "; HttpOnly; SameSite=Strict";
}

std::string session_clear_cookie(const std::string& name) {
  return name + "=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict";
}

bool is_state_changing(const std::string& method) {
  return method != "GET" && method != "HEAD" && method != "OPTIONS";
}

bool passes_csrf_check(const HttpRequest& request) {
  const std::string& origin = request.header("origin");
  const std::string& host = request.header("host");
  bool same_origin = !origin.empty() && !host.empty() &&
                     (origin == "http://" + host || origin == "https://" + host);
  // "null" (sandboxed frames, some redirects) and any other site are foreign.
  if (!origin.empty() && !same_origin) return false;
  return same_origin || !request.header("x-ag-csrf").empty();
}

Result<std::string> read_token_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return Error{errno == ENOENT ? ErrorCode::kNotFound : ErrorCode::kInternal,
                 "cannot read token file " + path + ": " + std::strerror(errno)};
  }
  std::stringstream ss;
  ss << in.rdbuf();
  std::string token = ss.str();
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ')) token.pop_back();
  if (token.empty()) return internal_error("token file " + path + " is empty");
  return token;
}

Result<std::string> read_private_token_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return Error{errno == ENOENT ? ErrorCode::kNotFound : ErrorCode::kInternal,
                 "cannot read token file " + path + ": " + std::strerror(errno)};
  }
  struct stat st {};
  const bool stat_ok = ::fstat(fd, &st) == 0;
  ::close(fd);
  if (!stat_ok) return internal_error("cannot stat token file " + path + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return invalid_argument("token file " + path + " is not a regular file");
  if (st.st_uid != ::geteuid()) {
    return Error{ErrorCode::kPermissionDenied, "token file " + path + " belongs to uid " + std::to_string(st.st_uid) +
                                                   ", not to this user; use a file of your own"};
  }
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return Error{ErrorCode::kPermissionDenied, "token file " + path + " can be read by other users (mode " + mode +
                                                   "); run `chmod 600 " + path + "`"};
  }
  return read_token_file(path);
}

Status write_token_file(const std::string& path, const std::string& token) {
  std::string tmp = path + ".new";
  ::unlink(tmp.c_str());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return internal_error("cannot create token file " + tmp + ": " + std::strerror(errno));
  std::string line = token + "\n";
  bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return internal_error("cannot write token file " + path + ": " + std::strerror(errno));
  }
  return {};
}

Result<std::string> load_or_create_token(const std::string& path, const std::string& prefix) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    // Only a token file the head made itself: never one reached through a link, nor
    // one others can read or that another user planted.
    if (S_ISLNK(st.st_mode)) {
      return Error{ErrorCode::kPermissionDenied, "token file " + path +
                                                     " is a symbolic link; the head uses only a token file it "
                                                     "created: remove the link"};
    }
    return read_private_token_file(path);
  }
  std::string token = prefix + random_hex(24);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return internal_error("cannot create token file " + path + ": " + std::strerror(errno));
  std::string line = token + "\n";
  bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok) return internal_error("cannot write token file " + path + ": " + std::strerror(errno));
  return token;
}

}  // namespace ag::net
