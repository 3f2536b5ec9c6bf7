// ApiRoutes: the REST API, answering on both head ports.
//
//   GET  /api/healthz                      (no token)
//   GET  /api/cluster                      summary: nodes, capacity, jobs by state
//   GET  /api/nodes
//   GET  /api/nodes/{id}                   one node with its usage over the last 15 minutes
//   GET  /api/jobs[?state=S&limit=N]       newest first
//   POST /api/jobs                         submit (JSON job spec)
//   GET  /api/jobs/{id}                    record with attempts and tasks
//   GET  /api/jobs/{id}/events
//   GET  /api/jobs/{id}/logs?task_index=N[&attempt=A&offset=O&max_bytes=B&wait_ms=W]
//   GET  /api/jobs/{id}/wait?timeout_ms=T  returns when the job is finished (long poll)
//   POST /api/jobs/{id}/stop
//   POST /api/jobs/batch                   {"jobs": [spec, ...]}: all accepted or none
//   GET  /api/packages                     package store counters and limit
//   HEAD|GET|PUT /api/packages/{sha256}    working_dir packages (content-addressed)
//
// Every route but the health check needs the cluster token. Io thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <optional>
#include <string>

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
  };
  explicit ApiRoutes(Deps deps) : deps_(deps) {}

  void handle(net::HttpRequest request, net::Respond respond);

 private:
  void handle_job(const net::HttpRequest& request, const std::string& job_id,
                  const std::string& action, net::Respond respond);
  void handle_logs(const net::HttpRequest& request, const std::string& job_id, net::Respond respond);
  void handle_wait(const net::HttpRequest& request, const std::string& job_id, net::Respond respond);
  void handle_packages(const net::HttpRequest& request, net::Respond respond);
  void handle_submit_batch(const net::HttpRequest& request, net::Respond respond);
  // Checks what the spec refers to on the head (its working_dir package exists, no
  // container image). Errors: kInvalidArgument naming the field.
  std::optional<Error> check_references(const api::JobSpec& spec) const;

  Deps deps_;
};

}  // namespace ag::head
