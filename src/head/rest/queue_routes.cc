#include <nlohmann/json.hpp>

#include "api/job_spec.h"
#include "head/rest/queue_routes.h"
#include "head/rest/route_helpers.h"

namespace ag::head {

using nlohmann::json;

void QueueRoutes::list(const Call&, net::Respond respond) {
  struct Depth {
    int pending = 0;
    int running = 0;
  };
  std::map<std::string, Depth> depth;
  for (const Job* job : deps_.jobs.table.list()) {
    if (job->spec.queue.empty()) continue;
    depth[job->spec.queue].pending += job->state == JobState::kPending;
    depth[job->spec.queue].running += job->state == JobState::kRunning;
  }
  std::map<std::string, sched::Use> held;
  for (const auto& [queue_user, use] : deps_.jobs.table.use_by_queue()) held[queue_user.first] += use;
  json queues = json::array();
  for (const auto& [queue_name, queue] : deps_.jobs.policy.queues()) {
    int nodes = 0;
    for (const auto& [_, node] : deps_.nodes.nodes()) {
      if (node.state != NodeState::kAlive) continue;
      bool has = true;
      for (const auto& [label, wanted] : queue.nodes_with) {
        auto it = node.labels.find(label);
        has = has && it != node.labels.end() && it->second == wanted;
      }
      nodes += has;
    }
    json entry = queue_json(queue);
    entry["name"] = queue_name;
    entry["nodes"] = nodes;
    entry["pending_jobs"] = depth[queue_name].pending;
    entry["running_jobs"] = depth[queue_name].running;
    entry["gpus_held"] = held[queue_name].held.gpus;
    entry["cpu_millis_held"] = held[queue_name].held.cpu_millis;
    queues.push_back(std::move(entry));
  }
  respond(json_response(200, {{"queues", queues}}));
}

void QueueRoutes::set(const Call& call, net::Respond respond) {
  const net::HttpRequest& req = call.req;
  const std::string& name = call.param("name");
  if (Status s = api::check_queue_name(name); !s) return respond(error_response(s.error()));
  std::optional<QueueDef> queue;
  if (req.method == "PUT") {
    auto parsed = parse_queue(json::parse(req.body, nullptr, false));
    if (!parsed.ok()) return respond(error_response(parsed.error()));
    queue = parsed.value();
  }
  const bool existed = deps_.jobs.policy.queues().count(name) > 0;
  deps_.jobs.changes.set_queue(name, queue, [respond, name, queue, existed](const Status& s) {
    if (!s) return respond(error_response(s.error()));
    json out = queue ? queue_json(*queue) : json::object();
    out["name"] = name;
    out[queue ? (existed ? "updated" : "created") : "removed"] = true;
    respond(json_response(200, out));
  });
}

}  // namespace ag::head
