// `ag events [--follow] [--job J] [--node N] [--since 10m] [--type T,...] [--limit N]`:
// the cluster's job and node events in order, one per line (or JSON lines with -o json).
// --follow keeps printing new ones: a long poll from the last event's cursor, resumed
// from it when the head was away (a restart, a standby taking over), so nothing the
// head still holds is missed or shown twice.
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/api_client.h"
#include "cli/commands.h"
#include "cli/table.h"
#include "cli/time_args.h"

namespace ag::cli {
namespace {

using nlohmann::json;

constexpr int kPollWaitMs = 25000;
constexpr double kReconnectWindowS = 3600;  // how long --follow waits for an absent head

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void print_event(const json& e, bool as_json) {
  if (as_json) {
    std::cout << e.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
    return;
  }
  const std::string about = !e.value("job_id", "").empty() ? e.value("job_id", "") : e.value("node_id", "");
  std::cout << format_time_ms(e.value("time_ms", int64_t{0})) << "  " << e.value("type", "") << "  "
            << terminal_safe(about, false) << "  " << terminal_safe(e.value("message", ""), false) << "\n";
  if (e.contains("last_lines") && e["last_lines"].is_string()) {
    std::cout << "    last lines of task " << e.value("failed_task", 0) << ":\n";
    std::string lines = e["last_lines"].get<std::string>();
    size_t start = 0;
    while (start < lines.size()) {
      const size_t end = std::min(lines.find('\n', start), lines.size());
      std::cout << "    | " << terminal_safe(lines.substr(start, end - start), false) << "\n";
      start = end + 1;
    }
  }
}

}  // namespace

int events(const ConnectionOptions& options, const EventsOptions& opts) {
  auto conn = resolve_connection(options);
  if (!conn.ok()) return fail(conn.error());
  const bool as_json = options.output == "json";
  std::string query;
  const auto add = [&query](const std::string& name, const std::string& value) {
    query += (query.empty() ? "?" : "&") + name + "=" + net::url_encode(value);
  };
  if (!opts.job_id.empty()) add("job", opts.job_id);
  if (!opts.node_id.empty()) add("node", opts.node_id);
  if (!opts.types.empty()) add("types", opts.types);
  if (!opts.since.empty()) {
    auto since = parse_since(opts.since, now_ms());
    if (!since.ok()) return usage_error(since.error().message);
    add("since_ms", std::to_string(since.value()));
  }
  add("limit", std::to_string(opts.limit));
  // The newest events (all since --since, up to --limit), then with --follow every new one.
  auto first = call_json(conn.value(), "GET", "/api/events" + query + (opts.since.empty() ? "" : "&after=0"));
  if (!first.ok()) return fail(first.error());
  for (const auto& e : first.value().value("events", json::array())) print_event(e, as_json);
  if (first.value().value("truncated", false) && !as_json) {
    std::cerr << "note: older events than these are no longer held by the head\n";
  }
  std::cout.flush();
  if (!opts.follow) return 0;
  int64_t cursor = first.value().value("cursor", int64_t{0});
  for (;;) {
    auto page = call_json_retrying(
        conn.value(), "GET",
        "/api/events" + query + "&after=" + std::to_string(cursor) + "&wait_ms=" + std::to_string(kPollWaitMs), "",
        kPollWaitMs + 30000, kReconnectWindowS);
    if (!page.ok()) return fail(page.error());
    for (const auto& e : page.value().value("events", json::array())) print_event(e, as_json);
    if (page.value().value("truncated", false)) {
      std::cerr << "note: some events after the last one shown are no longer held by the head\n";
    }
    std::cout.flush();
    cursor = std::max(cursor, page.value().value("cursor", cursor));
  }
}

}  // namespace ag::cli
