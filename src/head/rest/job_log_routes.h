// The routes that read a job's output, once ApiRoutes has checked that the caller may
// read the job's logs:
//   GET /api/jobs/{id}/logs    one task's bytes from an offset, sent from the log's
//                              file (offset, max_bytes, tail_bytes, download, wait_ms)
//   GET /api/jobs/{id}/lines   every task's lines merged as received, page after page
//                              (tail, since_ms, from, format, timestamps, wait_ms)
// job_log_routes.cc documents each parameter. Both long-poll on the LogStore and the
// job (wait_ms). Io thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "api/protocol.h"
#include "head/logs/log_store.h"
#include "net/http_types.h"

namespace ag::head {

struct JobLayer;

class JobLogRoutes {
 public:
  struct Deps {
    boost::asio::io_context& io;
    JobLayer& jobs;
    LogStore& logs;
  };
  explicit JobLogRoutes(Deps deps) : deps_(deps) {}

  void handle_logs(const net::HttpRequest& request, const std::string& job_id, net::Respond respond);
  void handle_lines(const net::HttpRequest& request, const std::string& job_id, net::Respond respond);

 private:
  // handle_lines' long poll: asks again once one of `keys` grows, the job changes, or
  // wait_ms passes.
  void wait_for_lines(const net::HttpRequest& request, const std::string& job_id,
                      const std::vector<api::TaskKey>& keys, int64_t wait_ms, net::Respond respond);

  Deps deps_;
};

}  // namespace ag::head
