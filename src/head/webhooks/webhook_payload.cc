#include "head/webhooks/webhook_payload.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <nlohmann/json.hpp>

#include "head/nodes/node_codec.h"

namespace ag::head {

using nlohmann::json;

json event_payload(const ClusterEvent& event, const JobLayer& jobs, const NodeRegistry& nodes,
                   const std::string& dashboard_url, int64_t sent_ms) {
  json out = {{"id", std::to_string(event.seq)},
              {"event", event.type},
              {"time_ms", event.time_ms},
              {"sent_ms", sent_ms},
              {"message", event.message},
              {"owner", event.owner},
              {"reason", event.message},
              {"job", nullptr},
              {"node", nullptr},
              {"dashboard_url", dashboard_url}};
  if (!event.job_id.empty()) {
    json job = {{"job_id", event.job_id}, {"owner", event.owner}};
    if (const Job* j = jobs.table.find(event.job_id)) {
      job["name"] = j->spec.name;
      job["state"] = to_string(j->state);
      job["message"] = j->message;
      job["entrypoint"] = j->spec.entrypoint;
      job["num_workers"] = j->spec.num_workers;
      job["attempts"] = j->attempts.size();
      job["submitted_ms"] = j->submitted_ms;
      job["finished_ms"] = j->finished_ms;
      if (j->terminal()) out["reason"] = j->message;
      const AttemptRecord* attempt = j->current_attempt();
      if (event.type == "job.failed" && attempt && attempt->failure_tail) {
        out["failed_task"] = attempt->failed_task;
        out["last_lines"] = *attempt->failure_tail;
      }
    }
    out["job"] = std::move(job);
    out["dashboard_url"] = dashboard_url + "/#/jobs/" + event.job_id;
  }
  if (!event.node_id.empty()) {
    json node = {{"node_id", event.node_id}};
    if (const Node* n = nodes.find(event.node_id)) {
      node["address"] = n->address;
      node["hostname"] = n->hostname;
      node["state"] = to_string(n->state);
      if (n->unhealthy) node["unhealthy"] = n->unhealthy->reason;
    }
    out["node"] = std::move(node);
    out["dashboard_url"] = dashboard_url + "/#/nodes/" + event.node_id;
  }
  return out;
}

std::string webhook_body(const json& payload, WebhookFormat format) {
  if (format == WebhookFormat::kJson) return payload.dump(-1, ' ', false, json::error_handler_t::replace);
  // Slack's incoming webhooks take {"text"} with their own light markup.
  const json& job = payload["job"];
  const json& node = payload["node"];
  std::string about = job.is_object()
                          ? job.value("job_id", "") +
                                (payload.value("owner", "").empty() ? "" : " (" + payload.value("owner", "") + ")")
                      : node.is_object() ? "node " + node.value("node_id", "")
                                         : "";
  std::string text = "*" + payload.value("event", "") + "* " + about + ": " + payload.value("reason", "");
  if (payload.contains("last_lines") && payload["last_lines"].is_string()) {
    text += "\n```" + payload["last_lines"].get<std::string>() + "```";
  }
  text += "\n<" + payload.value("dashboard_url", "") + "|open in the AetherGrid dashboard>";
  return json{{"text", text}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string delivery_body(const ClusterEvent& event, const JobLayer& jobs, const NodeRegistry& nodes,
                          const std::string& dashboard_url, int64_t sent_ms, WebhookFormat format) {
  return webhook_body(event_payload(event, jobs, nodes, dashboard_url, sent_ms), format);
}

std::string webhook_signature(const std::string& secret, const std::string& body) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(body.data()), body.size(), mac, &length);
  static const char* kHex = "0123456789abcdef";
  std::string out = "sha256=";
  for (unsigned int i = 0; i < length; ++i) {
    out += kHex[mac[i] >> 4];
    out += kHex[mac[i] & 15];
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> webhook_headers(const std::string& secret, const std::string& body,
                                                                 const std::string& event_type, int64_t seq,
                                                                 int64_t sent_ms) {
  return {{"X-AetherGrid-Event", event_type},
          {"X-AetherGrid-Delivery", std::to_string(seq)},
          {"X-AetherGrid-Timestamp", std::to_string(sent_ms)},
          {"X-AetherGrid-Signature", webhook_signature(secret, body)}};
}

}  // namespace ag::head
