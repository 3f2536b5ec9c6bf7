// What a webhook delivery carries: the event with its job or node as they stand, and the
// signature that proves the head sent it.
//
//   POST URL
//   Content-Type: application/json
//   X-AetherGrid-Event: job.failed
//   X-AetherGrid-Delivery: <the event's seq>          (the same on every retry: dedupe by it)
//   X-AetherGrid-Timestamp: <ms since the epoch>      (also "sent_ms" in the body)
//   X-AetherGrid-Signature: sha256=<hex HMAC-SHA256 of the body under the webhook's secret>
//
// The body (format json): {"id", "event", "time_ms", "sent_ms", "message", "owner",
// "reason", "job": {...} | null, "node": {...} | null, "last_lines", "failed_task",
// "dashboard_url"}. Format slack: Slack's incoming-webhook shape, {"text": "..."},
// signed the same way. Since the body holds sent_ms, a receiver that checks the
// signature and rejects old timestamps rejects replays.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <utility>
#include <vector>

#include "head/events/event_log.h"
#include "head/jobs/job_layer.h"
#include "head/nodes/node_registry.h"
#include "head/webhooks/webhook.h"

namespace ag::head {

// The JSON body for `event`, with its job or node as they stand now.
nlohmann::json event_payload(const ClusterEvent& event, const JobLayer& jobs, const NodeRegistry& nodes,
                             const std::string& dashboard_url, int64_t sent_ms);
// The body as `format` wants it.
std::string webhook_body(const nlohmann::json& payload, WebhookFormat format);
// Both: the body of a delivery of `event` sent at `sent_ms`.
std::string delivery_body(const ClusterEvent& event, const JobLayer& jobs, const NodeRegistry& nodes,
                          const std::string& dashboard_url, int64_t sent_ms, WebhookFormat format);
// "sha256=" + hex HMAC-SHA256 of `body` under `secret`.
std::string webhook_signature(const std::string& secret, const std::string& body);
// The headers of a delivery.
std::vector<std::pair<std::string, std::string>> webhook_headers(const std::string& secret, const std::string& body,
                                                                 const std::string& event_type, int64_t seq,
                                                                 int64_t sent_ms);

}  // namespace ag::head
