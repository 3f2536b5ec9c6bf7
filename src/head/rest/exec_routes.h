// ExecRoutes: who may run a command beside a task or reach a port on its node, and which
// task (`ag exec`, `ag port-forward`; api/exec_protocol.h). The client's WebSocket
// upgrade on /api/jobs/JOB/exec or /api/jobs/JOB/port-forward is checked here: a valid
// token of a user who may stop the job (owner, the owner's groups, admins), a running
// job, a task index inside its gang whose task runs on a connected node, and a command
// (or port) within bounds. Every upgrade, let in or refused, is in the audit log with
// its command line or port. Io thread only.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "head/exec/exec_relay.h"
#include "head/rest/rest_deps.h"
#include "net/http_types.h"
#include "net/ws_connection.h"

namespace ag::head {

class ExecRoutes {
 public:
  ExecRoutes(RestDeps deps, ExecRelay& relay) : deps_(deps), relay_(relay) {}

  // Whether `path` is a job's exec or port-forward endpoint.
  static bool is_exec_path(const std::string& path);

  // For HttpServer::check_upgrade: the refusal, or nullopt to let it in.
  std::optional<net::HttpResponse> check(const net::HttpRequest& request) const;
  // The same path without an upgrade: the refusal it would get, else 426 saying the
  // route takes a WebSocket (clients ask this before they listen or start a terminal).
  net::HttpResponse without_upgrade(const net::HttpRequest& request) const;
  // The upgraded connection: checked again (the job may have ended meanwhile), then
  // handed to the relay.
  void open(const std::shared_ptr<net::WsConnection>& client, const net::HttpRequest& request);

 private:
  struct Target;
  // The task and node the request names, or the refusal (recorded in the audit log).
  // `upgrading`: the request opens a session (audited when let in).
  std::optional<net::HttpResponse> resolve(const net::HttpRequest& request, Target* target, bool upgrading) const;

  RestDeps deps_;
  ExecRelay& relay_;
};

}  // namespace ag::head
