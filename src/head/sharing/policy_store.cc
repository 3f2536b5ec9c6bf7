#include "head/sharing/policy_store.h"

#include <nlohmann/json.hpp>

namespace ag::head {

using nlohmann::json;

namespace {

// The meta table's records: {"users": {name: limits}, "groups": {...}} and {name: queue}.
constexpr const char* kQuotasKey = "quotas";
constexpr const char* kQueuesKey = "queues";

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

// The per-user limit fields of a queue, and the Limits member each sets.
struct LimitField {
  const char* name;
  int64_t sched::Limits::*member;
};
constexpr LimitField kLimitFields[] = {
    {"max_gpus_per_user", &sched::Limits::gpus},
    {"max_cpu_millis_per_user", &sched::Limits::cpu_millis},
    {"max_memory_per_user", &sched::Limits::memory_bytes},
    {"max_running_jobs_per_user", &sched::Limits::running_jobs},
};

std::string names_of(const std::map<std::string, QueueDef>& queues) {
  std::string names;
  for (const auto& [name, _] : queues) names += (names.empty() ? "" : ", ") + name;
  return names;
}

}  // namespace

nlohmann::json quota_limits_json(const sched::Limits& limits) { return limits_to_json(limits); }

json queue_json(const QueueDef& queue) {
  json j = {{"nodes_with", queue.nodes_with},
            {"priority", queue.default_priority},
            {"preempt", queue.preempt},
            {"idle_gpu_timeout", queue.idle_gpu_timeout_s ? json(*queue.idle_gpu_timeout_s) : json(nullptr)}};
  for (const auto& field : kLimitFields) {
    const int64_t value = queue.per_user.*field.member;
    j[field.name] = value < 0 ? json(nullptr) : json(value);
  }
  return j;
}

Result<QueueDef> parse_queue(const json& body) {
  if (!body.is_object()) return invalid_argument("send a JSON object like {\"nodes_with\": {\"gpu\": \"a100\"}}");
  QueueDef queue;
  for (const auto& [key, value] : body.items()) {
    if (value.is_null()) continue;
    const std::string shown = value.dump().substr(0, 64);
    if (key == "nodes_with") {
      if (!value.is_object() || value.size() > api::kMaxNodeLabels) {
        return invalid_argument("field 'nodes_with' must be an object of at most " + std::to_string(api::kMaxNodeLabels) +
                                " labels like {\"gpu\": \"a100\"}, got " + shown);
      }
      for (const auto& [label, wanted] : value.items()) {
        if (label.empty() || label.size() > api::kMaxLabelKeyBytes || !wanted.is_string() ||
            wanted.get<std::string>().size() > api::kMaxLabelValueBytes) {
          return invalid_argument("field 'nodes_with' takes labels KEY=VALUE (a key of 1-" +
                                  std::to_string(api::kMaxLabelKeyBytes) + " bytes, a string value), got " + shown);
        }
        queue.nodes_with[label] = wanted.get<std::string>();
      }
      continue;
    }
    if (key == "priority") {
      const auto level = value.is_string() ? api::priority_level(value.get<std::string>()) : std::nullopt;
      if (level) {
        queue.default_priority = *level;
      } else if (value.is_number_integer() && value.get<int64_t>() >= api::kMinPriority &&
                 value.get<int64_t>() <= api::kMaxPriority) {
        queue.default_priority = value.get<int>();
      } else {
        return invalid_argument("field 'priority' must be low, normal, high, urgent or a whole number from " +
                                std::to_string(api::kMinPriority) + " to " + std::to_string(api::kMaxPriority) +
                                ", got " + shown);
      }
      continue;
    }
    if (key == "idle_gpu_timeout") {
      if (!value.is_number() || value.get<double>() < 1 || value.get<double>() > api::kMaxTimeoutSeconds) {
        return invalid_argument("field 'idle_gpu_timeout' must be a number of seconds from 1 to " +
                                std::to_string(static_cast<int64_t>(api::kMaxTimeoutSeconds)) + ", got " + shown);
      }
      queue.idle_gpu_timeout_s = value.get<double>();
      continue;
    }
    if (key == "preempt") {
      if (!value.is_boolean()) return invalid_argument("field 'preempt' must be true or false, got " + shown);
      queue.preempt = value.get<bool>();
      continue;
    }
    const LimitField* field = nullptr;
    for (const auto& f : kLimitFields) field = key == f.name ? &f : field;
    if (!field) {
      return invalid_argument("unknown field '" + key.substr(0, 64) +
                              "'; a queue takes nodes_with, priority, preempt, max_gpus_per_user, "
                              "max_cpu_millis_per_user, max_memory_per_user (bytes) and max_running_jobs_per_user");
    }
    if (!value.is_number_integer() || value.get<int64_t>() < 0) {
      return invalid_argument("field '" + key + "' must be a whole number, 0 or more, got " + shown);
    }
    queue.per_user.*field->member = value.get<int64_t>();
  }
  return queue;
}

Status PolicyStore::recover() {
  auto stored = store_.get(store::kMetaTable, kQuotasKey);
  if (!stored.ok()) return stored.error();
  if (stored.value()) {
    const json doc = json::parse(*stored.value(), nullptr, false);
    for (const char* kind : {"users", "groups"}) {
      if (!doc.is_object() || !doc.contains(kind) || !doc[kind].is_object()) continue;
      auto& into = std::string(kind) == "users" ? quotas_.users : quotas_.groups;
      for (const auto& [name, limits] : doc[kind].items()) into[name] = limits_from_json(limits);
    }
  }
  stored = store_.get(store::kMetaTable, kQueuesKey);
  if (!stored.ok()) return stored.error();
  if (stored.value()) {
    const json doc = json::parse(*stored.value(), nullptr, false);
    if (doc.is_object()) {
      for (const auto& [name, entry] : doc.items()) {
        auto queue = parse_queue(entry);
        if (queue.ok()) queues_[name] = queue.value();
      }
    }
  }
  return {};
}

PolicyStore::Change PolicyStore::set_quota(bool group, const std::string& name, const sched::Limits& limits) {
  sched::QuotaPolicy next = quotas_;
  auto& table = group ? next.groups : next.users;
  if (limits.any()) {
    table[name] = limits;
  } else {
    table.erase(name);
  }
  std::vector<store::Mutation> batch{{store::kMetaTable, kQuotasKey, quotas_to_json(next).dump()}};
  return {std::move(batch), [this, next] {
            quotas_.users = next.users;
            quotas_.groups = next.groups;
          }};
}

PolicyStore::Change PolicyStore::set_queue(const std::string& name, std::optional<QueueDef> queue) {
  std::map<std::string, QueueDef> next = queues_;
  if (queue) {
    next[name] = *queue;
  } else {
    next.erase(name);
  }
  json doc = json::object();
  for (const auto& [queue_name, def] : next) doc[queue_name] = queue_json(def);
  std::vector<store::Mutation> batch{{store::kMetaTable, kQueuesKey, doc.dump()}};
  return {std::move(batch), [this, next] { queues_ = next; }};
}

const QueueDef* PolicyStore::queue(const std::string& name) const {
  auto it = queues_.find(name);
  return it == queues_.end() ? nullptr : &it->second;
}

std::optional<Error> PolicyStore::check_priority_cap(const api::JobSpec& spec, const std::string& owner) const {
  const auto cap = sched::priority_cap(quota_policy({owner}), owner);
  if (!cap || spec.priority <= cap->max_priority) return std::nullopt;
  return Error{ErrorCode::kPermissionDenied,
               "priority " + std::to_string(spec.priority) + " is over the highest an admin allows " + cap->whose + " (" +
                   std::to_string(cap->max_priority) + "); submit with --priority " + std::to_string(cap->max_priority) +
                   " or lower, or ask an admin to raise it (`ag quota set ... --max-priority`)"};
}

sched::QuotaPolicy PolicyStore::quota_policy(const std::set<std::string>& owners) const {
  sched::QuotaPolicy policy;
  policy.users = quotas_.users;
  policy.groups = quotas_.groups;
  for (const auto& [name, queue] : queues_) {
    if (queue.per_user.any()) policy.queue_users[name] = queue.per_user;
  }
  if (!policy.groups.empty() && groups_of_) {
    for (const auto& owner : owners) policy.groups_of[owner] = groups_of_(owner);
  }
  return policy;
}

std::map<std::string, double> PolicyStore::share_weights() const {
  std::map<std::string, double> weights;
  for (const auto& [user, limits] : quotas_.users) {
    if (limits.share != 1) weights[user] = limits.share;
  }
  return weights;
}

std::optional<Error> PolicyStore::resolve_queue(api::JobSpec& spec, const std::string& where) const {
  if (spec.queue.empty()) return std::nullopt;
  auto queue = queues_.find(spec.queue);
  if (queue == queues_.end()) {
    const std::string names = names_of(queues_);
    return Error{ErrorCode::kInvalidArgument,
                 where + "unknown queue '" + spec.queue + "'; " +
                     (names.empty() ? "this cluster has no queues (an admin makes them with `ag queue create`)"
                                    : "the queues are " + names + " (`ag queue list`)")};
  }
  for (const auto& [label, wanted] : queue->second.nodes_with) {
    auto own = spec.constraints.find(label);
    if (own != spec.constraints.end() && own->second != wanted) {
      return Error{ErrorCode::kInvalidArgument, where + "constraint " + label + "=" + own->second +
                                                    " conflicts with queue " + spec.queue + ", whose nodes have " +
                                                    label + "=" + wanted + "; drop it or choose another queue"};
    }
  }
  if (!spec.priority_set) spec.priority = queue->second.default_priority;
  return std::nullopt;
}

std::optional<Error> PolicyStore::check_no_preempt(const api::JobSpec& spec, const std::string& owner,
                                                   bool admin) const {
  if (!spec.no_preempt || admin) return std::nullopt;
  std::vector<const sched::Limits*> limits;
  if (auto user = quotas_.users.find(owner); user != quotas_.users.end()) limits.push_back(&user->second);
  if (groups_of_) {
    for (const auto& group : groups_of_(owner)) {
      if (auto g = quotas_.groups.find(group); g != quotas_.groups.end()) limits.push_back(&g->second);
    }
  }
  for (const sched::Limits* l : limits) {
    if (l->allow_no_preempt) return std::nullopt;
  }
  return Error{ErrorCode::kPermissionDenied,
               "--no-preempt (no_preempt): user " + owner +
                   " may not keep jobs from being preempted; an admin allows it with `ag quota set --user " + owner +
                   " --allow-no-preempt` (or for a group of theirs), or submit without it"};
}

}  // namespace ag::head
