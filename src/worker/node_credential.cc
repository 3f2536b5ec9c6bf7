#include "worker/node_credential.h"

#include <sys/stat.h>

#include "net/auth.h"

namespace ag::worker {

Result<std::unique_ptr<NodeCredential>> NodeCredential::load(const std::string& data_dir, std::string join_token) {
  std::string path = data_dir + "/node-credential";
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (S_ISLNK(st.st_mode)) {
      return Error{ErrorCode::kPermissionDenied, "node credential file " + path + " is a symbolic link; remove it"};
    }
    auto saved = net::read_private_token_file(path);
    if (!saved.ok()) return saved.error();
    return std::unique_ptr<NodeCredential>(new NodeCredential(path, saved.value(), true));
  }
  if (join_token.empty()) {
    return invalid_argument("no token to join with: pass --token-file FILE holding a join token (`ag start-head` "
                            "prints one; `ag token create --join` makes more)");
  }
  return std::unique_ptr<NodeCredential>(new NodeCredential(path, std::move(join_token), false));
}

std::string NodeCredential::token() const {
  std::lock_guard lock(mu_);
  return token_;
}

bool NodeCredential::is_node_credential() const {
  std::lock_guard lock(mu_);
  return own_;
}

Status NodeCredential::adopt(const std::string& credential) {
  if (Status s = net::write_token_file(path_, credential); !s) return s;
  std::lock_guard lock(mu_);
  token_ = credential;
  own_ = true;
  return {};
}

}  // namespace ag::worker
