// QuotaRoutes: what each user, or group of users, may hold at once
// (head/scheduler/quotas.h), and fair share, once ApiRoutes has checked the caller's
// access (anyone reads; admins set).
//
//   GET    /api/quotas                    {"users": {name: {limits, "use"}}, "groups": {...}}
//                                         (anyone may read them: users want to know theirs)
//   PUT    /api/quotas/users/{name}       {"max_gpus": 8, "max_cpus": 64, "max_memory": bytes,
//   PUT    /api/quotas/groups/{name}       "max_running_jobs": 10} (admin; absent or null: no
//                                         limit; no limit at all removes the quota)
//   DELETE /api/quotas/users|groups/{name}  (admin)
//   GET    /api/share                     fair share: each user's decayed usage (GPU-
//                                         equivalent seconds), part, share and factor
#pragma once

#include "head/rest/rest_deps.h"
#include "head/rest/route_table.h"

namespace ag::head {

class QuotaRoutes {
 public:
  explicit QuotaRoutes(const RestDeps& deps) : deps_(deps) {}

  void list(const Call& call, net::Respond respond);
  void set(const Call& call, net::Respond respond);  // PUT sets, DELETE removes
  void share(const Call& call, net::Respond respond);

 private:
  RestDeps deps_;
};

}  // namespace ag::head
