// Quotas: the most a user, or a group of users together, may hold at once — GPUs, CPUs,
// memory, running jobs. A job that would take its owner or one of the owner's groups
// over a quota waits (PENDING, kind kQuota, with the reason) and reserves nothing; it
// starts the moment it fits, as jobs of that user end or the admin raises the quota.
//
// Pure: the ledger starts from what running jobs hold (by owner) and adds what a pass
// places, so the check is exact within a pass.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/resources.h"

namespace ag::sched {

struct PendingJob;

// Maxima; -1 for no limit.
struct Limits {
  int64_t gpus = -1;
  int64_t cpu_millis = -1;
  int64_t memory_bytes = -1;
  int64_t running_jobs = -1;
  // The highest priority jobs may be submitted with (checked at submit; unset: none).
  std::optional<int> max_priority;
  // Its jobs may be kept from preemption (`ag submit --no-preempt`; checked at submit).
  bool allow_no_preempt = false;
  // A user's fair-share weight (fair_share.h): 2 is twice the share of a user with 1.
  double share = 1;
  bool operator==(const Limits&) const = default;
  bool any() const {
    return gpus >= 0 || cpu_millis >= 0 || memory_bytes >= 0 || running_jobs >= 0 || max_priority.has_value() ||
           allow_no_preempt || share != 1;
  }
};

// The lowest priority cap among `user`'s own and their groups' (nullopt: none), and
// whose it is ("user alice", "group vision").
struct PriorityCap {
  int max_priority = 0;
  std::string whose;
};


// What one owner (or group) holds now.
struct Use {
  Resources held;
  int64_t running_jobs = 0;
  Use& operator+=(const Use& other) {
    held += other.held;
    running_jobs += other.running_jobs;
    return *this;
  }
};

// A user in a queue (queue name, user): queues (queues.h) limit each user within them.
using QueueUser = std::pair<std::string, std::string>;

struct QuotaPolicy {
  std::map<std::string, Limits> users;
  std::map<std::string, Limits> groups;
  std::map<std::string, std::vector<std::string>> groups_of;  // user -> their groups
  std::map<std::string, Limits> queue_users;  // queue -> what each user may hold in it
  bool empty() const { return users.empty() && groups.empty() && queue_users.empty(); }
};

std::optional<PriorityCap> priority_cap(const QuotaPolicy& policy, const std::string& user);

class QuotaLedger {
 public:
  // `use`: what each owner's running jobs hold now; `queue_use`: the same by queue.
  QuotaLedger(const QuotaPolicy& policy, std::map<std::string, Use> use, std::map<QueueUser, Use> queue_use = {});

  // Why placing `job` would take its owner or a group of theirs over a quota, in words
  // ("user alice holds 8 of the 8 GPUs her quota allows; this job needs 2"), or nullopt.
  std::optional<std::string> over_quota(const PendingJob& job) const;
  // The job was placed: its owner and their groups hold it now.
  void add(const PendingJob& job);

  const std::map<std::string, Use>& users() const { return users_; }
  const std::map<std::string, Use>& groups() const { return groups_; }

 private:
  const QuotaPolicy& policy_;
  std::map<std::string, Use> users_;
  std::map<std::string, Use> groups_;
  std::map<QueueUser, Use> queue_users_;
};

}  // namespace ag::sched
