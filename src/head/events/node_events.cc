#include "head/events/node_events.h"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <nlohmann/json.hpp>

namespace ag::head {

using nlohmann::json;

std::string node_event_key(int64_t seq) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%020lld", static_cast<long long>(seq));
  return buf;
}

Status NodeEvents::recover() {
  auto records = store_.scan(kNodeEventsTable);
  if (!records.ok()) return records.error();
  std::vector<ClusterEvent> events;
  for (const auto& [key, value] : records.value()) {
    stored_keys_.push_back(key);
    const json doc = json::parse(value, nullptr, false);
    if (!doc.is_object()) continue;
    ClusterEvent event;
    event.seq = doc.value("seq", int64_t{0});
    event.time_ms = doc.value("time_ms", int64_t{0});
    event.type = doc.value("type", std::string());
    event.node_id = doc.value("node_id", std::string());
    event.message = doc.value("message", std::string());
    if (event.seq > 0 && known_event_type(event.type)) events.push_back(std::move(event));
  }
  log_.recover(std::move(events));
  return {};
}

void NodeEvents::record(const std::string& node_id, const std::string& type, const std::string& message) {
  ClusterEvent event;
  event.type = type;
  event.node_id = node_id;
  event.message = message;
  const ClusterEvent& added = log_.append(std::move(event));
  const std::string key = node_event_key(added.seq);
  std::vector<store::Mutation> batch{{kNodeEventsTable, key,
                                      json{{"seq", added.seq},
                                           {"time_ms", added.time_ms},
                                           {"type", added.type},
                                           {"node_id", added.node_id},
                                           {"message", added.message}}
                                          .dump(-1, ' ', false, json::error_handler_t::replace)}};
  stored_keys_.push_back(key);
  while (stored_keys_.size() > max_stored_) {
    batch.push_back({kNodeEventsTable, stored_keys_.front(), std::nullopt});
    stored_keys_.pop_front();
  }
  store_.write(std::move(batch), [key](const Status& s) {
    if (!s) spdlog::warn("could not store node event {}: {}", key, s.error().message);
  });
}

}  // namespace ag::head
