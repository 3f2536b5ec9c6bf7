// WorkerGateway: the head's end of each worker's channel. It authenticates the
// WebSocket upgrade, turns the worker's registration into a Node, and routes every
// message: task events to the JobManager, log frames to the LogStore, heartbeats to
// the NodeRegistry. It also expires nodes that stop heart-beating. Io thread only.
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>

#include "api/protocol.h"
#include "common/clock.h"
#include "common/timers.h"
#include "head/job_manager.h"
#include "head/log_store.h"
#include "head/node_registry.h"
#include "net/http_types.h"
#include "net/ws_connection.h"

namespace ag::head {

struct WorkerGatewayConfig {
  int64_t node_timeout_ms = 10000;  // no heartbeat for this long: the node is dead
};

class WorkerGateway {
 public:
  struct Deps {
    Timers& timers;
    NodeRegistry& nodes;
    JobManager& jobs;
    LogStore& logs;
    const Clock& clock;
    const std::string& token;
  };
  WorkerGateway(Deps deps, WorkerGatewayConfig config);

  // Starts the expiry timer.
  void start();

  // For HttpServer::check_upgrade: 401/404 unless this is an authenticated worker join.
  std::optional<net::HttpResponse> check_upgrade(const net::HttpRequest& request) const;
  void on_connection(const std::shared_ptr<net::WsConnection>& channel);

 private:
  void on_message(const std::shared_ptr<net::WsConnection>& channel, std::string* node_id,
                  const std::string& data, bool binary);
  void on_register(const std::shared_ptr<net::WsConnection>& channel, std::string* node_id,
                   api::Register message);
  void on_log_frame(const std::shared_ptr<net::WsConnection>& channel, const std::string& node_id,
                    const std::string& frame);
  void schedule_expiry();

  Deps deps_;
  WorkerGatewayConfig config_;
  std::set<api::TaskKey> log_errors_reported_;
};

}  // namespace ag::head
