#include "net/auth.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/ids.h"
#include "common/sha256.h"

namespace ag::net {

namespace {

std::string hmac_hex(const std::string& key, const std::string& message) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), digest, &length);
  return hex_encode(digest, length);
}

// "<expiry_s>.<hmac(token, 'ag-session|' + expiry_s)>"
std::string session_value(const std::string& token, int64_t expiry_s) {
  std::string expiry = std::to_string(expiry_s);
  return expiry + "." + hmac_hex(token, "ag-session|" + expiry);
}

// The value of cookie `name` in a Cookie header ("a=1; b=2"), or "" when absent.
std::string cookie_value(const std::string& header, const std::string& name) {
  size_t pos = 0;
  while (pos < header.size()) {
    size_t end = header.find(';', pos);
    if (end == std::string::npos) end = header.size();
    size_t start = header.find_first_not_of(' ', pos);
    if (start < end) {
      size_t eq = header.find('=', start);
      if (eq < end && header.compare(start, eq - start, name) == 0 && eq - start == name.size()) {
        return header.substr(eq + 1, end - eq - 1);
      }
    }
    pos = end + 1;
  }
  return "";
}

bool valid_session_cookie(const HttpRequest& request, const std::string& token, int64_t now_s) {
  std::string value = cookie_value(request.header("cookie"), session_cookie_name(token));
  size_t dot = value.find('.');
  if (token.empty() || dot == std::string::npos || dot == 0 || dot > 18) return false;
  int64_t expiry_s = 0;
  for (size_t i = 0; i < dot; ++i) {
    if (value[i] < '0' || value[i] > '9') return false;
    expiry_s = expiry_s * 10 + (value[i] - '0');
  }
  if (expiry_s <= now_s) return false;
  std::string expected = session_value(token, expiry_s);
  return value.size() == expected.size() && CRYPTO_memcmp(value.data(), expected.data(), value.size()) == 0;
}

}  // namespace

bool token_matches(const std::string& candidate, const std::string& token) {
  return !token.empty() && candidate.size() == token.size() &&
         CRYPTO_memcmp(candidate.data(), token.data(), token.size()) == 0;
}

bool has_valid_token(const HttpRequest& request, const std::string& token) {
  const std::string& header = request.header("authorization");
  static const std::string kPrefix = "Bearer ";
  if (header.size() <= kPrefix.size() || header.compare(0, kPrefix.size(), kPrefix) != 0) return false;
  return token_matches(header.substr(kPrefix.size()), token);
}

AuthMethod authenticate(const HttpRequest& request, const std::string& token, int64_t now_s) {
  if (has_valid_token(request, token)) return AuthMethod::kBearer;
  if (valid_session_cookie(request, token, now_s)) return AuthMethod::kCookie;
  return AuthMethod::kNone;
}

std::string session_cookie_name(const std::string& token) {
  return "ag_session_" + hmac_hex(token, "ag-session-name").substr(0, 12);
}

std::string session_set_cookie(const std::string& token, int64_t now_s) {
  return session_cookie_name(token) + "=" + session_value(token, now_s + kSessionCookieLifetimeS) +
         "; Path=/; Max-Age=" + std::to_string(kSessionCookieLifetimeS) + "; HttpOnly; SameSite=Strict";
}

std::string session_clear_cookie(const std::string& token) {
  return session_cookie_name(token) + "=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict";
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

Result<std::string> load_or_create_token(const std::string& data_dir) {
  std::string path = data_dir + "/token";
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
  std::string token = random_hex(24);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return internal_error("cannot create token file " + path + ": " + std::strerror(errno));
  std::string line = token + "\n";
  bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok) return internal_error("cannot write token file " + path + ": " + std::strerror(errno));
  return token;
}

}  // namespace ag::net
