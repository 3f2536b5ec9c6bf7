#include "head/nodes/node_registry.h"

#include <cstdio>

#include <nlohmann/json.hpp>

namespace ag::head {

const char* to_string(NodeState state) {
  switch (state) {
    case NodeState::kAlive: return "ALIVE";
    case NodeState::kDisconnected: return "DISCONNECTED";
    case NodeState::kDead: return "DEAD";
  }
  return "UNKNOWN";
}

Node& NodeRegistry::upsert(Node node) {
  auto it = nodes_.find(node.node_id);
  if (it != nodes_.end() && it->second.channel && it->second.channel != node.channel) {
    // The same worker reconnected before its old channel was noticed as closed.
    it->second.channel->close();
  }
  std::string id = node.node_id;
  if (it != nodes_.end() && node.usage.empty()) node.usage = std::move(it->second.usage);  // keep the history
  // A GPU fault lasts until an admin clears it, whatever the node says when it comes back.
  if (it != nodes_.end() && !node.unhealthy && it->second.unhealthy && it->second.unhealthy->sticky) {
    node.unhealthy = it->second.unhealthy;
    node.unhealthy_since_ms = it->second.unhealthy_since_ms;
  }
  node.draining = drained_.count(id) > 0;
  Node& added = nodes_[id] = std::move(node);
  changed(id);
  if (added.state == NodeState::kAlive) {
    char memory[32];
    std::snprintf(memory, sizeof memory, "%.1f GiB", static_cast<double>(added.total.memory_bytes) / (1 << 30));
    tell(added, "node.registered",
         "registered at " + added.address + (added.hostname.empty() ? "" : " (" + added.hostname + ")") + ": " +
             std::to_string(added.total.cpu_millis / 1000) + " CPUs, " + memory + " memory, " +
             std::to_string(added.total.gpus) + " GPUs" + (added.draining ? "; drained: takes no new tasks" : ""));
  }
  return added;
}

namespace {

// The meta table's record of drained nodes (a JSON list of ids).
constexpr const char* kDrainedNodesKey = "drained_nodes";

}  // namespace

Status NodeRegistry::recover_drained(store::KvStore& store) {
  auto stored = store.get(store::kMetaTable, kDrainedNodesKey);
  if (!stored.ok()) return stored.error();
  if (!stored.value()) return {};
  auto list = nlohmann::json::parse(*stored.value(), nullptr, false);
  std::set<std::string> ids;
  if (list.is_array()) {
    for (const auto& id : list) {
      if (id.is_string()) ids.insert(id.get<std::string>());
    }
  }
  set_drained(std::move(ids));
  return {};
}

std::vector<store::Mutation> NodeRegistry::drain_record(const std::string& node_id, bool draining,
                                                        std::set<std::string>* next) const {
  *next = drained_;
  if (draining) {
    next->insert(node_id);
  } else {
    next->erase(node_id);
  }
  return {{store::kMetaTable, kDrainedNodesKey, nlohmann::json(*next).dump()}};
}

void NodeRegistry::set_drained(std::set<std::string> drained) {
  drained_ = std::move(drained);
  for (auto& [id, node] : nodes_) {
    const bool draining = drained_.count(id) > 0;
    if (node.draining == draining) continue;
    node.draining = draining;
    changed(id);
    tell(node, draining ? "node.drained" : "node.resumed",
         draining ? "drained: takes no new tasks; those running finish (`ag resume " + id + "` undoes it)"
                  : "resumed: takes new tasks again");
  }
}

const Node* NodeRegistry::find(const std::string& node_id) const {
  auto it = nodes_.find(node_id);
  return it == nodes_.end() ? nullptr : &it->second;
}

Node* NodeRegistry::find(const std::string& node_id) {
  auto it = nodes_.find(node_id);
  return it == nodes_.end() ? nullptr : &it->second;
}

bool NodeRegistry::send(const std::string& node_id, api::HeadMessage message) {
  Node* node = find(node_id);
  if (!node || !node->channel) return false;
  std::string text = api::encode(message);
  traffic_.sent(message, text.size());
  node->channel->send(std::move(text), /*binary=*/false);
  return true;
}

void NodeRegistry::record_usage(const std::string& node_id, UsageSample sample) {
  Node* node = find(node_id);
  if (!node) return;
  node->usage.push_back(std::move(sample));
  int64_t oldest = node->usage.back().time_ms - kUsageHistoryMs;
  while (!node->usage.empty() && node->usage.front().time_ms < oldest) node->usage.pop_front();
}

void NodeRegistry::disconnected(const std::string& node_id, const net::WsConnection* channel) {
  Node* node = find(node_id);
  if (!node || node->channel.get() != channel) return;
  node->channel.reset();
  if (node->state != NodeState::kAlive) return;
  node->state = NodeState::kDisconnected;
  changed(node_id);
  tell(*node, "node.disconnected",
       "disconnected: its tasks may still run; it is declared DEAD unless it reconnects within the node timeout");
}

bool NodeRegistry::set_health(const std::string& node_id, const api::HealthReport& report, int64_t now_ms) {
  Node* node = find(node_id);
  if (!node) return false;
  if (report.healthy) {
    if (node->unhealthy && !node->unhealthy->sticky) clear_health(node_id, "its health checks pass again");
    return false;
  }
  if (!report.gpu_kind.empty()) ++gpu_errors_[{node_id, report.gpu_index, report.gpu_kind}];
  const bool was_healthy = !node->unhealthy;
  if (!was_healthy && node->unhealthy->reason == report.reason) return false;
  // A sticky failure stays sticky until cleared, whatever comes after it.
  const bool sticky = report.sticky || (node->unhealthy && node->unhealthy->sticky);
  node->unhealthy = report;
  node->unhealthy->sticky = sticky;
  if (was_healthy) node->unhealthy_since_ms = now_ms;
  changed(node_id);
  tell(*node, "node.unhealthy",
       "UNHEALTHY: " + report.reason + "; it takes no new tasks" +
           (sticky ? " until an admin runs `ag resume " + node_id + "`" : " until its checks pass 3 times in a row"));
  return was_healthy;
}

bool NodeRegistry::clear_health(const std::string& node_id, const std::string& why) {
  Node* node = find(node_id);
  if (!node || !node->unhealthy) return false;
  node->unhealthy.reset();
  node->unhealthy_since_ms = 0;
  changed(node_id);
  tell(*node, "node.healthy", "healthy again (" + why + "); it takes new tasks");
  return true;
}

bool NodeRegistry::mark_dead(const std::string& node_id) {
  Node* node = find(node_id);
  if (!node) return false;
  bool was_live = node->state != NodeState::kDead;
  node->state = NodeState::kDead;
  if (node->channel) node->channel->close();
  node->channel.reset();
  changed(node_id);
  tell(*node, "node.removed", "removed by an admin: its credential is revoked and its tasks are lost");
  return was_live;
}

std::vector<std::string> NodeRegistry::expire(int64_t steady_now_ms, int64_t timeout_ms) {
  std::vector<std::string> dead;
  for (auto& [id, node] : nodes_) {
    if (node.state == NodeState::kDead) continue;
    if (steady_now_ms - node.last_heartbeat_steady_ms > timeout_ms) {
      node.state = NodeState::kDead;
      if (node.channel) node.channel->close();
      node.channel.reset();
      changed(id);
      char waited[32];
      std::snprintf(waited, sizeof waited, "%g", static_cast<double>(timeout_ms) / 1000);
      tell(node, "node.dead", std::string("no heartbeat for ") + waited + " s: DEAD; tasks it ran count as lost");
      dead.push_back(id);
    }
  }
  return dead;
}

}  // namespace ag::head
