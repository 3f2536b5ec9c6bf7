#include "net/admission.h"

#include <sys/resource.h>

#include "net/tls.h"

namespace ag::net::detail {
namespace {

size_t descriptor_limit() {
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 1 << 20;
  return static_cast<size_t>(limit.rlim_cur);
}

}  // namespace

Admission& Admission::instance() {
  static Admission admission;
  return admission;
}

std::shared_ptr<void> Admission::admit(const std::string& peer) {
  std::lock_guard lock(mu_);
  const bool own = is_loopback_host(peer);
  const size_t limit = descriptor_limit();
  const size_t cap = own ? (limit > 32 ? limit - 32 : limit / 2)
                         : (limit > kOwnerReserve * 2 ? limit - kOwnerReserve * 2 : limit / 2);
  size_t& mine = per_peer_[peer];
  if (open_ >= cap || (!own && mine >= kMaxPerPeer)) {
    if (mine == 0) per_peer_.erase(peer);
    return nullptr;
  }
  ++open_;
  ++mine;
  return std::shared_ptr<void>(new int(0), [this, peer](int* place) {
    delete place;
    release(peer);
  });
}

void Admission::release(const std::string& peer) {
  std::lock_guard lock(mu_);
  --open_;
  auto it = per_peer_.find(peer);
  if (it != per_peer_.end() && --it->second == 0) per_peer_.erase(it);
}

std::shared_ptr<void> Admission::hold_body(const std::string& peer, size_t bytes) {
  std::lock_guard lock(mu_);
  if (is_loopback_host(peer)) return std::make_shared<int>(0);
  size_t& held = body_bytes_[peer];
  if (held + bytes > kMaxBodyBytesPerPeer) {
    if (held == 0) body_bytes_.erase(peer);
    return nullptr;
  }
  held += bytes;
  return std::shared_ptr<void>(new int(0), [this, peer, bytes](int* holder) {
    delete holder;
    std::lock_guard lock(mu_);
    auto it = body_bytes_.find(peer);
    if (it != body_bytes_.end() && (it->second -= bytes) == 0) body_bytes_.erase(it);
  });
}

}  // namespace ag::net::detail
