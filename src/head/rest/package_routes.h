// PackageRoutes: the content-addressed working_dir packages (package_store.h), once
// ApiRoutes has matched the route and checked the caller's access (users who may
// submit, and nodes, which fetch jobs' code; viewers see only the counters).
//
//   GET            /api/packages          counters and limits
//   HEAD|GET       /api/packages/{hash}   whether it is stored (and in use again) / its bytes
//   PUT            /api/packages/{hash}   an upload, streamed into the store as it arrives
//                                         (plan_upload) and checked against its hash
// {hash}: 64 lowercase hex digits, "sha256:" before them allowed. Io thread only.
#pragma once

#include <string>

#include "head/rest/rest_deps.h"
#include "head/rest/route_table.h"

namespace ag::head {

class PackageRoutes {
 public:
  explicit PackageRoutes(const RestDeps& deps) : deps_(deps) {}

  void counters(const Call& call, net::Respond respond);
  void exists(const Call& call, net::Respond respond);  // HEAD
  void fetch(const Call& call, net::Respond respond);   // GET
  void upload(const Call& call, net::Respond respond);  // PUT
  // Where a PUT's body goes, once the caller's access is checked: a refused upload is
  // never stored. A bad hash is a 400.
  net::BodyPlan plan_upload(const std::string& path);

 private:
  RestDeps deps_;
};

}  // namespace ag::head
