// JobRoutes: the routes of jobs (and of job arrays under their id), once ApiRoutes has
// matched the route and checked the caller's access (route_table.h). A {job} parameter
// names a job or an array that exists (ApiRoutes answers 404 otherwise, and resolves a
// submission id to its job).
//
//   POST   /api/jobs                 submit one spec            -> 201 {"job_id"[, "array_size"]}
//   POST   /api/jobs/batch           {"jobs": [spec, ...]}, all or none -> 201 {"job_ids"}
//   GET    /api/jobs                 the list, one page (job_list.h)
//   GET    /api/jobs/{job}           the job (env vars and output only for those who may
//                                    act on it), or the array (array_routes.h)
//   DELETE /api/jobs/{job}           a finished job, its logs and its package if unused
//   GET    /api/jobs/{job}/events
//   POST   /api/jobs/{job}/stop|hold|release
//   GET    /api/jobs/{job}/logs|lines  output (job_log_routes.h)
//   GET    /api/jobs/{job}/usage     CPU, memory and GPU use over the last 15 minutes
//   GET    /api/jobs/{job}/wait?timeout_ms=T[&attempts_at_least=N&changed_from=M]
//                                    long poll: answers when the job finishes (or has N
//                                    attempts, or its message is no longer M)
// Io thread only.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>

#include "head/rest/array_routes.h"
#include "head/rest/job_log_routes.h"
#include "head/rest/rest_deps.h"
#include "head/rest/route_table.h"

namespace ag::head {

class JobRoutes {
 public:
  explicit JobRoutes(const RestDeps& deps)
      : deps_(deps), arrays_(deps), log_routes_({deps.io, deps.jobs, deps.logs}) {}

  void submit(const Call& call, net::Respond respond);
  void submit_batch(const Call& call, net::Respond respond);
  void list(const Call& call, net::Respond respond);
  void show(const Call& call, net::Respond respond);
  void remove(const Call& call, net::Respond respond);
  void events(const Call& call, net::Respond respond);
  void stop(const Call& call, net::Respond respond);
  void hold(const Call& call, net::Respond respond);     // hold or release, as the path says
  void logs(const Call& call, net::Respond respond);
  void lines(const Call& call, net::Respond respond);
  void usage(const Call& call, net::Respond respond);
  void wait(const Call& call, net::Respond respond);

 private:
  // The job as `who` may see it (no env vars or output unless they may act on it).
  nlohmann::json job_view(const Principal& who, const Job& job) const;
  // Checks what the spec refers to on the head (its working_dir package exists).
  // Errors: kInvalidArgument naming the field.
  std::optional<Error> check_references(const api::JobSpec& spec) const;

  RestDeps deps_;
  ArrayRoutes arrays_;       // the same routes under an array's id
  JobLogRoutes log_routes_;  // GET .../logs and .../lines
};

}  // namespace ag::head
