#include <cmath>
#include <nlohmann/json.hpp>

#include "api/job_spec.h"
#include "head/auth/access_control.h"
#include "head/rest/quota_routes.h"
#include "head/rest/route_helpers.h"

namespace ag::head {

using nlohmann::json;

namespace {

json use_json(const sched::Use& use) {
  return {{"gpus", use.held.gpus}, {"cpu_millis", use.held.cpu_millis}, {"memory", use.held.memory_bytes},
          {"running_jobs", use.running_jobs}};
}

// The limits a PUT body asks for. Errors name the field and what it takes.
Result<sched::Limits> parse_limits(const json& body) {
  if (!body.is_object()) return invalid_argument("send a JSON object like {\"max_gpus\": 8}");
  sched::Limits limits;
  for (const auto& [key, value] : body.items()) {
    if (key == "share") {
      if (value.is_null()) continue;
      if (!value.is_number() || value.get<double>() <= 0 || value.get<double>() > 1e6) {
        return invalid_argument("field 'share' must be a number above 0 (a fair-share weight; 1 is the default), got " +
                                value.dump().substr(0, 64));
      }
      limits.share = value.get<double>();
      continue;
    }
    if (key == "allow_no_preempt") {
      if (!value.is_null() && !value.is_boolean()) {
        return invalid_argument("field 'allow_no_preempt' must be true or false, got " + value.dump().substr(0, 64));
      }
      limits.allow_no_preempt = value.is_boolean() && value.get<bool>();
      continue;
    }
    if (key == "max_priority") {
      if (value.is_null()) continue;
      if (!value.is_number_integer() || value.get<int64_t>() < api::kMinPriority || value.get<int64_t>() > api::kMaxPriority) {
        return invalid_argument("field 'max_priority' must be a whole number from " + std::to_string(api::kMinPriority) +
                                " to " + std::to_string(api::kMaxPriority) + ", got " + value.dump().substr(0, 64));
      }
      limits.max_priority = value.get<int>();
      continue;
    }
    int64_t* into = key == "max_gpus"           ? &limits.gpus
                    : key == "max_memory"       ? &limits.memory_bytes
                    : key == "max_running_jobs" ? &limits.running_jobs
                    : key == "max_cpus"         ? &limits.cpu_millis
                                                : nullptr;
    if (!into) {
      return invalid_argument("unknown field '" + key.substr(0, 64) +
                              "'; a quota takes max_gpus, max_cpus, max_memory (bytes), max_running_jobs, "
                              "max_priority, allow_no_preempt and share");
    }
    if (value.is_null()) continue;
    if (key == "max_cpus") {
      if (!value.is_number() || value.get<double>() < 0 || value.get<double>() > 1e9) {
        return invalid_argument("field 'max_cpus' must be a number of CPUs, 0 or more, got " + value.dump().substr(0, 64));
      }
      *into = std::llround(value.get<double>() * 1000);
      continue;
    }
    if (!value.is_number_integer() || value.get<int64_t>() < 0) {
      return invalid_argument("field '" + key + "' must be a whole number, 0 or more, got " + value.dump().substr(0, 64));
    }
    *into = value.get<int64_t>();
  }
  return limits;
}

}  // namespace

void QuotaRoutes::share(const Call&, net::Respond respond) {
  std::map<std::string, std::pair<int, int>> jobs;  // user -> (running, pending)
  for (const Job* job : deps_.jobs.table.list()) {
    if (job->state == JobState::kRunning) ++jobs[job->owner].first;
    if (job->state == JobState::kPending) ++jobs[job->owner].second;
  }
  json users = json::array();
  for (const auto& line : share_report(deps_.jobs)) {
    users.push_back({{"user", line.user}, {"usage", line.usage}, {"usage_part", line.usage_part},
                     {"share", line.share}, {"fair_share", line.factor}, {"running_jobs", jobs[line.user].first},
                     {"pending_jobs", jobs[line.user].second}});
  }
  respond(json_response(200, {{"users", users}}));
}

void QuotaRoutes::list(const Call&, net::Respond respond) {
  const auto use = deps_.jobs.table.use_by_owner();
  json out = {{"users", json::object()}, {"groups", json::object()}};
  for (const auto& [name, limits] : deps_.jobs.policy.user_quotas()) {
    json entry = quota_limits_json(limits);
    auto held = use.find(name);
    entry["use"] = use_json(held == use.end() ? sched::Use{} : held->second);
    out["users"][name] = std::move(entry);
  }
  for (const auto& [name, limits] : deps_.jobs.policy.group_quotas()) {
    sched::Use sum;
    for (const auto& [user, held] : use) {
      for (const auto& group : groups_of(deps_.access, user)) {
        if (group != name) continue;
        sum.held += held.held;
        sum.running_jobs += held.running_jobs;
      }
    }
    json entry = quota_limits_json(limits);
    entry["use"] = use_json(sum);
    out["groups"][name] = std::move(entry);
  }
  respond(json_response(200, out));
}

void QuotaRoutes::set(const Call& call, net::Respond respond) {
  const net::HttpRequest& req = call.req;
  const std::string kind = req.path.rfind("/api/quotas/groups/", 0) == 0 ? "groups" : "users";
  const std::string& name = call.param("name");
  if (Status s = check_account_name(kind == "users" ? "user name" : "group name", name); !s) {
    return respond(error_response(s.error()));
  }
  sched::Limits limits;
  if (req.method == "PUT") {
    auto parsed = parse_limits(json::parse(req.body, nullptr, false));
    if (!parsed.ok()) return respond(error_response(parsed.error()));
    limits = parsed.value();
    if (kind == "groups" && limits.share != 1) {
      return respond(error_response(400, "field 'share' is a user's fair-share weight; set it with --user NAME"));
    }
  }
  deps_.jobs.changes.set_quota(kind == "groups", name, limits, [respond, kind, name, limits](const Status& s) {
    if (!s) return respond(error_response(s.error()));
    json out = quota_limits_json(limits);
    out[kind == "groups" ? "group" : "user"] = name;
    out["removed"] = !limits.any();
    respond(json_response(200, out));
  });
}

}  // namespace ag::head
