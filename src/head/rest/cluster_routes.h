// ClusterRoutes: the cluster, its nodes and the caller, once ApiRoutes has matched the
// route and checked the caller's access (route_table.h).
//
//   GET    /api/cluster              summary: nodes, capacity, what is allocated, jobs by
//                                    state, TLS, version
//   GET    /api/nodes                every node with what its live tasks hold
//   GET    /api/nodes/{node}         one node with its usage over the last 15 minutes and
//                                    its tasks (live ones first, then recent)
//   DELETE /api/nodes/{node}         remove the node and revoke its credential
//   POST   /api/nodes/{node}/drain|resume   no new tasks there (held across restarts)
//   GET    /api/whoami               the caller: name, role, groups
//   GET    /api/version              the head's build and worker protocol range, and its
//                                    role among heads sharing a store (leader, epoch)
// Io thread only.
#pragma once

#include "head/rest/rest_deps.h"
#include "head/rest/route_table.h"

namespace ag::head {

class ClusterRoutes {
 public:
  explicit ClusterRoutes(const RestDeps& deps) : deps_(deps) {}

  // GET /api/cluster and GET /api/nodes; `tls`: whether the head serves TLS.
  void summary(const Call& call, bool tls, net::Respond respond);
  void node(const Call& call, net::Respond respond);
  void remove_node(const Call& call, net::Respond respond);
  void set_draining(const Call& call, net::Respond respond);  // drain or resume, as the path says
  void whoami(const Call& call, net::Respond respond);
  void version(const Call& call, net::Respond respond);

 private:
  RestDeps deps_;
};

}  // namespace ag::head
