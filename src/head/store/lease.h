// LeaseBackend: where heads sharing one store find which of them leads. A lease has a
// holder, an epoch that rises by one at every takeover (the fencing token every write
// and every message to a worker carries) and an expiry judged on the store's clock, so
// that no head's clock matters. PostgresStore is the backend; tests use a fake.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/result.h"

namespace ag::store {

// Who holds the lease: its holder and epoch, and whether it has not yet run out. An
// empty holder: nobody ever took it.
struct LeaseState {
  std::string holder;
  int64_t epoch = 0;
  bool live = false;
};

class LeaseBackend {
 public:
  virtual ~LeaseBackend() = default;
  // Takes the lease for `holder` for `ttl_ms` when nobody holds it or it ran out; the
  // new epoch, or nullopt while another holds it. Errors: the store's (kUnavailable).
  virtual Result<std::optional<int64_t>> acquire_lease(const std::string& holder, int64_t ttl_ms) = 0;
  // Extends the lease of (`holder`, `epoch`) by `ttl_ms` from now; false when it is no
  // longer theirs (it ran out, or another head took it). Errors: the store's.
  virtual Result<bool> renew_lease(const std::string& holder, int64_t epoch, int64_t ttl_ms) = 0;
  // Ends the lease of (`holder`, `epoch`) now, so that a standby takes over at once (a
  // head stopping on purpose); nothing when it is no longer theirs. Errors: the store's.
  virtual Status release_lease(const std::string& holder, int64_t epoch) = 0;
  // The lease as the store sees it now. Errors: the store's.
  virtual Result<LeaseState> read_lease() = 0;
  // From now on a write to the store commits only if (`holder`, `epoch`) still holds a
  // lease that has not run out, checked in the write's own transaction; otherwise it
  // fails kUnavailable and applies nothing.
  virtual void fence(const std::string& holder, int64_t epoch) = 0;
};

}  // namespace ag::store
