#include "head/rest/admin_routes.h"

#include <nlohmann/json.hpp>

#include "head/rest/route_helpers.h"

namespace ag::head {
namespace {

using nlohmann::json;

json user_json(const UserRecord& u) {
  return {{"name", u.name},         {"role", to_string(u.role)}, {"groups", u.groups},
          {"disabled", u.disabled}, {"created_ms", u.created_ms}, {"token_issued_ms", u.token_issued_ms},
          {"created_by", u.created_by}};
}

json token_json(const JoinTokenRecord& t, int64_t now) {
  return {{"id", t.id},
          {"kind", "join"},
          {"created_ms", t.created_ms},
          {"expires_ms", t.expires_ms},
          {"expired", t.expires_ms != 0 && t.expires_ms <= now},
          {"created_by", t.created_by}};
}

// Reads {"groups": ["a", ...]} (optional). Returns false with a 400 on bad input.
bool read_groups(const json& body, std::vector<std::string>* groups, const net::Respond& respond) {
  if (!body.contains("groups") || body["groups"].is_null()) return true;
  const json& g = body["groups"];
  if (!g.is_array() || g.size() > 32) {
    respond(error_response(400, "field 'groups': expected a list of at most 32 group names"));
    return false;
  }
  for (const auto& name : g) {
    if (!name.is_string()) {
      respond(error_response(400, "field 'groups': expected a list of group names (strings)"));
      return false;
    }
    groups->push_back(name.get<std::string>());
  }
  return true;
}

}  // namespace

void AdminRoutes::list_users(const Call&, net::Respond respond) {
  json users = json::array();
  for (const auto& u : deps_.access.users()) users.push_back(user_json(u));
  respond(json_response(200, {{"users", users}}));
}

void AdminRoutes::add_user(const Call& call, net::Respond respond) {
  json body = json::parse(call.req.body, nullptr, false);
  if (!body.is_object() || !body.contains("name") || !body["name"].is_string()) {
    return respond(error_response(400, "send {\"name\": \"alice\", \"role\": \"user\", \"groups\": [...]}"));
  }
  UserRecord user;
  user.name = body["name"].get<std::string>();
  std::string role = body.value("role", std::string("user"));
  auto parsed = body.contains("role") && !body["role"].is_string() ? std::nullopt : parse_role(role);
  if (!parsed) return respond(error_response(400, "field 'role': use admin, user or viewer"));
  user.role = *parsed;
  if (!read_groups(body, &user.groups, respond)) return;
  user.created_by = call.who.name;
  UserRecord shown = user;
  deps_.access.add_user(std::move(user), [respond, shown](Result<std::string> token) {
    if (!token.ok()) return respond(error_response(token.error()));
    json out = user_json(shown);
    out["token"] = token.value();
    respond(json_response(201, out));
  });
}

void AdminRoutes::show_user(const Call& call, net::Respond respond) {
  const UserRecord* user = deps_.access.find_user(call.param("name"));
  if (!user) return respond(error_response(404, "no user '" + call.param("name") + "'; see `ag user list`"));
  respond(json_response(200, user_json(*user)));
}

void AdminRoutes::rotate_user(const Call& call, net::Respond respond) {
  deps_.access.rotate_user(call.param("name"), [respond, name = call.param("name")](Result<std::string> token) {
    if (!token.ok()) return respond(error_response(token.error()));
    respond(json_response(200, {{"name", name}, {"token", token.value()}}));
  });
}

void AdminRoutes::set_user_disabled(const Call& call, net::Respond respond) {
  const bool disable = call.req.path.ends_with("/disable");
  AccessControl::UserUpdate update;
  update.disabled = disable;
  deps_.access.update_user(call.param("name"), update,
                           [respond, name = call.param("name"), disable](const Result<UserRecord>& done) {
                             if (!done.ok()) return respond(error_response(done.error()));
                             respond(json_response(200, {{"name", name}, {"disabled", disable}}));
                           });
}

void AdminRoutes::change_user(const Call& call, net::Respond respond) {
  json body = json::parse(call.req.body, nullptr, false);
  const auto bad = [&respond] {
    respond(error_response(400, "send {\"role\": \"user\", \"add_groups\": [...], \"remove_groups\": [...]} (at least "
                                "one of them)"));
  };
  if (!body.is_object() || body.empty()) return bad();
  AccessControl::UserUpdate update;
  for (const auto& [key, value] : body.items()) {
    if (key == "role") {
      auto role = value.is_string() ? parse_role(value.get<std::string>()) : std::nullopt;
      if (!role) return respond(error_response(400, "field 'role': use admin, user or viewer"));
      update.role = *role;
    } else if (key == "add_groups" || key == "remove_groups") {
      auto& into = key == "add_groups" ? update.add_groups : update.remove_groups;
      json wrapped = {{"groups", value}};
      if (!read_groups(wrapped, &into, respond)) return;
    } else {
      return respond(error_response(400, "unknown field '" + key.substr(0, 64) +
                                             "'; a user change takes role, add_groups and remove_groups"));
    }
  }
  const bool groups_change = !update.add_groups.empty() || !update.remove_groups.empty();
  deps_.access.update_user(call.param("name"), update,
                           [respond, groups_change, &loop = deps_.jobs.loop](const Result<UserRecord>& user) {
                             if (!user.ok()) return respond(error_response(user.error()));
                             // Group quotas count other users now: the user's jobs, or her
                             // old group's, may fit.
                             if (groups_change) loop.request();
                             respond(json_response(200, user_json(user.value())));
                           });
}

void AdminRoutes::delete_user(const Call& call, net::Respond respond) {
  deps_.access.delete_user(call.param("name"), [respond, name = call.param("name")](const Result<bool>& done) {
    if (!done.ok()) return respond(error_response(done.error()));
    respond(json_response(200, {{"name", name}, {"deleted", true}}));
  });
}

void AdminRoutes::list_tokens(const Call&, net::Respond respond) {
  json tokens = json::array();
  const int64_t now = deps_.clock.now_ms();
  for (const auto& t : deps_.access.join_tokens()) tokens.push_back(token_json(t, now));
  respond(json_response(200, {{"tokens", tokens}}));
}

void AdminRoutes::create_token(const Call& call, net::Respond respond) {
  json body = json::parse(call.req.body, nullptr, false);
  if (!body.is_object() || body.value("kind", std::string("join")) != "join") {
    return respond(error_response(400, "send {\"kind\": \"join\", \"ttl_s\": SECONDS}; only join tokens are made "
                                       "here (user tokens come with `ag user add`)"));
  }
  int64_t ttl_s = 0;
  if (body.contains("ttl_s")) {
    const json& ttl = body["ttl_s"];
    if (!ttl.is_number_integer() || ttl.get<int64_t>() < 0 || ttl.get<int64_t>() > 10LL * 365 * 24 * 3600) {
      return respond(error_response(400, "field 'ttl_s': expected whole seconds from 0 (never expires) to 10 years"));
    }
    ttl_s = ttl.get<int64_t>();
  }
  deps_.access.create_join_token(
      ttl_s * 1000, call.who.name, [this, respond](Result<AccessControl::NewJoinToken> made) {
        if (!made.ok()) return respond(error_response(made.error()));
        json out = token_json(made->record, deps_.clock.now_ms());
        out["token"] = made->token;
        respond(json_response(201, out));
      });
}

void AdminRoutes::revoke_token(const Call& call, net::Respond respond) {
  deps_.access.revoke_join_token(call.param("token"), [respond, id = call.param("token")](const Result<bool>& done) {
    if (!done.ok()) return respond(error_response(done.error()));
    respond(json_response(200, {{"id", id}, {"revoked", true}}));
  });
}

void AdminRoutes::audit(const Call& call, net::Respond respond) {
  int64_t limit = 100;
  AuditFilter filter;
  if (!query_int(call.req, "limit", 1, static_cast<int64_t>(AuditLog::kKeep), &limit, respond) ||
      !query_int(call.req, "since_ms", 0, INT64_MAX, &filter.since_ms, respond)) {
    return;
  }
  if (filter.since_ms > deps_.clock.now_ms()) {
    return respond(error_response(400, "'since_ms' is in the future: give a time already past"));
  }
  for (auto [name, into] : {std::pair{"actor", &filter.actor}, {"action", &filter.action}}) {
    auto it = call.req.query.find(name);
    if (it == call.req.query.end()) continue;
    if (it->second.size() > 200) return respond(error_response(400, std::string("'") + name + "' is longer than 200 characters"));
    *into = it->second;
  }
  json entries = json::array();
  for (const auto& e : deps_.audit.recent(static_cast<size_t>(limit), filter)) {
    entries.push_back(
        {{"time_ms", e.time_ms}, {"actor", e.actor}, {"from", e.from}, {"action", e.action}, {"outcome", e.outcome}});
  }
  respond(json_response(200, {{"entries", entries}}));
}

}  // namespace ag::head
