// WebhookRoutes: `ag webhook add|list|remove|test|deliveries`.
//
//   POST   /api/webhooks                  {url, events?, jobs_of?, all?, format?, ca_pem?,
//                                          retry_for_s?} -> 201 the webhook with its secret
//                                          (shown this once)
//   GET    /api/webhooks                  yours (an admin: everyone's), without secrets
//   DELETE /api/webhooks/{id}
//   POST   /api/webhooks/{id}/test        one webhook.test delivery now: its outcome
//   GET    /api/webhooks/{id}/deliveries  its last 100 deliveries and what is pending
//
// A user's webhook gets their own jobs' events; an admin's may get another user's
// (jobs_of) or every job's and node's (all). Only the webhook's owner or an admin may
// see, test or remove it. Io thread only.
#pragma once

#include "head/rest/rest_deps.h"
#include "head/rest/route_table.h"
#include "net/http_types.h"

namespace ag::head {

class WebhookRoutes {
 public:
  explicit WebhookRoutes(RestDeps deps) : deps_(deps) {}

  void add(const Call& call, net::Respond respond);
  void list(const Call& call, net::Respond respond);
  void remove(const Call& call, net::Respond respond);
  void test(const Call& call, net::Respond respond);
  void deliveries(const Call& call, net::Respond respond);

 private:
  // The webhook {id} when the caller may act on it; otherwise answers 404 or 403.
  const Webhook* mine(const Call& call, const net::Respond& respond) const;

  RestDeps deps_;
};

}  // namespace ag::head
