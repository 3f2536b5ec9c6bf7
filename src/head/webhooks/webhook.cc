#include "head/webhooks/webhook.h"

#include <charconv>
#include <nlohmann/json.hpp>

namespace ag::head {

using nlohmann::json;

const std::set<std::string>& default_webhook_events() {
  static const std::set<std::string> kDefault = {"job.failed",    "job.succeeded", "job.stopped",
                                                 "job.preempted", "node.dead",     "node.unhealthy"};
  return kDefault;
}

bool Webhook::wants(const ClusterEvent& event) const {
  if (!events.count(event.type)) return false;
  if (all) return true;
  return !event.job_id.empty() && event.owner == jobs_of;
}

const char* to_string(WebhookFormat format) { return format == WebhookFormat::kSlack ? "slack" : "json"; }

Result<WebhookTarget> parse_webhook_url(const std::string& url, const std::string& ca_pem) {
  const auto bad = [&url](const std::string& why) {
    return invalid_argument("webhook URL '" + url.substr(0, 200) + "': " + why);
  };
  if (url.size() > 2000) return bad("longer than 2,000 characters");
  for (char c : url) {
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f) return bad("spaces or control characters are not allowed");
  }
  WebhookTarget out;
  std::string rest;
  if (url.starts_with("https://")) {
    out.endpoint.service_tls = true;
    out.endpoint.ca_pem = ca_pem;
    out.endpoint.port = 443;
    rest = url.substr(8);
  } else if (url.starts_with("http://")) {
    if (!ca_pem.empty()) return bad("--ca-file is for https:// receivers");
    out.endpoint.port = 80;
    rest = url.substr(7);
  } else {
    return bad("it must start with http:// or https://");
  }
  const size_t slash = rest.find_first_of("/?#");
  std::string authority = rest.substr(0, slash);
  out.target = slash == std::string::npos ? "/" : rest.substr(slash);
  if (out.target[0] == '?') out.target = "/" + out.target;
  if (const size_t hash = out.target.find('#'); hash != std::string::npos) out.target.erase(hash);
  if (out.target.empty()) out.target = "/";
  if (authority.find('@') != std::string::npos) return bad("credentials in the URL are not allowed");
  // HOST, HOST:PORT, [V6], [V6]:PORT.
  std::string host, port;
  if (!authority.empty() && authority[0] == '[') {
    const size_t close = authority.find(']');
    if (close == std::string::npos) return bad("an IPv6 address needs its closing ]");
    host = authority.substr(1, close - 1);
    const std::string after = authority.substr(close + 1);
    if (!after.empty() && after[0] != ':') return bad("only a :PORT may follow the address");
    if (!after.empty()) port = after.substr(1);
    if (after == ":") return bad("the port must be a number from 1 to 65535");
  } else {
    const size_t colon = authority.rfind(':');
    host = authority.substr(0, colon);
    if (colon != std::string::npos) {
      port = authority.substr(colon + 1);
      if (port.empty()) return bad("the port must be a number from 1 to 65535");
    }
  }
  if (!port.empty()) {
    int value = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc() || end != port.data() + port.size() || value < 1 || value > 65535) {
      return bad("the port must be a number from 1 to 65535");
    }
    out.endpoint.port = static_cast<uint16_t>(value);
  }
  if (host.empty()) return bad("it names no host");
  out.endpoint.host = host;
  return out;
}

json webhook_to_json(const Webhook& w, bool with_secret) {
  json j = {{"id", w.id},
            {"url", w.url},
            {"owner", w.owner},
            {"jobs_of", w.all ? json(nullptr) : json(w.jobs_of)},
            {"all", w.all},
            {"events", w.events},
            {"format", to_string(w.format)},
            {"retry_for_ms", w.retry_for_ms},
            {"created_ms", w.created_ms},
            {"ca_file", !w.ca_pem.empty()}};
  if (with_secret) {
    j["secret"] = w.secret;
    j["ca_pem"] = w.ca_pem;
  }
  return j;
}

Result<Webhook> webhook_from_json(const json& doc) {
  try {
    Webhook w;
    w.id = doc.at("id").get<std::string>();
    w.url = doc.at("url").get<std::string>();
    w.owner = doc.at("owner").get<std::string>();
    w.all = doc.value("all", false);
    if (!w.all) w.jobs_of = doc.at("jobs_of").get<std::string>();
    w.events = doc.at("events").get<std::set<std::string>>();
    w.format = doc.value("format", "json") == "slack" ? WebhookFormat::kSlack : WebhookFormat::kJson;
    w.secret = doc.at("secret").get<std::string>();
    w.ca_pem = doc.value("ca_pem", "");
    w.retry_for_ms = doc.value("retry_for_ms", int64_t{3600 * 1000});
    w.created_ms = doc.value("created_ms", int64_t{0});
    return w;
  } catch (const json::exception& e) {
    return internal_error(std::string("stored webhook is malformed: ") + e.what());
  }
}

}  // namespace ag::head
