// WorkerGateway: the head's end of each worker's channel. It authenticates the
// WebSocket upgrade, turns the worker's registration into a Node, and routes every
// message: task events to the job controller, log frames to the LogStore, heartbeats to
// the NodeRegistry. It also expires nodes that stop heart-beating. Io thread only.
//
// Who may register which node:
//   - a join token (or an admin's token) registers a node id that is not live (never
//     seen, or DEAD); the node is then given its own credential, bound to its id,
//     sent in `registered` once it is durable. A live node id (ALIVE or DISCONNECTED)
//     is refused: only its own credential may take its place.
//   - a node credential registers its own node id only, at any time (a restarted
//     worker).
// After that a node may report only on the tasks placed on it (may_report, job_layer.h).
//
// Logs: bytes the LogStore cannot take (a full disk, a gap) are asked for again
// (log_resume from the head's end) once a second until they arrive; the worker keeps
// them until then, because a task's exit is acknowledged only once the head holds as
// many bytes of its log as the exit says it wrote.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "api/protocol.h"
#include "common/clock.h"
#include "common/timers.h"
#include "head/auth/access_control.h"
#include "head/auth/audit_log.h"
#include "head/jobs/job_layer.h"
#include "head/nodes/job_usage.h"
#include "head/logs/log_store.h"
#include "head/nodes/node_registry.h"
#include "net/http_types.h"
#include "net/ws_connection.h"

namespace ag::net {
struct RawUpgrade;
}

namespace ag::head {

class LogStreamReader;
class SplicePipe;

struct WorkerGatewayConfig {
  int64_t node_timeout_ms = 10000;  // no heartbeat for this long: the node is dead
  // Heads sharing a store: this head's epoch (told to workers when they register) and
  // whether it may still act (head/leader/leader_lease.h); nothing a worker sends is
  // taken once it may not. A lone head: epoch 0, and `acting` empty (always).
  int64_t epoch = 0;
  std::function<bool()> acting;
};

class WorkerGateway {
 public:
  struct Deps {
    Timers& timers;
    NodeRegistry& nodes;
    JobLayer& jobs;
    LogStore& logs;
    const Clock& clock;
    AccessControl& access;
    AuditLog& audit;
  };
  WorkerGateway(Deps deps, WorkerGatewayConfig config);
  ~WorkerGateway();

  // Starts the expiry timer.
  void start();

  // Where nodes' reports on image pulls go (head/nodes/image_pulls.h).
  void on_pull_update(std::function<void(const std::string& node_id, const api::PullUpdate&)> handler) {
    on_pull_update_ = std::move(handler);
  }
  void on_stack_report(std::function<void(const std::string& node_id, const api::StackReport&)> handler) {
    on_stack_report_ = std::move(handler);
  }

  // For HttpServer::check_upgrade: 404 for another path; 401 without a valid join
  // token, node credential or admin token; 403 for a token of another kind.
  std::optional<net::HttpResponse> check_upgrade(const net::HttpRequest& request) const;
  void on_connection(const std::shared_ptr<net::WsConnection>& channel, const net::HttpRequest& request);
  // A registered node's log stream (api/log_stream.h), once check_upgrade let it in.
  void on_log_stream(net::RawUpgrade&& upgrade);

  // `ag remove-node`: revokes the node's credential (durable), closes its channel and
  // forgets it; its tasks are lost (and retried like any lost task). Errors:
  // kNotFound for a node the head neither knows nor holds a credential for.
  void remove_node(const std::string& node_id, const std::function<void(Status)>& done);

  // Running jobs' CPU and memory over the last minutes, from the heartbeats.
  const JobUsage& job_usage() const { return job_usage_; }

 private:
  struct ChannelState {
    Principal who;
    std::string from;
    std::string node_id;  // once registered
    bool registering = false;
  };
  // A message from a registered node, off its channel or its log stream.
  void on_message(const std::shared_ptr<net::WsConnection>& channel, const std::string& node_id,
                  const std::string& data, bool binary);
  // 401 without a valid token, 403 for anything but a node credential, 409 for a node
  // that is not connected.
  std::optional<net::HttpResponse> check_log_stream(const net::HttpRequest& request) const;
  void close_log_stream(const std::string& node_id);
  void on_register(const std::shared_ptr<net::WsConnection>& channel, const std::shared_ptr<ChannelState>& state,
                   api::Register message);
  void complete_register(const std::shared_ptr<net::WsConnection>& channel, ChannelState& state,
                         const api::Register& message, const std::string& credential);
  void on_log_frame(const std::shared_ptr<net::WsConnection>& channel, const std::string& node_id,
                    const std::string& frame);
  // Task output from the node: into the LogStore, or asked for again when it cannot be
  // taken. False when the node may not send it (refused with an error on the channel;
  // on the stream the rest of that record is dropped).
  bool take_log_bytes(const std::shared_ptr<net::WsConnection>& channel, const std::string& node_id,
                      const api::TaskKey& key, const std::function<Status()>& store);
  void schedule_expiry();
  bool acting() const { return !config_.acting || config_.acting(); }
  // Asks the node again, within kLogRetryMs, for the task's bytes from the head's end.
  void retry_log(const std::string& node_id, const api::TaskKey& key);

  Deps deps_;
  WorkerGatewayConfig config_;
  JobUsage job_usage_;
  std::set<api::TaskKey> log_errors_reported_;
  std::map<api::TaskKey, std::string> log_retries_;  // task -> its node
  bool log_retry_armed_ = false;
  struct Stream {
    std::shared_ptr<LogStreamReader> reader;
    std::weak_ptr<net::WsConnection> channel;  // the channel it was opened under
  };
  std::map<std::string, Stream> streams_;  // node -> its log stream
  std::vector<char> stream_piece_ = std::vector<char>(1 << 20);  // every stream reads through it
  std::shared_ptr<SplicePipe> splice_pipe_;                     // and splices through it
  std::function<void(const std::string&, const api::PullUpdate&)> on_pull_update_;
  std::function<void(const std::string&, const api::StackReport&)> on_stack_report_;
};

}  // namespace ag::head
