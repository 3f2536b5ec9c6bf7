#include "head/rest/route_helpers.h"

#include <charconv>
#include <nlohmann/json.hpp>

namespace ag::head {

net::HttpResponse json_response(int status, const nlohmann::json& body) {
  return {status, "application/json", body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)};
}

net::HttpResponse error_response(int status, const std::string& message) {
  return json_response(status, nlohmann::json{{"error", message}});
}

net::HttpResponse error_response(const Error& error) {
  return error_response(http_status_for(error.code), error.message);
}

bool query_int(const net::HttpRequest& req, const std::string& name, int64_t min, int64_t max,
               int64_t* out, net::Respond& respond) {
  auto it = req.query.find(name);
  if (it == req.query.end()) return true;
  const std::string& text = it->second;
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (!text.empty() && ec == std::errc() && end == text.data() + text.size() && v >= min && v <= max) {
    *out = v;
    return true;
  }
  respond(error_response(400, "query parameter '" + name + "' must be a whole number between " +
                                  std::to_string(min) + " and " + std::to_string(max) + ", got '" + text + "'"));
  return false;
}

bool may_act_on(const AccessControl& access, const Principal& who, const Job& job) {
  return may_act_on_job(who, job.owner, groups_of(access, job.owner));
}

net::HttpResponse not_your_job(const Job& job, const std::string& what) {
  return error_response(403, "job " + job.id + " belongs to " + (job.owner.empty() ? "no user" : job.owner) +
                                 "; only its owner, members of the owner's groups and admins can " + what);
}

const char* const kAdminOnly = "only an admin can do this; ask one, or use an admin's token";

net::HttpResponse admin_only(const std::string& what) { return error_response(403, what + ": " + kAdminOnly); }

net::HttpResponse viewer_cannot(const Principal& who, const std::string& what) {
  return error_response(403, "user " + who.name + " is a viewer: viewers cannot " + what);
}

}  // namespace ag::head
