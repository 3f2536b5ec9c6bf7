// NodeEvents: what happens to worker nodes (registered, disconnected, dead, removed,
// drained, resumed, unhealthy, healthy), and the head's own events that belong to no
// job (log export failing; node id ""), told to the cluster's EventLog and stored
// in the `node_events` table (key: the event's seq, so keys sort in order). The store
// keeps the newest kMaxStoredNodeEvents; older ones are deleted with each write.
// Writes are not waited for: a node event lost to a crash is only a line of history.
// Io thread only.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "common/result.h"
#include "head/events/event_log.h"
#include "head/store/kv_store.h"

namespace ag::head {

inline constexpr const char* kNodeEventsTable = "node_events";
inline constexpr size_t kMaxStoredNodeEvents = 10000;

class NodeEvents {
 public:
  NodeEvents(store::KvStore& store, EventLog& log, size_t max_stored = kMaxStoredNodeEvents)
      : store_(store), log_(log), max_stored_(max_stored) {}

  // At start: reads the stored node events into the log. Errors: the store's.
  Status recover();

  // `type` is one of event_types()' "node.*".
  void record(const std::string& node_id, const std::string& type, const std::string& message);

 private:
  store::KvStore& store_;
  EventLog& log_;
  size_t max_stored_;
  std::deque<std::string> stored_keys_;  // oldest first
};

// The key of a node event: its seq, zero-padded so that keys sort by it.
std::string node_event_key(int64_t seq);

}  // namespace ag::head
