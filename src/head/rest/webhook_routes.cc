#include "head/rest/webhook_routes.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "common/ids.h"
#include "head/rest/route_helpers.h"

namespace ag::head {
namespace {

using nlohmann::json;

json delivery_json(const WebhookDispatcher::Delivery& d) {
  json j = {{"time_ms", d.time_ms},
            {"seq", d.seq},
            {"event", d.event},
            {"attempt", d.attempt},
            {"status", d.status},
            {"error", d.error},
            {"duration_ms", d.duration_ms},
            {"delivered", d.delivered},
            {"given_up", d.given_up}};
  if (d.next_try_ms) j["next_try_ms"] = d.next_try_ms;
  return j;
}

// The webhook a POST asks for, or why it cannot be had (400 or 403).
Result<Webhook> read_webhook(const json& body, const Principal& who, const AccessControl& access) {
  if (!body.is_object()) return invalid_argument("the body must be a JSON object: {\"url\": \"https://...\"}");
  static const std::set<std::string> kKnown = {"url", "events", "jobs_of", "all", "format", "ca_pem", "retry_for_s"};
  for (const auto& [key, _] : body.items()) {
    if (!kKnown.count(key)) return invalid_argument("unknown field '" + key + "'");
  }
  Webhook hook;
  if (!body.contains("url") || !body["url"].is_string()) return invalid_argument("give the receiver's url");
  hook.url = body["url"].get<std::string>();
  if (body.contains("ca_pem") && !body["ca_pem"].is_null()) {
    if (!body["ca_pem"].is_string() ||
        body["ca_pem"].get<std::string>().find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
      return invalid_argument("ca_pem must be a PEM certificate (-----BEGIN CERTIFICATE-----)");
    }
    hook.ca_pem = body["ca_pem"].get<std::string>().substr(0, 64 * 1024);
  }
  if (auto target = parse_webhook_url(hook.url, hook.ca_pem); !target.ok()) return target.error();
  hook.events = default_webhook_events();
  if (body.contains("events") && !body["events"].is_null()) {
    if (!body["events"].is_array() || body["events"].empty()) {
      return invalid_argument("events must be a list of event types, such as [\"job.failed\", \"node.dead\"]");
    }
    hook.events.clear();
    for (const auto& e : body["events"]) {
      const std::string type = e.is_string() ? e.get<std::string>() : e.dump();
      if (!known_event_type(type)) {
        return invalid_argument(unknown_event_type(type));
      }
      hook.events.insert(type);
    }
  }
  hook.all = body.value("all", false);
  if (hook.all && !who.is_admin()) {
    return Error{ErrorCode::kPermissionDenied,
                 "only an admin can add a webhook for every job and node (--all); yours get your own jobs' events"};
  }
  hook.jobs_of = who.name;
  if (body.contains("jobs_of") && !body["jobs_of"].is_null()) {
    if (hook.all) return invalid_argument("give jobs_of or all, not both");
    if (!body["jobs_of"].is_string()) return invalid_argument("jobs_of must be a user name");
    hook.jobs_of = body["jobs_of"].get<std::string>();
    if (hook.jobs_of != who.name && !who.is_admin()) {
      return Error{ErrorCode::kPermissionDenied, "user " + who.name +
                                                     " may add webhooks for their own jobs only; "
                                                     "only an admin can add one for " +
                                                     hook.jobs_of + "'s jobs"};
    }
    if (!access.find_user(hook.jobs_of))
      return not_found("no user '" + hook.jobs_of + "'; list users with `ag user list`");
  }
  if (hook.all) hook.jobs_of.clear();
  const bool events_given = body.contains("events") && !body["events"].is_null();
  if (!hook.all && !events_given) {
    // The default set, less node events: those go to webhooks for the whole cluster.
    std::erase_if(hook.events, [](const std::string& type) { return type.starts_with("node."); });
  }
  if (!hook.all) {
    for (const auto& type : hook.events) {
      if (type.starts_with("node.")) {
        return invalid_argument("node events (" + type +
                                ") go only to webhooks for every job and node (--all, "
                                "admins); a webhook for one user's jobs gets job events");
      }
    }
  }
  const std::string format = body.value("format", "json");
  if (format != "json" && format != "slack") {
    return invalid_argument("format must be json or slack, got '" + format + "'");
  }
  hook.format = format == "slack" ? WebhookFormat::kSlack : WebhookFormat::kJson;
  if (body.contains("retry_for_s") && !body["retry_for_s"].is_null()) {
    if (!body["retry_for_s"].is_number()) return invalid_argument("retry_for_s must be a number of seconds");
    const double s = body["retry_for_s"].get<double>();
    if (!std::isfinite(s) || s * 1000 < kMinWebhookRetryMs || s * 1000 > kMaxWebhookRetryMs) {
      return invalid_argument("retry_for_s must be between " + std::to_string(kMinWebhookRetryMs / 1000) + " and " +
                              std::to_string(kMaxWebhookRetryMs / 1000) + " seconds");
    }
    hook.retry_for_ms = static_cast<int64_t>(s * 1000);
  }
  hook.owner = who.name;
  return hook;
}

}  // namespace

void WebhookRoutes::add(const Call& call, net::Respond respond) {
  const json body = json::parse(call.req.body, nullptr, false);
  auto hook = read_webhook(body, call.who, deps_.access);
  if (!hook.ok()) return respond(error_response(hook.error()));
  if (deps_.webhooks.all().size() >= kMaxWebhooks) {
    return respond(error_response(409, "the cluster has " + std::to_string(kMaxWebhooks) +
                                           " webhooks, the most it takes; remove one first (`ag webhook list`)"));
  }
  hook->id = "wh_" + random_hex(4);
  hook->secret = "agw_" + random_hex(24);
  hook->created_ms = deps_.clock.now_ms();
  // It gets what happens from now on.
  const int64_t cursor = deps_.jobs.cluster_events.last_seq();
  const Webhook made = hook.value();
  deps_.webhooks.add(std::move(hook.value()), cursor, [this, made, respond](const Status& s) {
    if (!s) return respond(error_response(s.error()));
    deps_.deliveries.added(made.id);
    json out = webhook_to_json(made, false);
    out["secret"] = made.secret;  // shown this once
    respond(json_response(201, out));
  });
}

void WebhookRoutes::list(const Call& call, net::Respond respond) {
  json hooks = json::array();
  for (const auto& [id, hook] : deps_.webhooks.all()) {
    if (!call.who.is_admin() && hook.owner != call.who.name) continue;
    json j = webhook_to_json(hook, false);
    j["pending"] = deps_.deliveries.pending(id);
    const auto log = deps_.deliveries.deliveries(id);
    if (!log.empty()) j["last_delivery"] = delivery_json(log.back());
    hooks.push_back(std::move(j));
  }
  respond(json_response(200, {{"webhooks", hooks}}));
}

const Webhook* WebhookRoutes::mine(const Call& call, const net::Respond& respond) const {
  const std::string id = call.params.at("id");
  const Webhook* hook = deps_.webhooks.find(id);
  if (!hook) {
    respond(error_response(404, "no webhook with id '" + id + "'; list them with `ag webhook list`"));
    return nullptr;
  }
  if (!call.who.is_admin() && hook->owner != call.who.name) {
    respond(error_response(403, "webhook " + id + " belongs to " + hook->owner +
                                    "; only its owner and admins can see, "
                                    "test or remove it"));
    return nullptr;
  }
  return hook;
}

void WebhookRoutes::remove(const Call& call, net::Respond respond) {
  const Webhook* hook = mine(call, respond);
  if (!hook) return;
  const std::string id = hook->id;
  deps_.webhooks.remove(id, [this, id, respond](const Status& s) {
    if (!s) return respond(error_response(s.error()));
    deps_.deliveries.removed(id);
    respond(json_response(200, {{"id", id}, {"removed", true}}));
  });
}

void WebhookRoutes::test(const Call& call, net::Respond respond) {
  const Webhook* hook = mine(call, respond);
  if (!hook) return;
  deps_.deliveries.test(
      hook->id, [respond](const WebhookDispatcher::Delivery& d) { respond(json_response(200, delivery_json(d))); });
}

void WebhookRoutes::deliveries(const Call& call, net::Respond respond) {
  const Webhook* hook = mine(call, respond);
  if (!hook) return;
  json list = json::array();
  for (const auto& d : deps_.deliveries.deliveries(hook->id)) list.push_back(delivery_json(d));
  respond(json_response(200, {{"id", hook->id},
                              {"url", hook->url},
                              {"pending", deps_.deliveries.pending(hook->id)},
                              {"cursor", deps_.webhooks.cursor(hook->id)},
                              {"deliveries", list}}));
}

}  // namespace ag::head
