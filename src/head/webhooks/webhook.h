// A webhook: where the head POSTs the cluster's events (head/events/event_log.h) that
// match it, signed with its secret. `ag webhook add URL [--events ...] [--jobs-of USER |
// --all] [--format json|slack] [--ca-file F] [--retry-for D]`.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <set>
#include <string>

#include "common/result.h"
#include "head/events/event_log.h"
#include "net/http_client.h"

namespace ag::head {

enum class WebhookFormat { kJson, kSlack };

struct Webhook {
  std::string id;       // "wh_" + 8 hex
  std::string url;      // http(s)://HOST[:PORT][/PATH]
  std::string owner;    // who added it
  std::string jobs_of;  // whose jobs' events it gets; "" with `all`
  bool all = false;     // every job's and every node's events (admins only)
  std::set<std::string> events;
  WebhookFormat format = WebhookFormat::kJson;
  std::string secret;                  // "agw_" + 48 hex: the HMAC key, shown once
  std::string ca_pem;                  // --ca-file: verify an https receiver against this CA only
  int64_t retry_for_ms = 3600 * 1000;  // how long one event is retried before it is given up
  int64_t created_ms = 0;

  // Whether `event` goes to this webhook.
  bool wants(const ClusterEvent& event) const;
};

// The events a webhook gets when it names none.
const std::set<std::string>& default_webhook_events();
inline constexpr int64_t kMinWebhookRetryMs = 10 * 1000;
inline constexpr int64_t kMaxWebhookRetryMs = 7 * 24 * 3600 * 1000LL;
inline constexpr size_t kMaxWebhooks = 100;

// Where a URL points: the endpoint (TLS for https) and the path with its query.
struct WebhookTarget {
  net::Endpoint endpoint;
  std::string target;
};
// Errors: kInvalidArgument saying what is wrong ("the URL must start with http:// or
// https://", no host, a bad port, spaces).
Result<WebhookTarget> parse_webhook_url(const std::string& url, const std::string& ca_pem);

nlohmann::json webhook_to_json(const Webhook& webhook, bool with_secret);
Result<Webhook> webhook_from_json(const nlohmann::json& doc);
const char* to_string(WebhookFormat format);

}  // namespace ag::head
