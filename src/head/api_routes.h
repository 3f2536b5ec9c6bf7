// ApiRoutes: the REST API, answering on both head ports.
//
//   GET  /api/healthz                      (no token)
//   GET  /api/cluster                      summary: nodes, capacity, jobs by state
//   GET  /api/nodes
//   GET  /api/nodes/{id}                   one node with its usage over the last 15 minutes
//                                          and its tasks (live ones first, then recent)
//   GET  /api/jobs[?state=S&limit=N&offset=O]  newest first; "total" counts all matches
//   POST /api/jobs                         submit (JSON job spec)
//   GET  /api/jobs/{id}                    record with attempts and tasks
//   GET  /api/jobs/{id}/events
//   GET  /api/jobs/{id}/logs?task_index=N[&attempt=A&offset=O&max_bytes=B&wait_ms=W]
//        [&tail_bytes=T]  (the last T bytes instead of from offset O); headers
//        X-AG-Offset (where the bytes start), X-AG-Next-Offset, X-AG-Log-Size,
//        X-AG-Log-Complete
//   GET  /api/jobs/{id}/wait?timeout_ms=T  returns when the job is finished (long poll)
//   POST /api/jobs/{id}/stop
//   POST /api/jobs/batch                   {"jobs": [spec, ...]}: all accepted or none
//   GET  /api/packages                     package store counters and limit
//   HEAD|GET|PUT /api/packages/{sha256}    working_dir packages (content-addressed)
//
// plus the dashboard's pages, sign-in, live stream and /metrics (dashboard/).
//
// Every route but the health check and the dashboard's sign-in needs the cluster
// token: as a bearer token, or as the dashboard's session cookie (net/auth.h). A
// cookie-authenticated POST/PUT/PATCH/DELETE must also pass the CSRF check (403
// otherwise). Io thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <optional>
#include <string>

#include "common/clock.h"
#include "head/dashboard/dashboard_routes.h"
#include "head/job_manager.h"
#include "head/log_store.h"
#include "head/node_registry.h"
#include "head/package_store.h"
#include "net/http_types.h"

namespace ag::head {

class ApiRoutes {
 public:
  struct Deps {
    boost::asio::io_context& io;
    JobManager& jobs;
    NodeRegistry& nodes;
    LogStore& logs;
    PackageStore& packages;
    const std::string& token;
    const Clock& clock;
    dashboard::DashboardRoutes& dashboard;
  };
  explicit ApiRoutes(Deps deps) : deps_(deps) {}

  void handle(const net::HttpRequest& request, net::Respond respond);
  // Where a request's body goes, from its header (net::ServerHandlers::plan_body):
  // a package upload streams into the package store once its token is checked.
  net::BodyPlan plan_body(const net::HttpRequest& header);

 private:
  // The 401/403 answer for a request without a valid token (or a cross-site cookie
  // request), or nullopt when it may go on.
  std::optional<net::HttpResponse> refuse_unauthorized(const net::HttpRequest& request) const;
  void handle_authenticated(const net::HttpRequest& request, net::Respond respond);
  void handle_list_jobs(const net::HttpRequest& request, net::Respond respond);
  void handle_node(const std::string& node_id, const net::Respond& respond);
  void handle_job(const net::HttpRequest& request, const std::string& job_id,
                  const std::string& action, net::Respond respond);
  void handle_logs(const net::HttpRequest& request, const std::string& job_id, net::Respond respond);
  void handle_wait(const net::HttpRequest& request, const std::string& job_id, net::Respond respond);
  void handle_packages(const net::HttpRequest& request, const net::Respond& respond);
  void handle_submit_batch(const net::HttpRequest& request, const net::Respond& respond);
  // Checks what the spec refers to on the head (its working_dir package exists, no
  // container image). Errors: kInvalidArgument naming the field.
  std::optional<Error> check_references(const api::JobSpec& spec) const;

  Deps deps_;
};

}  // namespace ag::head
