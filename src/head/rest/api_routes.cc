#include "head/rest/api_routes.h"

#include <nlohmann/json.hpp>
#include <string_view>

#include "head/rest/route_helpers.h"
#include "net/auth.h"

namespace ag::head {
namespace {

using nlohmann::json;

// The path routes are matched on: one trailing slash ("/api/jobs/ID/") is no part of it.
std::string_view route_path(std::string_view path) {
  if (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  return path;
}

// "GET", "GET or POST", "GET, PUT or DELETE".
std::string either(const std::vector<std::string>& methods) {
  std::string out;
  for (size_t i = 0; i < methods.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == methods.size() ? " or " : ", ") + methods[i];
  }
  return out;
}

}  // namespace

ApiRoutes::ApiRoutes(Deps deps)
    : deps_(deps),
      jobs_(deps),
      cluster_(deps),
      images_(deps),
      admin_(deps),
      packages_(deps),
      quotas_(deps),
      queues_(deps),
      stacks_(deps),
      events_(deps),
      webhooks_(deps) {
  add_routes();
}

void ApiRoutes::add_routes() {
  using A = Access;
  // Binds a handler of one of the route classes.
  const auto to = [](auto* routes, void (std::remove_pointer_t<decltype(routes)>::*fn)(const Call&, net::Respond)) {
    return [routes, fn](const Call& call, net::Respond respond) { (routes->*fn)(call, std::move(respond)); };
  };
  const auto add = [this](const char* method, const char* pattern, Access access, const char* what, Handler h) {
    table_.add({method, pattern, access, what, std::move(h)});
  };
  // The cluster and the caller.
  add("GET", "/api/cluster", A::kUser, "", [this](const Call& c, net::Respond r) {
    cluster_.summary(c, !ca_pem_.empty(), std::move(r));
  });
  add("GET", "/api/nodes", A::kUser, "", [this](const Call& c, net::Respond r) {
    cluster_.summary(c, !ca_pem_.empty(), std::move(r));
  });
  add("GET", "/api/nodes/{node}", A::kUser, "", to(&cluster_, &ClusterRoutes::node));
  add("DELETE", "/api/nodes/{node}", A::kAdmin, "removing a node", to(&cluster_, &ClusterRoutes::remove_node));
  add("POST", "/api/nodes/{node}/drain", A::kAdmin, "draining or resuming a node", to(&cluster_, &ClusterRoutes::set_draining));
  add("POST", "/api/nodes/{node}/resume", A::kAdmin, "draining or resuming a node", to(&cluster_, &ClusterRoutes::set_draining));
  add("GET", "/api/events", A::kUser, "", to(&events_, &EventRoutes::list));
  add("GET", "/api/webhooks", A::kUser, "", to(&webhooks_, &WebhookRoutes::list));
  add("POST", "/api/webhooks", A::kSubmitter, "add webhooks", to(&webhooks_, &WebhookRoutes::add));
  add("DELETE", "/api/webhooks/{id}", A::kSubmitter, "remove webhooks", to(&webhooks_, &WebhookRoutes::remove));
  add("POST", "/api/webhooks/{id}/test", A::kSubmitter, "test webhooks", to(&webhooks_, &WebhookRoutes::test));
  add("GET", "/api/webhooks/{id}/deliveries", A::kUser, "", to(&webhooks_, &WebhookRoutes::deliveries));
  add("GET", "/api/whoami", A::kUser, "", to(&cluster_, &ClusterRoutes::whoami));
  add("GET", "/api/version", A::kUser, "", to(&cluster_, &ClusterRoutes::version));
  // Jobs; a {job} may name an array, whose routes act on every element (array_routes.h).
  add("GET", "/api/jobs", A::kUser, "", to(&jobs_, &JobRoutes::list));
  add("POST", "/api/jobs", A::kSubmitter, "submit jobs", to(&jobs_, &JobRoutes::submit));
  add("POST", "/api/jobs/batch", A::kSubmitter, "submit jobs", to(&jobs_, &JobRoutes::submit_batch));
  add("GET", "/api/jobs/{job}", A::kUser, "", to(&jobs_, &JobRoutes::show));
  add("DELETE", "/api/jobs/{job}", A::kJobOwner, "delete it", to(&jobs_, &JobRoutes::remove));
  add("GET", "/api/jobs/{job}/events", A::kUser, "", to(&jobs_, &JobRoutes::events));
  add("POST", "/api/jobs/{job}/stop", A::kJobOwner, "stop it", to(&jobs_, &JobRoutes::stop));
  add("POST", "/api/jobs/{job}/hold", A::kJobOwner, "hold it", to(&jobs_, &JobRoutes::hold));
  add("POST", "/api/jobs/{job}/release", A::kJobOwner, "release it", to(&jobs_, &JobRoutes::hold));
  add("GET", "/api/jobs/{job}/logs", A::kJobOwner, "read its logs", to(&jobs_, &JobRoutes::logs));
  add("GET", "/api/jobs/{job}/lines", A::kJobOwner, "read its logs", to(&jobs_, &JobRoutes::lines));
  add("GET", "/api/jobs/{job}/usage", A::kUser, "", to(&jobs_, &JobRoutes::usage));
  add("POST", "/api/jobs/{job}/stacks", A::kJobOwner, "take its stacks", to(&stacks_, &StackRoutes::take));
  add("GET", "/api/jobs/{job}/wait", A::kUser, "", to(&jobs_, &JobRoutes::wait));
  // Sharing policy: anyone reads it, admins set it.
  add("GET", "/api/quotas", A::kUser, "", to(&quotas_, &QuotaRoutes::list));
  for (const char* method : {"PUT", "DELETE"}) {
    add(method, "/api/quotas/users/{name}", A::kAdmin, "setting quotas", to(&quotas_, &QuotaRoutes::set));
    add(method, "/api/quotas/groups/{name}", A::kAdmin, "setting quotas", to(&quotas_, &QuotaRoutes::set));
    add(method, "/api/queues/{name}", A::kAdmin, "managing queues", to(&queues_, &QueueRoutes::set));
  }
  add("GET", "/api/share", A::kUser, "", to(&quotas_, &QuotaRoutes::share));
  add("GET", "/api/queues", A::kUser, "", to(&queues_, &QueueRoutes::list));
  // Packages hold jobs' code: users who may submit upload and fetch them, nodes fetch
  // them; viewers see only the counters.
  add("GET", "/api/packages", A::kUser, "", to(&packages_, &PackageRoutes::counters));
  add("HEAD", "/api/packages/{hash}", A::kPackageReader, "read or upload packages", to(&packages_, &PackageRoutes::exists));
  add("GET", "/api/packages/{hash}", A::kPackageReader, "read or upload packages", to(&packages_, &PackageRoutes::fetch));
  add("PUT", "/api/packages/{hash}", A::kPackageReader, "read or upload packages", to(&packages_, &PackageRoutes::upload));
  add("POST", "/api/images/pull", A::kSubmitter, "pull images", to(&images_, &ImageRoutes::pull));
  add("GET", "/api/images/pulls/{pull}", A::kUser, "", to(&images_, &ImageRoutes::pull_status));
  // Users, join tokens and the audit log are an admin's; anyone may rotate their own token.
  add("GET", "/api/users", A::kAdmin, "managing users", to(&admin_, &AdminRoutes::list_users));
  add("POST", "/api/users", A::kAdmin, "managing users", to(&admin_, &AdminRoutes::add_user));
  add("GET", "/api/users/{name}", A::kAdmin, "managing users", to(&admin_, &AdminRoutes::show_user));
  add("PATCH", "/api/users/{name}", A::kAdmin, "managing users", to(&admin_, &AdminRoutes::change_user));
  add("DELETE", "/api/users/{name}", A::kAdmin, "managing users", to(&admin_, &AdminRoutes::delete_user));
  add("POST", "/api/users/{name}/rotate", A::kSelfOrAdmin, "managing users", to(&admin_, &AdminRoutes::rotate_user));
  add("POST", "/api/users/{name}/disable", A::kAdmin, "managing users", to(&admin_, &AdminRoutes::set_user_disabled));
  add("POST", "/api/users/{name}/enable", A::kAdmin, "managing users", to(&admin_, &AdminRoutes::set_user_disabled));
  add("GET", "/api/tokens", A::kAdmin, "join tokens", to(&admin_, &AdminRoutes::list_tokens));
  add("POST", "/api/tokens", A::kAdmin, "join tokens", to(&admin_, &AdminRoutes::create_token));
  add("DELETE", "/api/tokens/{token}", A::kAdmin, "join tokens", to(&admin_, &AdminRoutes::revoke_token));
  add("GET", "/api/audit", A::kAdmin, "the audit log", to(&admin_, &AdminRoutes::audit));
}

Principal ApiRoutes::authenticate(const net::HttpRequest& req) const {
  std::string_view bearer = net::bearer_token(req);
  if (!bearer.empty() || !req.header("authorization").empty()) return deps_.access.authenticate_token(bearer);
  std::string session = net::cookie_value(req, deps_.access.cookie_name());
  if (session.empty()) return {};
  return deps_.access.authenticate_session(session);
}

std::optional<net::HttpResponse> ApiRoutes::refuse_unauthorized(const net::HttpRequest& req,
                                                                const Principal& who) const {
  if (who.kind == Principal::Kind::kNone) {
    if (req.method == "GET" && dashboard::DashboardRoutes::is_page(req.path)) return deps_.dashboard.sign_in_page(401);
    return error_response(401, who.refusal.empty()
                                   ? "missing credential: send 'Authorization: Bearer <token>' with your user token "
                                     "(`ag user add` makes one; the first admin's is in the head's data dir, file "
                                     "'token'), or sign in to the dashboard"
                                   : "the head refused the credential: " + who.refusal);
  }
  // The browser attaches the cookie to requests other sites make it send; only the
  // head's own pages may change state with it. A bearer token is never attached by a
  // browser on its own, so it needs no such check.
  if (who.via_cookie() && net::is_state_changing(req.method) && !net::passes_csrf_check(req)) {
    return error_response(403, "cross-site request refused: a " + req.method +
                                   " signed in by the dashboard cookie must come from the dashboard's own "
                                   "pages (matching Origin, or the X-AG-CSRF header)");
  }
  if (who.kind == Principal::Kind::kJoin) {
    return error_response(403, "a join token can only register a worker node (`ag start-worker --token-file FILE`); "
                               "use a user token for the API");
  }
  if (who.kind == Principal::Kind::kNode &&
      !((req.method == "GET" || req.method == "HEAD") && req.path.rfind("/api/packages/", 0) == 0)) {
    return error_response(403, "node " + who.name +
                                   "'s credential can only speak the worker protocol and fetch packages; use a "
                                   "user token for the API");
  }
  return std::nullopt;
}

net::Respond ApiRoutes::audited(const net::HttpRequest& req, const Principal& who, net::Respond respond) {
  if (!net::is_state_changing(req.method)) return respond;
  std::string action = req.method + " " + req.path;
  if (req.method == "POST" && req.path == "/api/users") {
    json body = json::parse(req.body, nullptr, false);
    if (body.is_object() && body.contains("name") && body["name"].is_string()) {
      action += " (" + body["name"].get<std::string>().substr(0, 64) + ")";
    }
  }
  bool submit = req.method == "POST" && (req.path == "/api/jobs" || req.path == "/api/jobs/batch");
  return [this, action, submit, actor = who.name, from = req.remote_address,
          respond = std::move(respond)](net::HttpResponse res) {
    // Accepted submissions are on record with their jobs (owner, address, time).
    if (!(submit && res.status < 300)) {
      std::string outcome = "ok";
      if (res.status >= 300) {
        json body = json::parse(res.body, nullptr, false);
        std::string message = body.is_object() && body.contains("error") && body["error"].is_string()
                                  ? body["error"].get<std::string>()
                                  : "";
        if (message.size() > 300) message = message.substr(0, 300) + "...";
        outcome = "HTTP " + std::to_string(res.status) + (message.empty() ? "" : ": " + message);
      }
      deps_.audit.record({deps_.clock.now_ms(), actor, from, action, outcome});
    }
    respond(std::move(res));
  };
}

void ApiRoutes::handle(const net::HttpRequest& req, net::Respond respond) {
  // The time too: `ag doctor` compares clocks with it.
  if (req.path == "/api/healthz") return respond(json_response(200, {{"status", "ok"}, {"time_ms", deps_.clock.now_ms()}}));
  if (req.path == "/api/tls/ca") {
    if (ca_pem_.empty()) return respond(error_response(404, "this head runs without TLS (--insecure)"));
    return respond({200, "application/x-pem-file", ca_pem_});
  }
  if (deps_.dashboard.handle_public(req, respond)) return;
  Principal who = authenticate(req);
  if (auto refusal = refuse_unauthorized(req, who)) {
    // A refused change by a known caller is on record; an unknown one is only logged,
    // so that a stranger cannot flood the audit log.
    if (who.kind != Principal::Kind::kNone) return audited(req, who, std::move(respond))(std::move(*refusal));
    return respond(std::move(*refusal));
  }
  respond = audited(req, who, std::move(respond));
  if (deps_.dashboard.handle(req, who, respond)) return;
  RouteTable::Match match = table_.find(req.method, route_path(req.path));
  if (match.kind == RouteTable::Match::Kind::kNoRoute) {
    return respond(error_response(404, "no route for " + req.method + " " + req.path));
  }
  if (match.kind == RouteTable::Match::Kind::kMethodNotAllowed) {
    return respond(error_response(405, "use " + either(match.allowed) + " for " + req.path));
  }
  Call call{req, who, std::move(match.params)};
  if (auto refusal = refuse_access(*match.route, call)) return respond(std::move(*refusal));
  match.route->handler(call, std::move(respond));
}

std::optional<net::HttpResponse> ApiRoutes::refuse_access(const Route& route, Call& call) const {
  const Principal& who = call.who;
  const Job* job = nullptr;
  if (auto it = call.params.find("job"); it != call.params.end()) {
    // The submission_id the caller chose works as the job's id too.
    job = deps_.jobs.table.find(it->second);
    if (!job) job = deps_.jobs.table.find_submission(who.name, it->second);
    if (job) it->second = job->id;
    if (!job && !deps_.jobs.arrays.find(it->second)) {
      return error_response(404, "no job with id '" + it->second + "'; list jobs with `ag list-jobs`");
    }
  }
  switch (route.access) {
    case Access::kUser:
      return std::nullopt;
    case Access::kSubmitter:
      if (may_submit(who)) return std::nullopt;
      return viewer_cannot(who, route.what);
    case Access::kAdmin:
      if (who.is_admin()) return std::nullopt;
      return admin_only(route.what);
    case Access::kSelfOrAdmin:
      if (who.is_admin() || (who.is_user() && who.name == call.param("name"))) return std::nullopt;
      return admin_only(route.what);
    case Access::kJobOwner:
      // An array's routes check its elements (array_routes.h).
      if (!job || may_act_on(deps_.access, who, *job)) return std::nullopt;
      return not_your_job(*job, route.what);
    case Access::kPackageReader:
      if (who.kind == Principal::Kind::kNode || may_submit(who)) return std::nullopt;
      return viewer_cannot(who, route.what);
  }
  return error_response(500, "route " + route.pattern + " has no access rule");
}

net::BodyPlan ApiRoutes::plan_body(const net::HttpRequest& req) {
  RouteTable::Match match = table_.find(req.method, route_path(req.path));
  // Any PUT under /api/packages/ is an upload: one to a path that names no package is
  // refused before a byte of it is read.
  const bool upload = req.method == "PUT" && req.path.rfind("/api/packages/", 0) == 0;
  if (!upload) {
    // Any other body is read only from a caller with a valid credential: a stranger's
    // megabytes are never held (the sign-in page's own POST is the one exception).
    const bool has_body = !req.header("content-length").empty() || !req.header("transfer-encoding").empty();
    if (!has_body || req.path == "/api/session" || req.header("content-length") == "0") return {};
    Principal who = authenticate(req);
    if (who.kind == Principal::Kind::kNone) return {nullptr, refuse_unauthorized(req, who)};
    return {};
  }
  // Checked before a byte of the upload is taken: a refused upload is never stored.
  Principal who = authenticate(req);
  if (auto refusal = refuse_unauthorized(req, who)) return {nullptr, std::move(refusal)};
  if (match.kind != RouteTable::Match::Kind::kFound) {
    return {nullptr, error_response(400, "'" + req.path.substr(std::string("/api/packages/").size()) +
                                             "' is not a package hash; expected 64 lowercase hex digits")};
  }
  Call call{req, who, std::move(match.params)};
  if (auto refusal = refuse_access(*match.route, call)) return {nullptr, std::move(refusal)};
  return packages_.plan_upload(req.path);
}

}  // namespace ag::head
