// NodeCredential: the token this worker shows the head. A worker first joins with a
// join token; the head answers its registration with the node's own credential,
// bound to its node id, which is kept in <data dir>/node-credential (mode 0600) and
// used from then on — for the worker channel and package downloads — while the
// join token is forgotten. A restarted worker finds the file and needs no join
// token. Thread-safe (package downloads read it from their own thread).
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "common/result.h"

namespace ag::worker {

class NodeCredential {
 public:
  // The node's saved credential when <data_dir>/node-credential exists (it must be
  // private: kPermissionDenied otherwise), else `join_token`. Errors: kInvalidArgument
  // when there is neither.
  static Result<std::unique_ptr<NodeCredential>> load(const std::string& data_dir, std::string join_token);

  std::string token() const;
  // True once the token is the node's own credential rather than a join token.
  bool is_node_credential() const;
  const std::string& path() const { return path_; }

  // Keeps the node's own credential: written to the file first, then used.
  Status adopt(const std::string& credential);

 private:
  NodeCredential(std::string path, std::string token, bool own) : path_(std::move(path)), token_(std::move(token)), own_(own) {}

  const std::string path_;
  mutable std::mutex mu_;
  std::string token_;
  bool own_ = false;
};

}  // namespace ag::worker
