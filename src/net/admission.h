// Internal to net/: what each peer address may hold of this process (all its
// servers) at once: connections, and bytes of request bodies read into memory. Keeps
// a stranger from taking every descriptor, and a token holder on another machine from
// filling the head's memory with unfinished bodies.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace ag::net::detail {

// A peer on another machine gets at most kMaxPerPeer connections, and all of them
// together leave kOwnerReserve descriptors that only this machine's own clients
// (loopback) may use.
class Admission {
 public:
  static constexpr size_t kMaxPerPeer = 256;
  static constexpr size_t kOwnerReserve = 64;
  // Request bodies read into memory from one peer address on another machine (each
  // is bounded by its route's limit; this bounds them together).
  static constexpr size_t kMaxBodyBytesPerPeer = 64 << 20;

  static Admission& instance();

  // A held place for a connection from `peer`, released when the last owner of the
  // connection lets go of it; null when the connection must be refused.
  std::shared_ptr<void> admit(const std::string& peer);

  // Room for a body of `bytes` from `peer`, held until the returned holder goes; null
  // when the peer's bodies in memory would pass kMaxBodyBytesPerPeer.
  std::shared_ptr<void> hold_body(const std::string& peer, size_t bytes);

 private:
  void release(const std::string& peer);

  std::mutex mu_;
  size_t open_ = 0;
  std::unordered_map<std::string, size_t> per_peer_;
  std::unordered_map<std::string, size_t> body_bytes_;
};

}  // namespace ag::net::detail
