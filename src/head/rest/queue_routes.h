// QueueRoutes: queues (partitions), named sets of nodes with a default priority,
// per-user limits and preemption (PolicyChanges::set_queue), once ApiRoutes has
// checked the caller's access.
//
//   GET    /api/queues          {"queues": [{"name", "nodes_with", "priority", "preempt",
//                               "max_*_per_user", "nodes", "pending_jobs", "running_jobs",
//                               "gpus_held", "cpu_millis_held"}]} (anyone may read them)
//   PUT    /api/queues/{name}   a queue (admin): {"nodes_with": {"gpu": "a100"},
//                               "priority": 10, "preempt": true, "max_gpus_per_user": 8}
//   DELETE /api/queues/{name}   (admin; refused while jobs wait or run in it)
#pragma once

#include "head/rest/rest_deps.h"
#include "head/rest/route_table.h"

namespace ag::head {

class QueueRoutes {
 public:
  explicit QueueRoutes(const RestDeps& deps) : deps_(deps) {}

  void list(const Call& call, net::Respond respond);
  void set(const Call& call, net::Respond respond);  // PUT creates or changes, DELETE removes

 private:
  RestDeps deps_;
};

}  // namespace ag::head
