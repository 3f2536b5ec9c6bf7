// DashboardRoutes: the web dashboard's side of the head's HTTP surface, answering on
// both head ports next to the REST API (ApiRoutes calls in here).
//
//   GET  /  (/index.html)          the app (needs sign-in); with ?token=T: signs in and
//                                   redirects to / so the token leaves the address bar
//   GET  /login                     the sign-in page
//   POST /api/session {"token"}     sign-in with a user token: starts a session the head
//                                   keeps (AccessControl) and sets its cookie
//   DELETE /api/session             sign-out: ends the session on the head, clears the cookie
//   GET  /assets/{file}             embedded assets (dashboard/); the sign-in page's own
//                                   are public, the app's need sign-in
//   GET  /api/stream                live updates, server-sent events (EventHub)
//   GET  /metrics                   Prometheus text format (Metrics)
//
// Every page and asset goes out with a Content-Security-Policy that allows only the
// head's own scripts and styles, so even a string that slipped past the UI's escaping
// could not run. Io thread only.
#pragma once

#include <string>

#include "common/clock.h"
#include "head/auth/access_control.h"
#include "head/auth/audit_log.h"
#include "head/dashboard/event_hub.h"
#include "head/dashboard/metrics.h"
#include "net/http_types.h"

namespace ag::head::dashboard {

class DashboardRoutes {
 public:
  struct Deps {
    AccessControl& access;
    AuditLog& audit;
    const Clock& clock;
    Metrics& metrics;
    EventHub& events;
  };
  explicit DashboardRoutes(Deps deps) : deps_(deps) {}

  // Answers what needs no sign-in: the sign-in page and endpoint, the sign-in page's
  // assets, a page link carrying ?token=. Returns false (without responding) otherwise.
  bool handle_public(const net::HttpRequest& request, const net::Respond& respond);

  // Answers an authenticated request for a page, an asset, /api/stream or /metrics
  // (any user may read these). Returns false (without responding) for any other path.
  bool handle(const net::HttpRequest& request, const Principal& who, const net::Respond& respond);

  // True for the URLs a browser navigates to; an unauthenticated request for one gets
  // sign_in_page() rather than a JSON error.
  static bool is_page(const std::string& path);
  net::HttpResponse sign_in_page(int status) const;

 private:
  // Starts a session for the user whose token is `token` and answers with `ok` plus
  // the cookie, or with the refusal.
  void sign_in(const net::HttpRequest& request, const std::string& token, net::HttpResponse ok,
               const net::Respond& respond);
  void sign_out(const net::HttpRequest& request, const net::Respond& respond);

  Deps deps_;
};

}  // namespace ag::head::dashboard
