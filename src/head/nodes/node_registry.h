// NodeRegistry: the workers the head knows, their resources and liveness, and the
// channel to each. Nodes are kept in memory; a restarted head learns them again as
// workers reconnect.
//
// States: ALIVE (connected, heart-beating) -> DISCONNECTED (channel closed; its tasks
// may still run and the worker may come back) -> DEAD (no heartbeat for the node
// timeout). A DEAD node that registers again becomes ALIVE. Io thread only.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "api/protocol.h"
#include "common/resources.h"
#include "common/result.h"
#include "head/nodes/channel_traffic.h"
#include "head/nodes/worker_channel.h"
#include "head/store/kv_store.h"
#include "net/ws_connection.h"

namespace ag::head {

enum class NodeState { kAlive, kDisconnected, kDead };
const char* to_string(NodeState state);

// One heartbeat's report of what a node uses, stamped with the head's time.
struct UsageSample {
  int64_t time_ms = 0;
  double cpu_percent = 0;
  int64_t memory_used_bytes = 0;
  std::vector<api::GpuUsage> gpus;
};

// How much usage history a node keeps: the last 15 minutes.
inline constexpr int64_t kUsageHistoryMs = 15 * 60 * 1000;

struct Node {
  std::string node_id;
  std::string address;   // the worker's --node-ip-address
  std::string hostname;
  std::string network_interface;  // the interface holding `address` on the node ("" from older workers)
  Resources total;
  std::vector<int> gpu_ids;  // all GPU indices of the node
  NodeState state = NodeState::kAlive;
  int64_t registered_ms = 0;
  int64_t last_heartbeat_steady_ms = 0;
  std::shared_ptr<net::WsConnection> channel;  // null unless ALIVE
  std::deque<UsageSample> usage;               // oldest first, bounded by kUsageHistoryMs
  std::set<int> busy_ports;  // master-port range ports held on the node (last report)
  bool draining = false;     // no new tasks; those running finish (ag drain / ag resume)
  std::map<std::string, std::string> labels;  // ag start-worker --label, for job constraints
  std::string limits;                         // which task caps the node enforces (Register.limits)
  std::string container_engine;               // "podman 4.3.1", "" when the node runs no containers
  std::vector<std::string> allowed_mounts;    // node paths jobs may mount (--allow-mount)
  // Set while the node is UNHEALTHY (its health checks or GPUs, api::HealthReport): no
  // new tasks, as drained, until it is healthy again or an admin resumes it.
  std::optional<api::HealthReport> unhealthy;
  int64_t unhealthy_since_ms = 0;

  // "node_ab12 (127.0.0.2)"
  std::string label() const { return node_id + " (" + address + ")"; }
};

class NodeRegistry final : public WorkerChannel {
 public:
  // Hears of each change of a node's state as an event of the cluster's stream:
  // `type` "node.registered", "node.disconnected", "node.dead", "node.removed",
  // "node.drained", "node.resumed", ... and what happened, as a person reads it.
  using EventSink = std::function<void(const Node& node, const std::string& type, const std::string& message)>;
  void on_event(EventSink sink) { sink_ = std::move(sink); }
  // Hears of every change of what the scheduler reads of a node (its state, resources,
  // labels, engine, mounts, drain, health): the node as it is now, or null once erased.
  // The scheduler's working view (head/jobs/cluster_capacity.h) follows the nodes so.
  // Returns an id for unwatch_changes (a watcher that goes before the registry must).
  using ChangeSink = std::function<void(const std::string& node_id, const Node* node)>;
  uint64_t watch_changes(ChangeSink sink) {
    changes_.emplace(next_watch_, std::move(sink));
    return next_watch_++;
  }
  void unwatch_changes(uint64_t id) { changes_.erase(id); }

  // Adds or refreshes a node from its registration (an ALIVE node: told as
  // "node.registered"); returns it.
  Node& upsert(Node node);
  // The nodes an admin drained, kept across registrations and head restarts: read
  // from the meta table at start (a record that does not parse drains nothing).
  // Errors: the store's.
  Status recover_drained(store::KvStore& store);
  const std::set<std::string>& drained() const { return drained_; }
  // The record that stores `node_id` drained (or resumed): write it, then set_drained
  // with `next` once it is durable.
  std::vector<store::Mutation> drain_record(const std::string& node_id, bool draining,
                                            std::set<std::string>* next) const;
  void set_drained(std::set<std::string> drained);
  Node* find(const std::string& node_id);
  const Node* find(const std::string& node_id) const;
  const std::map<std::string, Node>& nodes() const { return nodes_; }

  // Sends a control message to a node; returns false when it has no open channel.
  bool send(const std::string& node_id, api::HeadMessage message) override;
  // What crosses the nodes' channels (counted here as sent, by the gateway as received).
  ChannelTraffic& traffic() { return traffic_; }
  const ChannelTraffic& traffic() const { return traffic_; }

  // A node's health report (or its registration's), at `now_ms`. Returns whether the
  // node just turned UNHEALTHY ("node.unhealthy"; a new reason while unhealthy is told
  // too). A healthy report clears it unless the failure is sticky (a GPU error, which
  // only clear_health ends). GPU errors are counted per node, GPU and kind.
  bool set_health(const std::string& node_id, const api::HealthReport& report, int64_t now_ms);
  // `ag resume NODE`: healthy again ("node.healthy"), whatever the failure was. Returns
  // whether it was unhealthy.
  bool clear_health(const std::string& node_id, const std::string& why);
  struct GpuErrorKey {
    std::string node_id;
    int gpu = -1;
    std::string kind;
    auto operator<=>(const GpuErrorKey&) const = default;
  };
  const std::map<GpuErrorKey, int64_t>& gpu_errors() const { return gpu_errors_; }

  // Appends a usage sample and drops those older than kUsageHistoryMs.
  void record_usage(const std::string& node_id, UsageSample sample);

  // Marks the node's channel closed (keeps the node; it may come back).
  void disconnected(const std::string& node_id, const net::WsConnection* channel);

  // Marks the node DEAD and closes its channel (`ag remove-node`: "node.removed");
  // returns whether it was live before. erase() then forgets it.
  bool mark_dead(const std::string& node_id);
  void erase(const std::string& node_id) {
    nodes_.erase(node_id);
    changed(node_id);
  }

  // Nodes whose last heartbeat is older than `timeout_ms`, newly marked DEAD.
  std::vector<std::string> expire(int64_t steady_now_ms, int64_t timeout_ms);

 private:
  void tell(const Node& node, const std::string& type, const std::string& message) const {
    if (sink_) sink_(node, type, message);
  }
  void changed(const std::string& node_id) const {
    for (const auto& [_, sink] : changes_) sink(node_id, find(node_id));
  }

  EventSink sink_;
  std::map<uint64_t, ChangeSink> changes_;
  uint64_t next_watch_ = 1;
  std::set<std::string> drained_;
  std::map<std::string, Node> nodes_;
  ChannelTraffic traffic_;
  std::map<GpuErrorKey, int64_t> gpu_errors_;
};

}  // namespace ag::head
