// `ag webhook add|list|remove|test|deliveries`: where the head POSTs the cluster's
// events (README, Operating without watching).
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/api_client.h"
#include "cli/commands.h"
#include "cli/table.h"

namespace ag::cli {
namespace {

using nlohmann::json;

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ',');) {
    if (!part.empty()) out.push_back(part);
  }
  return out;
}

std::string delivery_outcome(const json& d) {
  if (d.value("delivered", false)) return "delivered (HTTP " + std::to_string(d.value("status", 0)) + ")";
  std::string why = d.value("status", 0) ? "HTTP " + std::to_string(d.value("status", 0)) : "";
  const std::string error = d.value("error", "");
  if (!error.empty()) why += (why.empty() ? "" : ": ") + error;
  if (d.value("given_up", false)) return "given up: " + why;
  if (d.contains("next_try_ms"))
    return "failed: " + why + "; next try " + format_time_ms(d["next_try_ms"].get<int64_t>());
  return "failed: " + why;
}

}  // namespace

int webhook_add(const ConnectionOptions& options, const WebhookAddOptions& opts) {
  json body = {{"url", opts.url}, {"format", opts.format}};
  if (!opts.events.empty()) body["events"] = split_commas(opts.events);
  if (opts.all) body["all"] = true;
  if (!opts.jobs_of.empty()) body["jobs_of"] = opts.jobs_of;
  if (opts.retry_for_s) body["retry_for_s"] = *opts.retry_for_s;
  if (!opts.ca_file.empty()) {
    std::ifstream in(opts.ca_file);
    if (!in) return usage_error("--ca-file " + opts.ca_file + ": cannot be read");
    std::stringstream pem;
    pem << in.rdbuf();
    body["ca_pem"] = pem.str();
  }
  auto conn = resolve_connection(options);
  if (!conn.ok()) return fail(conn.error());
  auto res = call_json(conn.value(), "POST", "/api/webhooks", body.dump());
  if (!res.ok()) return fail(res.error());
  const json& w = res.value();
  if (options.output == "json") {
    std::cout << w.dump(2) << "\n";
    return 0;
  }
  std::string events;
  for (const auto& e : w["events"]) events += (events.empty() ? "" : ",") + e.get<std::string>();
  std::cout
      << "Webhook " << w.value("id", "") << " added: " << w.value("url", "") << "\n"
      << "  events: " << events
      << (w.value("all", false) ? " of every job and node" : " of " + w.value("jobs_of", "") + "'s jobs") << "\n"
      << "  secret: " << w.value("secret", "") << "\n"
      << "Keep the secret: it is shown only now. Each POST carries X-AetherGrid-Signature: sha256=HMAC-SHA256 of\n"
      << "the body under it, and X-AetherGrid-Timestamp; try it with `ag webhook test " << w.value("id", "") << "`.\n";
  return 0;
}

int webhook_list(const ConnectionOptions& options) {
  auto conn = resolve_connection(options);
  if (!conn.ok()) return fail(conn.error());
  auto res = call_json(conn.value(), "GET", "/api/webhooks");
  if (!res.ok()) return fail(res.error());
  if (options.output == "json") {
    std::cout << res.value().dump(2) << "\n";
    return 0;
  }
  Table table({"ID", "URL", "OWNER", "OF", "EVENTS", "FORMAT", "PENDING", "LAST DELIVERY"});
  for (const auto& w : res.value()["webhooks"]) {
    std::string events;
    for (const auto& e : w["events"]) events += (events.empty() ? "" : ",") + e.get<std::string>();
    table.add({w.value("id", ""), terminal_safe(w.value("url", ""), false), w.value("owner", ""),
               w.value("all", false) ? "all" : w.value("jobs_of", ""), events, w.value("format", ""),
               std::to_string(w.value("pending", 0)),
               w.contains("last_delivery") ? delivery_outcome(w["last_delivery"]) : "-"});
  }
  table.print(std::cout);
  return 0;
}

int webhook_remove(const ConnectionOptions& options, const std::string& id) {
  auto conn = resolve_connection(options);
  if (!conn.ok()) return fail(conn.error());
  auto res = call_json(conn.value(), "DELETE", "/api/webhooks/" + net::url_encode(id));
  if (!res.ok()) return fail(res.error());
  std::cout << "Webhook " << id << " removed: nothing more is sent to it.\n";
  return 0;
}

int webhook_test(const ConnectionOptions& options, const std::string& id) {
  auto conn = resolve_connection(options);
  if (!conn.ok()) return fail(conn.error());
  auto res = call_json(conn.value(), "POST", "/api/webhooks/" + net::url_encode(id) + "/test", "", 30000);
  if (!res.ok()) return fail(res.error());
  const json& d = res.value();
  if (options.output == "json") {
    std::cout << d.dump(2) << "\n";
  } else {
    std::cout << "Test delivery to " << id << ": " << delivery_outcome(d) << " in " << d.value("duration_ms", 0)
              << " ms\n";
  }
  return d.value("delivered", false) ? 0 : 1;
}

int webhook_deliveries(const ConnectionOptions& options, const std::string& id) {
  auto conn = resolve_connection(options);
  if (!conn.ok()) return fail(conn.error());
  auto res = call_json(conn.value(), "GET", "/api/webhooks/" + net::url_encode(id) + "/deliveries");
  if (!res.ok()) return fail(res.error());
  if (options.output == "json") {
    std::cout << res.value().dump(2) << "\n";
    return 0;
  }
  Table table({"TIME", "EVENT", "SEQ", "TRY", "OUTCOME", "MS"});
  for (const auto& d : res.value()["deliveries"]) {
    table.add({format_time_ms(d.value("time_ms", int64_t{0})), d.value("event", ""),
               std::to_string(d.value("seq", int64_t{0})), std::to_string(d.value("attempt", 0)),
               terminal_safe(delivery_outcome(d), false), std::to_string(d.value("duration_ms", int64_t{0}))});
  }
  table.print(std::cout);
  std::cout << res.value().value("pending", 0) << " event(s) pending\n";
  return 0;
}

}  // namespace ag::cli
