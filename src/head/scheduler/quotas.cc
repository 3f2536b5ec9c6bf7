// Quotas. See quotas.h.
#include "head/scheduler/quotas.h"

#include "common/amounts.h"
#include "head/scheduler/scheduler.h"

namespace ag::sched {
namespace {

const std::vector<std::string> kNoGroups;

// Why `need` more on top of `use` passes `limits`, said of `who` ("user alice",
// "group vision"), or "".
std::string over(const std::string& who, const Limits& limits, const Use& use, const Resources& need) {
  if (limits.running_jobs >= 0 && use.running_jobs + 1 > limits.running_jobs) {
    return who + " runs " + std::to_string(use.running_jobs) + " of the " + std::to_string(limits.running_jobs) +
           " jobs its quota allows";
  }
  if (limits.gpus >= 0 && use.held.gpus + need.gpus > limits.gpus) {
    return who + " holds " + std::to_string(use.held.gpus) + " of the " + std::to_string(limits.gpus) +
           " GPUs its quota allows; this job needs " + std::to_string(need.gpus);
  }
  if (limits.cpu_millis >= 0 && use.held.cpu_millis + need.cpu_millis > limits.cpu_millis) {
    return who + " holds " + format_cpus(use.held.cpu_millis) + " of the " + format_cpus(limits.cpu_millis) +
           " CPUs its quota allows; this job needs " + format_cpus(need.cpu_millis);
  }
  if (limits.memory_bytes >= 0 && use.held.memory_bytes + need.memory_bytes > limits.memory_bytes) {
    return who + " holds " + format_memory(use.held.memory_bytes) + " of the " + format_memory(limits.memory_bytes) +
           " of memory its quota allows; this job needs " + format_memory(need.memory_bytes);
  }
  return "";
}

Resources whole_job(const PendingJob& job) {
  return {job.per_task.cpu_millis * job.num_tasks, job.per_task.memory_bytes * job.num_tasks,
          job.per_task.gpus * job.num_tasks};
}

}  // namespace

std::optional<PriorityCap> priority_cap(const QuotaPolicy& policy, const std::string& user) {
  std::optional<PriorityCap> cap;
  const auto consider = [&cap](const Limits& limits, const std::string& whose) {
    if (limits.max_priority && (!cap || *limits.max_priority < cap->max_priority)) cap = {*limits.max_priority, whose};
  };
  if (auto limits = policy.users.find(user); limits != policy.users.end()) consider(limits->second, "user " + user);
  if (auto groups = policy.groups_of.find(user); groups != policy.groups_of.end()) {
    for (const auto& group : groups->second) {
      if (auto limits = policy.groups.find(group); limits != policy.groups.end()) consider(limits->second, "group " + group);
    }
  }
  return cap;
}

QuotaLedger::QuotaLedger(const QuotaPolicy& policy, std::map<std::string, Use> use,
                         std::map<QueueUser, Use> queue_use)
    : policy_(policy), users_(std::move(use)), queue_users_(std::move(queue_use)) {
  for (const auto& [user, held] : users_) {
    auto groups = policy_.groups_of.find(user);
    if (groups == policy_.groups_of.end()) continue;
    for (const auto& group : groups->second) {
      Use& sum = groups_[group];
      sum.held += held.held;
      sum.running_jobs += held.running_jobs;
    }
  }
}

std::optional<std::string> QuotaLedger::over_quota(const PendingJob& job) const {
  if (policy_.empty()) return std::nullopt;
  const Resources need = whole_job(job);
  static const Use kNothing;
  const auto use_of = [](const std::map<std::string, Use>& uses, const std::string& name) -> const Use& {
    auto it = uses.find(name);
    return it == uses.end() ? kNothing : it->second;
  };
  if (auto limits = policy_.users.find(job.owner); limits != policy_.users.end()) {
    std::string why = over("user " + job.owner, limits->second, use_of(users_, job.owner), need);
    if (!why.empty()) return why;
  }
  auto groups = policy_.groups_of.find(job.owner);
  for (const auto& group : groups == policy_.groups_of.end() ? kNoGroups : groups->second) {
    auto limits = policy_.groups.find(group);
    if (limits == policy_.groups.end()) continue;
    std::string why = over("group " + group + " (of user " + job.owner + ")", limits->second, use_of(groups_, group), need);
    if (!why.empty()) return why;
  }
  if (auto limits = policy_.queue_users.find(job.queue); !job.queue.empty() && limits != policy_.queue_users.end()) {
    auto held = queue_users_.find({job.queue, job.owner});
    std::string why = over("user " + job.owner + " in queue " + job.queue, limits->second,
                           held == queue_users_.end() ? kNothing : held->second, need);
    if (!why.empty()) return why;
  }
  return std::nullopt;
}

void QuotaLedger::add(const PendingJob& job) {
  const Resources need = whole_job(job);
  Use& user = users_[job.owner];
  user.held += need;
  ++user.running_jobs;
  if (!job.queue.empty()) {
    Use& in_queue = queue_users_[{job.queue, job.owner}];
    in_queue.held += need;
    ++in_queue.running_jobs;
  }
  auto groups = policy_.groups_of.find(job.owner);
  if (groups == policy_.groups_of.end()) return;
  for (const auto& group : groups->second) {
    Use& sum = groups_[group];
    sum.held += need;
    ++sum.running_jobs;
  }
}

}  // namespace ag::sched
