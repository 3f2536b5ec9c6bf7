#include "head/dashboard/dashboard_routes.h"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "head/dashboard/assets.h"
#include "net/auth.h"

namespace ag::head::dashboard {
namespace {

using net::HttpResponse;
using nlohmann::json;

// The sign-in page's files: served before sign-in. Everything else needs the cookie.
constexpr std::string_view kPublicAssets[] = {"login.js", "style.css", "favicon.svg"};

constexpr const char* kContentSecurityPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

// Headers for pages and assets: the CSP, no MIME sniffing, no framing (clickjacking on
// the stop button), and no Referer that could carry a ?token= link elsewhere.
void add_page_headers(HttpResponse& res) {
  res.headers.emplace_back("Content-Security-Policy", kContentSecurityPolicy);
  res.headers.emplace_back("X-Content-Type-Options", "nosniff");
  res.headers.emplace_back("X-Frame-Options", "DENY");
  res.headers.emplace_back("Referrer-Policy", "no-referrer");
}

HttpResponse json_error(int status, const std::string& message) {
  return {status, "application/json", json({{"error", message}}).dump()};
}

HttpResponse asset_response(int status, std::string_view path) {
  const Asset* asset = find_asset(path);
  if (!asset) return json_error(404, "no dashboard asset '" + std::string(path) + "'");
  HttpResponse res{status, std::string(asset->content_type), std::string(asset->bytes)};
  add_page_headers(res);
  return res;
}

bool is_public_asset(std::string_view name) {
  for (auto p : kPublicAssets) {
    if (p == name) return true;
  }
  return false;
}

}  // namespace

bool DashboardRoutes::is_page(const std::string& path) {
  return path == "/" || path == "/index.html" || path == "/login";
}

HttpResponse DashboardRoutes::sign_in_page(int status) const { return asset_response(status, "login.html"); }

bool DashboardRoutes::handle_public(const net::HttpRequest& req, const net::Respond& respond) {
  const std::string& path = req.path;
  if (path == "/login") {
    respond(sign_in_page(200));
    return true;
  }
  if (path == "/api/session") {
    if (req.method == "POST") {
      // Only the head's own sign-in page may sign a browser in (no login CSRF).
      const std::string& origin = req.header("origin");
      if (!origin.empty() && !net::passes_csrf_check(req)) {
        respond(json_error(403, "sign-in from another site's page refused (Origin " + origin + ")"));
        return true;
      }
      json body = json::parse(req.body, nullptr, false);
      if (body.is_discarded() || !body.is_object() || !body.contains("token") || !body["token"].is_string()) {
        respond(json_error(400,
                           "send {\"token\": \"<your user token>\"}; `ag user add` makes one, and the first "
                           "admin's is in the head's data dir, file 'token'"));
        return true;
      }
      std::string token = body["token"].get<std::string>();
      while (!token.empty() && (token.back() == ' ' || token.back() == '\n' || token.back() == '\r')) token.pop_back();
      while (!token.empty() && token.front() == ' ') token.erase(0, 1);
      sign_in(req, token, {200, "application/json", R"({"signed_in":true})"}, respond);
    } else if (req.method == "DELETE") {
      sign_out(req, respond);
    } else {
      respond(json_error(405, "use POST /api/session {\"token\": ...} to sign in, DELETE to sign out"));
    }
    return true;
  }
  if (path.rfind("/assets/", 0) == 0 && is_public_asset(std::string_view(path).substr(8))) {
    respond(asset_response(200, std::string_view(path).substr(8)));
    return true;
  }
  if (path == "/favicon.ico") {
    respond(asset_response(200, "favicon.svg"));
    return true;
  }
  // A sign-in link (`ag start-head` prints it). A good token sets the cookie and
  // redirects to the bare URL, so the token does not stay in the address bar or
  // history; a wrong one gets the sign-in page, which says so.
  if ((path == "/" || path == "/index.html") && req.query.count("token")) {
    HttpResponse res{303, "text/plain; charset=utf-8", "signed in; continue at /\n"};
    res.headers.emplace_back("Location", "/");
    res.headers.emplace_back("Referrer-Policy", "no-referrer");
    sign_in(req, req.query.at("token"), std::move(res), respond);
    return true;
  }
  return false;
}

void DashboardRoutes::sign_in(const net::HttpRequest& req, const std::string& token, HttpResponse ok,
                              const net::Respond& respond) {
  Principal who = deps_.access.authenticate_token(token);
  bool is_page = req.method == "GET";
  if (!who.is_user()) {
    if (is_page) return respond(sign_in_page(401));
    return respond(json_error(401, who.kind == Principal::Kind::kNone
                                       ? "the head refused the token: " + who.refusal +
                                             "; use your user token (`ag user add` makes one; the first admin's "
                                             "is in the head's data dir, file 'token')"
                                       : "only a user token signs in to the dashboard, not a worker's"));
  }
  deps_.access.create_session(
      who.name, net::kSessionCookieLifetimeS * 1000,
      [this, respond, ok = std::move(ok), who, from = req.remote_address](Result<std::string> session) mutable {
        deps_.audit.record({deps_.clock.now_ms(), who.name, from, "dashboard sign-in",
                            session.ok() ? "ok" : session.error().message});
        if (!session.ok()) return respond(json_error(http_status_for(session.error().code), session.error().message));
        ok.headers.emplace_back("Set-Cookie", net::session_set_cookie(deps_.access.cookie_name(), session.value()));
        respond(std::move(ok));
      });
}

void DashboardRoutes::sign_out(const net::HttpRequest& req, const net::Respond& respond) {
  // Signing out needs no proof beyond the cookie itself: it only ever takes access away.
  auto answer = [this, respond] {
    HttpResponse res{200, "application/json", R"({"signed_in":false})"};
    res.headers.emplace_back("Set-Cookie", net::session_clear_cookie(deps_.access.cookie_name()));
    respond(std::move(res));
  };
  Principal who = deps_.access.authenticate_session(net::cookie_value(req, deps_.access.cookie_name()));
  if (!who.via_cookie()) return answer();
  deps_.access.end_session(who.session_hash, [this, answer, who, from = req.remote_address](const Result<bool>& ended) {
    deps_.audit.record({deps_.clock.now_ms(), who.name, from, "dashboard sign-out",
                        ended.ok() ? "ok" : ended.error().message});
    if (!ended.ok()) spdlog::error("a dashboard session could not be ended in the store: {}", ended.error().message);
    answer();
  });
}

bool DashboardRoutes::handle(const net::HttpRequest& req, const Principal& who, const net::Respond& respond) {
  if (!who.is_user()) return false;
  const std::string& path = req.path;
  if (path == "/" || path == "/index.html") {
    respond(asset_response(200, "index.html"));
    return true;
  }
  if (path.rfind("/assets/", 0) == 0) {
    std::string_view name = std::string_view(path).substr(8);
    // Pages are served at their own URLs only, with their own rules.
    if (name.size() >= 5 && name.substr(name.size() - 5) == ".html") {
      respond(json_error(404, "no dashboard asset '" + std::string(name) + "'"));
    } else {
      respond(asset_response(200, name));
    }
    return true;
  }
  if (path == "/api/stream") {
    respond(req.method == "GET" ? deps_.events.open_stream() : json_error(405, "use GET for /api/stream"));
    return true;
  }
  if (path == "/metrics") {
    if (req.method != "GET") {
      respond(json_error(405, "use GET for /metrics"));
    } else {
      respond({200, "text/plain; version=0.0.4; charset=utf-8", deps_.metrics.render()});
    }
    return true;
  }
  return false;
}

}  // namespace ag::head::dashboard
