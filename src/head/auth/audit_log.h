// AuditLog: who changed what on the head, when, and from where.
//
// Every mutating API call an authenticated caller makes is recorded, refused ones
// too (a user stopping another's job, a viewer submitting). Submissions are recorded
// with their job (its owner and the address it came from), so a burst of submits
// costs no extra write; everything else is an entry of the `audit` table, of which
// the newest kKeep are kept. recent() merges both, newest first. Io thread only.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "common/result.h"
#include "head/jobs/job_table.h"
#include "head/store/kv_store.h"

namespace ag::head {

struct AuditEntry {
  int64_t time_ms = 0;
  std::string actor;    // user name ("" when the caller had no valid credential)
  std::string from;     // the caller's address
  std::string action;   // "POST /api/jobs/job_x/stop", "user add bob", ...
  std::string outcome;  // "ok", or the refusal / error sent back
};

// Which entries a reader wants: every field given must hold.
struct AuditFilter {
  std::string actor;     // exactly this user
  std::string action;    // the action contains this ("stop", "/api/users", "submit")
  int64_t since_ms = 0;  // at or after
  bool matches(const AuditEntry& entry) const {
    return (actor.empty() || entry.actor == actor) && entry.time_ms >= since_ms &&
           (action.empty() || entry.action.find(action) != std::string::npos);
  }
};

class AuditLog {
 public:
  static constexpr size_t kKeep = 10000;

  AuditLog(store::KvStore& store, const JobTable& jobs) : store_(store), jobs_(jobs) {}

  // Loads the kept entries. Errors: kInternal.
  Status recover();

  // Records `entry` (written in the background; a failed write is logged).
  void record(AuditEntry entry);

  // The newest `limit` entries `filter` takes, submissions included, newest first.
  std::vector<AuditEntry> recent(size_t limit, const AuditFilter& filter = {}) const;

 private:
  store::KvStore& store_;
  const JobTable& jobs_;
  std::deque<std::pair<std::string, AuditEntry>> entries_;  // by key, oldest first
  uint64_t seq_ = 0;
};

}  // namespace ag::head
