// StackRoutes: `POST /api/jobs/{job}/stacks[?task_index=N]` (`ag stack`, the SDK's
// job.stacks(), the dashboard's Stacks button): the Python stacks of every thread of
// every process of a running job's tasks (or task N's), taken by their workers
// (StackTaker), answered as JSON and kept in the job's events. Io thread only.
#pragma once

#include "head/rest/rest_deps.h"
#include "head/rest/route_table.h"
#include "net/http_types.h"

namespace ag::head {

class StackRoutes {
 public:
  explicit StackRoutes(RestDeps deps) : deps_(deps) {}

  void take(const Call& call, net::Respond respond);


 private:
  RestDeps deps_;
};

}  // namespace ag::head
