// ApiRoutes: the REST API, answering on both head ports. Every request goes the same
// way, in this order:
//
//   /api/healthz, /api/tls/ca, the dashboard's sign-in  -> answered with no credential
//   authenticate: a bearer token, else the dashboard's session cookie
//   refuse_unauthorized: 401 without a valid credential; 403 for a cross-site cookie
//       request that changes state (CSRF), a join token, or a node's credential used
//       for anything but fetching packages
//   audited: every state-changing call is recorded once answered (AuditLog)
//   the dashboard's own routes (pages, live stream, /metrics: dashboard/)
//   the route table (route_table.h; a trailing slash is no part of the path): 404 for
//       no route, 405 with the methods a path takes; a {job} is resolved (a submission id stands for its job; 404 when it
//       names no job or array); then the route's Access (403 saying who may), then
//       its handler
//
// The table itself is add_routes() in api_routes.cc: every route with its method, the
// access it needs and its handler, in one place. The handlers live in one class per
// resource: JobRoutes (and ArrayRoutes), ClusterRoutes, ImageRoutes, AdminRoutes,
// PackageRoutes, QuotaRoutes, QueueRoutes, StackRoutes, EventRoutes. Io thread only.
#pragma once

#include <optional>
#include <string>

#include "head/rest/admin_routes.h"
#include "head/rest/cluster_routes.h"
#include "head/rest/event_routes.h"
#include "head/rest/image_routes.h"
#include "head/rest/job_routes.h"
#include "head/rest/package_routes.h"
#include "head/rest/queue_routes.h"
#include "head/rest/quota_routes.h"
#include "head/rest/rest_deps.h"
#include "head/rest/route_table.h"
#include "head/rest/stack_routes.h"
#include "head/rest/webhook_routes.h"
#include "net/http_types.h"

namespace ag::head {

class ApiRoutes {
 public:
  using Deps = RestDeps;
  explicit ApiRoutes(Deps deps);

  void handle(const net::HttpRequest& request, net::Respond respond);
  // The cluster CA (PEM) served at GET /api/tls/ca, which needs no credential: a
  // client checks it against the fingerprint it was given before trusting it.
  void set_tls(std::string ca_pem) { ca_pem_ = std::move(ca_pem); }
  // Where a request's body goes, from its header (net::ServerHandlers::plan_body):
  // a package upload streams into the package store once its caller is checked; any
  // other body is read only from a caller with a valid credential.
  net::BodyPlan plan_body(const net::HttpRequest& header);
  const RouteTable& table() const { return table_; }

 private:
  void add_routes();
  // Who sent the request: its bearer token, else its session cookie.
  Principal authenticate(const net::HttpRequest& request) const;
  // The 401/403 for a request without a valid credential, a cross-site cookie request,
  // a join token, or a node's credential used for anything but packages.
  std::optional<net::HttpResponse> refuse_unauthorized(const net::HttpRequest& request, const Principal& who) const;
  // The 403 when `call.who` lacks the route's access (the 404 for a {job} that names
  // nothing, after resolving a submission id to its job in `call`).
  std::optional<net::HttpResponse> refuse_access(const Route& route, Call& call) const;
  // Records a mutating call in the audit log once it is answered.
  net::Respond audited(const net::HttpRequest& request, const Principal& who, net::Respond respond);

  Deps deps_;
  JobRoutes jobs_;
  ClusterRoutes cluster_;
  ImageRoutes images_;
  AdminRoutes admin_;
  PackageRoutes packages_;
  QuotaRoutes quotas_;
  QueueRoutes queues_;
  StackRoutes stacks_;
  EventRoutes events_;
  WebhookRoutes webhooks_;
  RouteTable table_;
  std::string ca_pem_;
};

}  // namespace ag::head
