// Quotas as the head keeps them (head/scheduler/quotas.h decides): the admin's limits
// per user and per group, stored in the meta table so they hold across restarts, and
// what each user's running jobs hold, for the scheduler and `ag quota list`.
#include <nlohmann/json.hpp>

#include "head/job_manager.h"

namespace ag::head {

using nlohmann::json;

namespace {

// The meta table's record of quotas: {"users": {name: limits}, "groups": {...}}.
constexpr const char* kQuotasKey = "quotas";

json limits_to_json(const sched::Limits& limits) {
  json j = json::object();
  const auto put = [&j](const char* key, int64_t value) { j[key] = value < 0 ? json(nullptr) : json(value); };
  put("max_gpus", limits.gpus);
  put("max_cpu_millis", limits.cpu_millis);
  put("max_memory", limits.memory_bytes);
  put("max_running_jobs", limits.running_jobs);
  j["max_priority"] = limits.max_priority ? json(*limits.max_priority) : json(nullptr);
  j["allow_no_preempt"] = limits.allow_no_preempt;
  j["share"] = limits.share;
  return j;
}

sched::Limits limits_from_json(const json& j) {
  sched::Limits limits;
  const auto get = [&j](const char* key) {
    return j.contains(key) && j[key].is_number_integer() ? j[key].get<int64_t>() : int64_t{-1};
  };
  limits.gpus = get("max_gpus");
  limits.cpu_millis = get("max_cpu_millis");
  limits.memory_bytes = get("max_memory");
  limits.running_jobs = get("max_running_jobs");
  if (j.contains("max_priority") && j["max_priority"].is_number_integer()) limits.max_priority = j["max_priority"].get<int>();
  limits.allow_no_preempt = j.value("allow_no_preempt", false);
  if (j.contains("share") && j["share"].is_number() && j["share"].get<double>() > 0) limits.share = j["share"].get<double>();
  return limits;
}

json quotas_to_json(const sched::QuotaPolicy& policy) {
  json out = {{"users", json::object()}, {"groups", json::object()}};
  for (const auto& [name, limits] : policy.users) out["users"][name] = limits_to_json(limits);
  for (const auto& [name, limits] : policy.groups) out["groups"][name] = limits_to_json(limits);
  return out;
}

}  // namespace

nlohmann::json quota_limits_json(const sched::Limits& limits) { return limits_to_json(limits); }

Status JobManager::recover_quotas() {
  auto stored = deps_.store.get(store::kMetaTable, kQuotasKey);
  if (!stored.ok()) return stored.error();
  if (!stored.value()) return {};
  const json doc = json::parse(*stored.value(), nullptr, false);
  if (!doc.is_object()) return {};
  for (const char* kind : {"users", "groups"}) {
    if (!doc.contains(kind) || !doc[kind].is_object()) continue;
    auto& into = std::string(kind) == "users" ? sharing_.quotas.users : sharing_.quotas.groups;
    for (const auto& [name, limits] : doc[kind].items()) into[name] = limits_from_json(limits);
  }
  return {};
}

void JobManager::set_quota(bool group, const std::string& name, const sched::Limits& limits,
                           std::function<void(Status)> done) {
  sched::QuotaPolicy next = sharing_.quotas;
  auto& table = group ? next.groups : next.users;
  if (limits.any()) {
    table[name] = limits;
  } else {
    table.erase(name);
  }
  std::vector<store::Mutation> batch{{store::kMetaTable, kQuotasKey, quotas_to_json(next).dump()}};
  write_then(std::move(batch), [this, next] {
    sharing_.quotas.users = next.users;
    sharing_.quotas.groups = next.groups;
    // Jobs over the old quota may fit the new one (and every pending reason is redone).
    request_schedule();
  }, std::move(done));
}

std::optional<Error> JobManager::check_priority_cap(const api::JobSpec& spec, const std::string& owner) const {
  const auto cap = sched::priority_cap(quota_policy({owner}), owner);
  if (!cap || spec.priority <= cap->max_priority) return std::nullopt;
  return Error{ErrorCode::kPermissionDenied,
               "priority " + std::to_string(spec.priority) + " is over the highest an admin allows " + cap->whose + " (" +
                   std::to_string(cap->max_priority) + "); submit with --priority " + std::to_string(cap->max_priority) +
                   " or lower, or ask an admin to raise it (`ag quota set ... --max-priority`)"};
}

void JobManager::for_each_holding(const std::function<void(const Job&, const sched::Use&)>& fn) const {
  for (const auto& [_, active] : active_) {
    const Job& job = *active;
    const AttemptRecord* attempt = job.current_attempt();
    if (!attempt) continue;
    sched::Use held;
    for (const auto& task : attempt->tasks) {
      if (task.terminal()) continue;
      held.held += job.spec.per_task();
      held.running_jobs = 1;
    }
    fn(job, held);
  }
}

std::map<std::string, sched::Use> JobManager::use_by_owner() const {
  std::map<std::string, sched::Use> use;
  for_each_holding([&use](const Job& job, const sched::Use& held) { use[job.owner] += held; });
  return use;
}

std::map<sched::QueueUser, sched::Use> JobManager::use_by_queue() const {
  std::map<sched::QueueUser, sched::Use> use;
  for_each_holding([&use](const Job& job, const sched::Use& held) {
    if (!job.spec.queue.empty()) use[{job.spec.queue, job.owner}] += held;
  });
  return use;
}

sched::QuotaPolicy JobManager::quota_policy(const std::set<std::string>& owners) const {
  sched::QuotaPolicy policy;
  policy.users = sharing_.quotas.users;
  policy.groups = sharing_.quotas.groups;
  for (const auto& [name, queue] : sharing_.queues) {
    if (queue.per_user.any()) policy.queue_users[name] = queue.per_user;
  }
  if (!policy.groups.empty() && sharing_.groups_of) {
    for (const auto& owner : owners) policy.groups_of[owner] = sharing_.groups_of(owner);
  }
  return policy;
}

std::map<std::string, double> JobManager::share_weights() const {
  std::map<std::string, double> weights;
  for (const auto& [user, limits] : sharing_.quotas.users) {
    if (limits.share != 1) weights[user] = limits.share;
  }
  return weights;
}

}  // namespace ag::head
