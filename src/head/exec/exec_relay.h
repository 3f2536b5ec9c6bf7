// ExecRelay: the head's part in `ag exec` (api/exec_protocol.h). It asks a node to
// run a command beside a task, waits for the node to dial back for that session, and
// passes frames between the client's WebSocket and the node's, holding each side's
// reads while the other side's queue is long. Whoever closes first ends the session:
// the other side is closed too (the worker then ends the command). Io thread only.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "api/protocol.h"
#include "common/timers.h"
#include "head/auth/access_control.h"
#include "head/nodes/node_registry.h"
#include "net/http_types.h"
#include "net/ws_connection.h"

namespace ag::head {

class ExecRelay {
 public:
  struct Deps {
    Timers& timers;
    AccessControl& access;
    NodeRegistry& nodes;
  };
  // A node that has not dialled back within this long is reported to the client.
  static constexpr int64_t kDialBackMs = 15000;
  // Sessions open at once, all nodes together.
  static constexpr size_t kMaxSessions = 256;

  explicit ExecRelay(Deps deps) : deps_(deps) {}
  ~ExecRelay();

  // Whether another session may open now; the refusal otherwise.
  std::optional<net::HttpResponse> refuse_new() const;

  // Sends exec_open for `request` (its session is made here) to `node_id` and holds
  // `client` until the node dials back. A node that cannot be sent to, or does not
  // dial back, is reported to the client in a status frame.
  void open(const std::shared_ptr<net::WsConnection>& client, api::ExecOpen request, const std::string& node_id);

  // For HttpServer::check_upgrade on kWorkerExecPath + SESSION: 401 without a node
  // credential, 404 for a session that is not this node's or not waiting.
  std::optional<net::HttpResponse> check_worker(const net::HttpRequest& request) const;
  void on_worker(const std::shared_ptr<net::WsConnection>& worker, const net::HttpRequest& request);

  size_t open_sessions() const { return sessions_.size(); }

 private:
  struct Session;
  void end(const std::string& id, const std::string& why);
  static void relay(const std::shared_ptr<net::WsConnection>& from, const std::shared_ptr<net::WsConnection>& to,
                    std::string data);

  Deps deps_;
  std::map<std::string, std::shared_ptr<Session>> sessions_;
};

}  // namespace ag::head
