// Queues (partitions) as the head keeps them: named sets of nodes (by label) with a
// default priority, per-user limits and a preemption switch, stored in the meta table so
// they hold across restarts. A job names its queue at submit; the queue is looked up
// again at every pass, so an admin's change applies to the jobs already waiting in it.
#include <nlohmann/json.hpp>

#include "head/job_manager.h"

namespace ag::head {

using nlohmann::json;

namespace {

// The meta table's record of queues: {name: queue_json}.
constexpr const char* kQueuesKey = "queues";

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

json queue_json(const QueueDef& queue) {
  json j = {{"nodes_with", queue.nodes_with}, {"priority", queue.default_priority}, {"preempt", queue.preempt}};
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

Status JobManager::recover_queues() {
  auto stored = deps_.store.get(store::kMetaTable, kQueuesKey);
  if (!stored.ok()) return stored.error();
  if (!stored.value()) return {};
  const json doc = json::parse(*stored.value(), nullptr, false);
  if (!doc.is_object()) return {};
  for (const auto& [name, entry] : doc.items()) {
    auto queue = parse_queue(entry);
    if (queue.ok()) sharing_.queues[name] = queue.value();
  }
  return {};
}

void JobManager::set_queue(const std::string& name, std::optional<QueueDef> queue, std::function<void(Status)> done) {
  if (!queue) {
    if (!sharing_.queues.count(name)) {
      return done(not_found("no queue '" + name + "'; `ag queue list` shows the queues"));
    }
    int using_it = 0;
    for (const auto& [_, job] : jobs_) using_it += !job.terminal() && job.spec.queue == name;
    if (using_it > 0) {
      return done(Error{ErrorCode::kConflict, "queue " + name + " still has " + std::to_string(using_it) +
                                                   " pending or running job(s); stop them or let them end, then "
                                                   "remove it (nothing was changed)"});
    }
  }
  std::map<std::string, QueueDef> next = sharing_.queues;
  if (queue) {
    next[name] = *queue;
  } else {
    next.erase(name);
  }
  json doc = json::object();
  for (const auto& [queue_name, def] : next) doc[queue_name] = queue_json(def);
  std::vector<store::Mutation> batch{{store::kMetaTable, kQueuesKey, doc.dump()}};
  write_then(std::move(batch), [this, next] {
    sharing_.queues = next;
    // The jobs waiting in a changed queue may now have other nodes or limits.
    cluster_changed();
    request_schedule();
  }, std::move(done));
}

std::optional<Error> resolve_queue(const SharingState& sharing, api::JobSpec& spec, const std::string& where) {
  if (spec.queue.empty()) return std::nullopt;
  auto queue = sharing.queues.find(spec.queue);
  if (queue == sharing.queues.end()) {
    const std::string names = names_of(sharing.queues);
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

std::optional<Error> check_no_preempt(const SharingState& sharing, const api::JobSpec& spec, const std::string& owner,
                                      bool admin) {
  if (!spec.no_preempt || admin) return std::nullopt;
  std::vector<const sched::Limits*> limits;
  if (auto user = sharing.quotas.users.find(owner); user != sharing.quotas.users.end()) limits.push_back(&user->second);
  if (sharing.groups_of) {
    for (const auto& group : sharing.groups_of(owner)) {
      if (auto g = sharing.quotas.groups.find(group); g != sharing.quotas.groups.end()) limits.push_back(&g->second);
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

std::vector<sched::RunningJob> JobManager::running_for_preemption() const {
  std::vector<sched::RunningJob> running;
  for (const auto& [id, active] : active_) {
    const Job& job = *active;
    const AttemptRecord* attempt = job.current_attempt();
    if (!attempt || attempt->finished()) continue;
    sched::RunningJob view;
    view.job_id = id;
    view.priority = job.spec.priority;
    view.preemptible = !job.spec.no_preempt;
    view.stopping = attempt->ending || job.stop_requested || job.timed_out;
    view.started_ms = attempt->started_ms;
    for (const auto& task : attempt->tasks) {
      if (task.terminal()) continue;
      Resources held = job.spec.per_task();
      // An exclusive job holds its nodes whole.
      if (job.spec.exclusive) {
        if (const Node* node = deps_.nodes.find(task.node_id)) held = node->total;
      }
      view.tasks.push_back({task.node_id, held, task.gpu_ids});
    }
    if (!view.tasks.empty()) running.push_back(std::move(view));
  }
  return running;
}

void JobManager::preempt(const sched::Preemption& preemption) {
  auto by = jobs_.find(preemption.job_id);
  if (by == jobs_.end()) return;
  const Job& winner = by->second;
  const std::string who = "preempted by job " + winner.id + " (priority " + std::to_string(winner.spec.priority) +
                          (winner.spec.queue.empty() ? "" : ", queue " + winner.spec.queue) +
                          (winner.owner.empty() ? "" : ", " + winner.owner) + "), which needs what it holds";
  std::string victims;
  for (const auto& id : preemption.victims) {
    auto victim = jobs_.find(id);
    if (victim == jobs_.end()) continue;
    victims += (victims.empty() ? "" : ", ") + id;
    apply(victim->second, on_preempted(victim->second, who, config_.preempt_grace_ms, deps_.clock.now_ms()));
  }
  if (victims.empty()) return;
  Effects fx;
  fx.events.push_back("preempting " + victims + " (lower priority) to make room; it starts once they have stopped");
  apply(by->second, fx);
}

}  // namespace ag::head
