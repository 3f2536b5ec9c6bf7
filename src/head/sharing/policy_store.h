// PolicyStore: the sharing policy an admin sets: quotas per user and per group, queues
// (partitions), and where a user's groups come from. It keeps them in the meta table
// so that they hold across restarts: a change is a batch to write and what to make of
// it once durable (the JobWriter writes it in order with its own writes, and then
// weighs the queue again). It answers the submit checks that depend on policy alone;
// what jobs use of it is the job table's. Io thread only.
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "api/job_spec.h"
#include "common/result.h"
#include "head/scheduler/quotas.h"
#include "head/store/kv_store.h"

namespace ag::head {

// A queue (partition, `ag queue create`): the nodes its jobs run on (by label), their
// priority unless they choose one, what each user may hold in it, and whether its jobs
// may preempt lower-priority jobs (head/scheduler/preemption.h).
struct QueueDef {
  std::map<std::string, std::string> nodes_with;
  int default_priority = 0;
  sched::Limits per_user;  // max_priority unused
  bool preempt = false;
  // Its jobs that give no idle_gpu_timeout of their own get this one.
  std::optional<double> idle_gpu_timeout_s;
  bool operator==(const QueueDef&) const = default;
};

// A quota's limits as the API shows (and the store keeps) them: {"max_gpus",
// "max_cpu_millis", "max_memory", "max_running_jobs", "max_priority",
// "allow_no_preempt", "share"}, null for no limit.
nlohmann::json quota_limits_json(const sched::Limits& limits);

// A queue as the API shows (and the store keeps) it: {"nodes_with", "priority",
// "preempt", "max_gpus_per_user", "max_cpu_millis_per_user", "max_memory_per_user",
// "max_running_jobs_per_user", "idle_gpu_timeout"}, and back (errors name the field).
nlohmann::json queue_json(const QueueDef& queue);
Result<QueueDef> parse_queue(const nlohmann::json& body);

class PolicyStore {
 public:
  using GroupsOf = std::function<std::vector<std::string>(const std::string& user)>;

  explicit PolicyStore(store::KvStore& store) : store_(store) {}

  // Reads the stored quotas and queues (records that do not parse are skipped).
  // Errors: the store's.
  Status recover();

  // A change: `batch` to write, and `apply` to run once it is durable.
  struct Change {
    std::vector<store::Mutation> batch;
    std::function<void()> apply;
  };
  // A user's (or group's) limits, or none when `limits` sets none.
  Change set_quota(bool group, const std::string& name, const sched::Limits& limits);
  // A queue, or (nullopt) its removal; whether jobs still use it is the caller's check.
  Change set_queue(const std::string& name, std::optional<QueueDef> queue);

  const std::map<std::string, sched::Limits>& user_quotas() const { return quotas_.users; }
  const std::map<std::string, sched::Limits>& group_quotas() const { return quotas_.groups; }
  const std::map<std::string, QueueDef>& queues() const { return queues_; }
  const QueueDef* queue(const std::string& name) const;

  // Where a user's groups come from (the head's access control), for group quotas.
  void set_groups_of(GroupsOf groups_of) { groups_of_ = std::move(groups_of); }

  // The quotas with the groups of `owners` filled in, and each queue's per-user limits.
  sched::QuotaPolicy quota_policy(const std::set<std::string>& owners) const;
  // Users' fair-share weights other than 1.
  std::map<std::string, double> share_weights() const;

  // Submit checks (`where` prefixes the message):
  // kPermissionDenied: the spec's priority is over its owner's cap.
  std::optional<Error> check_priority_cap(const api::JobSpec& spec, const std::string& owner) const;
  // kInvalidArgument: an unknown queue, or one whose nodes conflict with the spec's
  // constraints; otherwise the spec gets the queue's priority unless it chose one.
  std::optional<Error> resolve_queue(api::JobSpec& spec, const std::string& where) const;
  // kPermissionDenied: --no-preempt by `owner`, who is no admin and whose quota (or a
  // group's) does not allow it.
  std::optional<Error> check_no_preempt(const api::JobSpec& spec, const std::string& owner, bool admin) const;

 private:
  store::KvStore& store_;
  sched::QuotaPolicy quotas_;  // users' and groups' limits (groups_of left empty)
  std::map<std::string, QueueDef> queues_;
  GroupsOf groups_of_;
};

}  // namespace ag::head
