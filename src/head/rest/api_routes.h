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
//   POST /api/jobs/{id}/hold|release       a pending job leaves the queue until released
//   GET /api/quotas, PUT|DELETE /api/quotas/users|groups/{name}   quotas (api_quotas.cc)
//   GET /api/share                         fair share by user (api_quotas.cc)
//   GET /api/queues, PUT|DELETE /api/queues/{name}                 queues (api_queues.cc)
//   GET|DELETE /api/jobs/{array_id}, POST .../stop|hold|release   a job array whole
//                                          (api_arrays.cc; its elements are jobs ARRAY_INDEX)
//   POST /api/jobs/batch                   {"jobs": [spec, ...]}: all accepted or none
//   GET  /api/packages                     package store counters and limit
//   HEAD|GET|PUT /api/packages/{sha256}    working_dir packages (content-addressed)
//   GET  /api/whoami                       the caller: name, role, groups
//   GET|POST /api/users                    list / add (admin)
//   POST /api/users/{name}/rotate|disable|enable   (admin; rotate also for oneself)
//   GET|POST /api/tokens, DELETE /api/tokens/{id}  join tokens (admin)
//   DELETE /api/nodes/{id}                 remove a node and revoke its credential (admin)
//   GET  /api/audit?limit=N                who changed what (admin)
//   POST /api/images/pull, GET /api/images/pulls/{id}   pre-pull an image on the nodes
//
// plus the dashboard's pages, sign-in, live stream and /metrics (dashboard/).
//
// Every route but the health check and the dashboard's sign-in needs a credential
// (head/auth/access_control.h): a bearer token, or the dashboard's session cookie. A
// cookie-authenticated POST/PUT/PATCH/DELETE must also pass the CSRF check (403
// otherwise). What each role may do is the policy in access_control.h; a job's logs
// and env vars are its owner's (and their groups' and admins'); other callers see
// the job without its env vars. A node credential may only fetch packages; a join
// token nothing here. Every mutating call is audited (AuditLog). Io thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>

#include "common/clock.h"
#include "head/auth/access_control.h"
#include "head/auth/audit_log.h"
#include "head/dashboard/dashboard_routes.h"
#include "head/nodes/image_pulls.h"
#include "head/rest/job_log_routes.h"
#include "head/jobs/job_layer.h"
#include "head/logs/log_store.h"
#include "head/nodes/node_registry.h"
#include "head/packages/package_store.h"
#include "head/gateway/worker_gateway.h"
#include "net/http_types.h"

namespace ag::head {

class ApiRoutes {
 public:
  struct Deps {
    boost::asio::io_context& io;
    JobLayer& jobs;
    NodeRegistry& nodes;
    LogStore& logs;
    PackageStore& packages;
    AccessControl& access;
    AuditLog& audit;
    WorkerGateway& gateway;
    const Clock& clock;
    dashboard::DashboardRoutes& dashboard;
    ImagePulls& pulls;
  };
  explicit ApiRoutes(Deps deps) : deps_(deps), log_routes_({deps.io, deps.jobs, deps.logs}) {}

  void handle(const net::HttpRequest& request, net::Respond respond);
  // The cluster CA (PEM) served at GET /api/tls/ca, which needs no credential: a
  // client checks it against the fingerprint it was given before trusting it.
  void set_tls(std::string ca_pem) { ca_pem_ = std::move(ca_pem); }
  // Where a request's body goes, from its header (net::ServerHandlers::plan_body):
  // a package upload streams into the package store once its token is checked.
  net::BodyPlan plan_body(const net::HttpRequest& header);

 private:
  // Who sent the request: its bearer token, else its session cookie.
  Principal authenticate(const net::HttpRequest& request) const;
  // The 401/403 answer for a request without a valid credential, a cross-site cookie
  // request, or a worker's credential used for anything but packages; nullopt when it
  // may go on.
  std::optional<net::HttpResponse> refuse_unauthorized(const net::HttpRequest& request, const Principal& who) const;
  // Records a mutating call in the audit log once it is answered.
  net::Respond audited(const net::HttpRequest& request, const Principal& who, net::Respond respond);
  void handle_authenticated(const net::HttpRequest& request, const Principal& who, net::Respond respond);
  void handle_list_jobs(const net::HttpRequest& request, net::Respond respond);
  void handle_node(const net::HttpRequest& request, const Principal& who, const std::string& node_id,
                   const net::Respond& respond);
  void handle_job(const net::HttpRequest& request, const Principal& who, const std::string& job_id,
                  const std::string& action, net::Respond respond);
  // A job array as a whole (api_arrays.cc).
  void handle_array(const net::HttpRequest& request, const Principal& who, const JobArray& array,
                    const std::string& array_id, const std::string& action, const net::Respond& respond);
  // Users' and groups' quotas (api_quotas.cc); `rest` is the path after /api/quotas/.
  void handle_quotas(const net::HttpRequest& request, const Principal& who, const std::string& rest,
                     const net::Respond& respond);
  void handle_share(const net::HttpRequest& request, const net::Respond& respond);
  // Queues (api_queues.cc); `name` is the path after /api/queues/ ("" for the list).
  void handle_queues(const net::HttpRequest& request, const Principal& who, const std::string& name,
                     const net::Respond& respond);
  void handle_users(const net::HttpRequest& request, const Principal& who, const net::Respond& respond);
  void handle_tokens(const net::HttpRequest& request, const Principal& who, const net::Respond& respond);
  void handle_audit(const net::HttpRequest& request, net::Respond respond);
  // Whether `who` may stop the job and read its logs and env vars.
  bool may_act_on(const Principal& who, const Job& job) const;
  // The job as `who` may see it (no env vars unless may_act_on).
  nlohmann::json job_view(const Principal& who, const Job& job) const;
  void handle_wait(const net::HttpRequest& request, const Principal& who, const std::string& job_id,
                   net::Respond respond);
  void handle_packages(const net::HttpRequest& request, const Principal& who, const net::Respond& respond);
  // POST /api/images/pull, GET /api/images/pulls/{id} (api_images.cc).
  void handle_images(const net::HttpRequest& request, const Principal& who, const net::Respond& respond);
  void handle_submit_batch(const net::HttpRequest& request, const Principal& who, const net::Respond& respond);
  // Checks what the spec refers to on the head (its working_dir package exists, no
  // container image). Errors: kInvalidArgument naming the field.
  std::optional<Error> check_references(const api::JobSpec& spec) const;

  Deps deps_;
  JobLogRoutes log_routes_;  // GET .../logs and .../lines, once access is granted
  std::string ca_pem_;
};

}  // namespace ag::head
