#include "head/rest/cluster_routes.h"

#include <nlohmann/json.hpp>

#include "common/version.h"
#include "head/nodes/node_codec.h"
#include "head/rest/route_helpers.h"
#include "net/auth.h"

namespace ag::head {
namespace {

using nlohmann::json;

// Tasks a node page lists: every live one, then the most recent finished ones.
constexpr size_t kMaxNodeTasks = 100;

// The head's role as /api/version and /api/cluster say it.
json role_json(const HeadRole& role) {
  // What a standby says too (head/leader/standby_server.h), from the leader's side.
  return {{"role", "leader"}, {"standby", false}, {"leader", role.address}, {"head", role.address},
          {"epoch", role.epoch}, {"store", role.store}, {"lease_ms", role.lease_ms}};
}

}  // namespace

void ClusterRoutes::summary(const Call& call, bool tls, net::Respond respond) {
  auto alloc = deps_.jobs.table.allocations();
  json nodes = json::array();
  Resources total, used;
  int alive = 0;
  json unhealthy = json::array();
  for (const auto& [id, node] : deps_.nodes.nodes()) {
    nodes.push_back(node_to_json(node, alloc[id]));
    if (node.unhealthy && node.state == NodeState::kAlive) {
      unhealthy.push_back({{"node_id", id}, {"reason", node.unhealthy->reason}, {"since_ms", node.unhealthy_since_ms}});
    }
    if (node.state == NodeState::kAlive) {
      ++alive;
      total += node.total;
      used += alloc[id];
    }
  }
  if (call.req.path == "/api/nodes") return respond(json_response(200, {{"nodes", nodes}}));
  json by_state = json::object();
  for (auto s : {JobState::kPending, JobState::kRunning, JobState::kSucceeded, JobState::kFailed, JobState::kStopped}) {
    by_state[to_string(s)] = 0;
  }
  for (const auto& [s, n] : deps_.jobs.table.count_by_state()) by_state[to_string(s)] = n;
  respond(json_response(
      200, {{"nodes_alive", alive},
            {"nodes_total", deps_.nodes.nodes().size()},
            {"resources", {{"num_cpus", total.cpu_millis / 1000.0}, {"memory_bytes", total.memory_bytes}, {"num_gpus", total.gpus}}},
            {"allocated", {{"num_cpus", used.cpu_millis / 1000.0}, {"memory_bytes", used.memory_bytes}, {"num_gpus", used.gpus}}},
            {"jobs", by_state},
            {"unhealthy_nodes", unhealthy},
            {"tls", tls},
            {"version", version_line()},
            {"head", role_json(deps_.role)}}));
}

void ClusterRoutes::node(const Call& call, net::Respond respond) {
  const std::string& node_id = call.param("node");
  const Node* node = deps_.nodes.find(node_id);
  if (!node) return respond(error_response(404, "no node with id '" + node_id + "'; list nodes with `ag list-nodes`"));
  json out = node_to_json(*node, deps_.jobs.table.allocations()[node_id]);
  json usage = json::array();
  for (const auto& u : node->usage) usage.push_back(usage_to_json(u));
  out["usage"] = usage;
  // The node's tasks, newest job first: live ones (all of them), then finished ones up
  // to kMaxNodeTasks in all.
  json live = json::array(), finished = json::array();
  for (const Job* job : deps_.jobs.table.list()) {
    if (live.size() + finished.size() >= kMaxNodeTasks && job->terminal()) continue;
    for (auto a = job->attempts.rbegin(); a != job->attempts.rend(); ++a) {
      for (const auto& t : a->tasks) {
        if (t.node_id != node_id) continue;
        bool is_live = !t.terminal() && !job->terminal();
        json& into = is_live ? live : finished;
        if (!is_live && live.size() + finished.size() >= kMaxNodeTasks) continue;
        into.push_back({{"job_id", job->id}, {"job_name", job->spec.name}, {"job_state", to_string(job->state)},
                        {"attempt", a->number}, {"task_index", t.index}, {"state", to_string(t.state)},
                        {"pid", t.pid}, {"gpu_ids", t.gpu_ids}, {"started_ms", t.started_ms},
                        {"finished_ms", t.finished_ms},
                        {"exit_code", t.exit_code ? json(*t.exit_code) : json(nullptr)}});
      }
    }
  }
  for (auto& t : finished) live.push_back(std::move(t));
  out["tasks"] = std::move(live);
  respond(json_response(200, out));
}

void ClusterRoutes::remove_node(const Call& call, net::Respond respond) {
  deps_.gateway.remove_node(call.param("node"), [respond, node_id = call.param("node")](const Status& s) {
    if (!s) return respond(error_response(s.error()));
    respond(json_response(200, {{"node_id", node_id}, {"removed", true}}));
  });
}

void ClusterRoutes::set_draining(const Call& call, net::Respond respond) {
  const bool draining = call.req.path.ends_with("/drain");
  const std::string node_id = call.param("node");
  deps_.jobs.changes.set_draining(node_id, draining, [respond, node_id, draining](const Status& s) {
    if (!s) return respond(error_response(s.error()));
    respond(json_response(200, {{"node_id", node_id}, {"draining", draining}}));
  });
}

void ClusterRoutes::whoami(const Call& call, net::Respond respond) {
  const Principal& who = call.who;
  respond(json_response(200, {{"name", who.name}, {"role", to_string(who.role)}, {"groups", who.groups}}));
}

void ClusterRoutes::version(const Call&, net::Respond respond) {
  const BuildInfo& info = build_info();
  json out{{"version", info.version}, {"commit", info.commit},
           {"build_type", info.build_type}, {"worker_protocol", kWorkerProtocol},
           {"oldest_worker_protocol", kOldestWorkerProtocol}};
  out.update(role_json(deps_.role));
  respond(json_response(200, out));
}

}  // namespace ag::head
