// Fair share: among pending jobs of equal priority, the user who used the cluster least
// lately goes first. Usage is counted in GPU-equivalent seconds (a GPU held for a second
// is 1, a CPU 1/16: a typical 8-GPU node's 128 CPUs weigh as much as its GPUs, so CPU
// clusters share fairly too) and decays by half every half-life (7 days by default), so
// what someone ran last month weighs little against what they run today.
//
// The queue (PendingQueue) keeps each owner's pending jobs apart and merges them in
// that order on each walk, so a pass looks at the right jobs first without sorting the
// whole queue. All of it is pure: the time and the usage come in as data.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/resources.h"

namespace ag::sched {

inline constexpr int64_t kDefaultUsageHalfLifeMs = int64_t{7} * 24 * 3600 * 1000;

// One user's usage: `units` as of `at_ms`.
struct UsageRecord {
  double units = 0;
  int64_t at_ms = 0;
};

// The record's units decayed to `now_ms`.
double decayed(const UsageRecord& record, int64_t now_ms, int64_t half_life_ms);
// The record decayed to `now_ms` with `units` more.
UsageRecord charged(const UsageRecord& record, double units, int64_t now_ms, int64_t half_life_ms);
// What holding `held` for one second costs, in GPU-equivalents.
double billing_rate(const Resources& held);

// Each user's usage now, their part of all usage, and their fair-share factor: 2^(-U/S)
// where U is their part of the usage and S their share (their weight, 1 unless
// `weights` says otherwise, of the weights of the users listed): 1 for no use, 0.5 at
// exactly their share, towards 0 above it. The queue orders owners the same way, by
// usage divided by weight.
struct ShareLine {
  std::string user;
  double usage = 0;         // GPU-equivalent seconds, decayed
  double usage_part = 0;    // of everyone's
  double share = 0;         // what an equal share is
  double factor = 0;        // fair-share factor
};
std::vector<ShareLine> share_report(const std::map<std::string, UsageRecord>& usage, int64_t now_ms,
                                    int64_t half_life_ms, const std::map<std::string, double>& weights = {});

// Which nodes a job may run on, as far as the node decides: labels it must carry, a
// container engine, paths it must allow mounting; and the queue the job is in, whose
// own labels (which an admin may change while the job waits) its nodes must carry too.
struct NodeNeeds {
  std::map<std::string, std::string> labels;
  bool containers = false;
  std::vector<std::string> mounts;
  std::string queue;
  auto operator<=>(const NodeNeeds&) const = default;
};

class PendingQueue {
 public:
  struct Entry {
    std::string owner;
    int priority = 0;
    uint64_t seq = 0;  // submit order
    std::string job_id;
    Resources need;    // the whole job's (every task's) resources
    NodeNeeds where;
  };
  void add(const Entry& entry);
  void remove(const Entry& entry);
  // What the pending jobs ask of their nodes, each kind once, with how many ask it: a
  // node that none of them may use changes nothing for the queue.
  const std::map<NodeNeeds, size_t>& node_needs() const { return node_needs_; }
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  // Owners with pending jobs.
  std::vector<std::string> owners() const;

  // The least an owner's pending job needs, in each dimension apart: no job of theirs
  // needs less (a quota this is over, every job of theirs is over).
  Resources least_need(const std::string& owner) const;

  // Calls `visit(job_id)` in queue order until it returns false: higher priority first;
  // among equal priorities, the owner with the least `usage_of(owner)` first (asked
  // once per owner); then submit order.
  void walk(const std::function<double(const std::string&)>& usage_of,
            const std::function<bool(const std::string&)>& visit) const;
  // The same, where visit may also leave out the rest of the job's owner's jobs.
  enum class Visit { kNext, kSkipOwner, kStop };
  void walk_owners(const std::function<double(const std::string&)>& usage_of,
                   const std::function<Visit(const std::string& owner, const std::string& job_id)>& visit) const;

 private:
  using Key = std::pair<int64_t, uint64_t>;  // (-priority, seq)
  struct Owner {
    std::map<Key, std::string> jobs;
    std::multiset<int64_t> cpu_millis, memory_bytes, gpus;  // their jobs' needs
  };
  std::map<std::string, Owner> by_owner_;
  std::map<NodeNeeds, size_t> node_needs_;
  size_t size_ = 0;
};

}  // namespace ag::sched
