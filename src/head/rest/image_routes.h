// ImageRoutes: pre-pulling a container image on the cluster's nodes (`ag pull IMAGE
// [--nodes ...]`), once ApiRoutes has checked the caller's access.
//
//   POST /api/images/pull {"image": "train:1.4", "nodes": ["node_a"]}   (nodes: all that run containers)
//     -> 202 {"pull_id": "pull_...", "image", "nodes": [{"node_id", "state", "message"}]}
//   GET  /api/images/pulls/{pull} -> the same, as the nodes report
// Io thread only.
#pragma once

#include "head/rest/rest_deps.h"
#include "head/rest/route_table.h"

namespace ag::head {

class ImageRoutes {
 public:
  explicit ImageRoutes(const RestDeps& deps) : deps_(deps) {}

  void pull(const Call& call, net::Respond respond);
  void pull_status(const Call& call, net::Respond respond);

 private:
  RestDeps deps_;
};

}  // namespace ag::head
