#include "net/auth.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/ids.h"

namespace ag::net {

bool has_valid_token(const HttpRequest& request, const std::string& token) {
  const std::string& header = request.header("authorization");
  static const std::string kPrefix = "Bearer ";
  if (token.empty() || header.size() != kPrefix.size() + token.size() ||
      header.compare(0, kPrefix.size(), kPrefix) != 0) {
    return false;
  }
  return CRYPTO_memcmp(header.data() + kPrefix.size(), token.data(), token.size()) == 0;
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

Result<std::string> load_or_create_token(const std::string& data_dir) {
  std::string path = data_dir + "/token";
  auto existing = read_token_file(path);
  if (existing.ok() || existing.error().code != ErrorCode::kNotFound) return existing;
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
