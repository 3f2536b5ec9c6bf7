// EventLog: every job and node event of the cluster in one order, for `ag events`,
// GET /api/events and webhooks.
//
//   job layer (JobController::record) --append--> [ring of the newest events] --> listeners
//   node events (NodeEvents)          --append--/        |                        (followers,
//                                                         after(cursor, filter)     webhooks)
//
// Each event gets a sequence number, its cursor: a reader that saw up to N asks for what
// came after N. Numbers grow across head restarts without a stored counter: the next
// is the larger of the last one + 1 and the wall clock in microseconds, and a restarted
// head starts after the largest it reads back. The log keeps the newest `capacity`
// events in memory; job events are stored with their jobs and node events by
// NodeEvents, and both come back through recover(). Io thread only.
//
// A job event is shown only once stored (append_unstored, then stored_upto from the
// job writer): a change that a head killed -9 loses happens again after its restart,
// and a reader that had seen it would see it twice. Readers see the events before the
// oldest unstored one, so a cursor never passes an event still to be shown.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"

namespace ag::head {

struct ClusterEvent {
  int64_t seq = 0;      // the cursor (see above)
  int64_t time_ms = 0;  // wall time
  std::string type;     // one of event_types()
  std::string job_id;   // job events
  std::string node_id;  // node events
  std::string owner;    // a job event's job owner
  std::string message;  // what happened, as a person reads it
};

// Every event type: "job.submitted", "job.update", "job.requeued", "job.preempted",
// "job.succeeded", "job.failed", "job.stopped", "job.hung", "job.idle",
// "node.registered", "node.disconnected", "node.dead", "node.removed", "node.drained",
// "node.resumed", "node.unhealthy", "node.healthy", and the head's own
// "log_export.failed", "log_export.resumed".
const std::vector<std::string>& event_types();
bool known_event_type(std::string_view type);
// The error for a type that is none of them, listing them.
std::string unknown_event_type(std::string_view type);

// Which events a reader wants; an empty field matches everything.
struct EventFilter {
  std::string job_id;           // events of this job (an array id: of its elements too)
  std::string node_id;          // events of this node, and job events naming it
  std::set<std::string> types;  // these types only
  int64_t since_ms = 0;         // at or after this wall time
  std::string owner;            // events of this user's jobs only
  bool matches(const ClusterEvent& event) const;
};

inline constexpr size_t kEventLogCapacity = 50000;

class EventLog {
 public:
  using Listener = std::function<void(const ClusterEvent&)>;

  explicit EventLog(const Clock& clock, size_t capacity = kEventLogCapacity);
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  // Adds `event` now (its seq and time are set here), shown to readers and listeners
  // once every event before it is.
  const ClusterEvent& append(ClusterEvent event);
  // The same for an event still to be stored: shown once stored_upto passes its seq.
  const ClusterEvent& append_unstored(ClusterEvent event);
  // Every event up to `seq` is stored: what that shows, listeners hear of, in order.
  void stored_upto(int64_t seq);
  // `fn` runs once every event added so far is shown (at once if it is, and 0 is
  // returned); else the id for forget_when_shown.
  uint64_t when_shown(std::function<void()> fn);
  void forget_when_shown(uint64_t id);
  bool all_shown() const { return unstored_.empty(); }

  // At start: events read back from the store, in any order, merged with those the log
  // holds (each source of stored events calls it once). Keeps the newest `capacity`;
  // later appends number after the largest seq among them.
  void recover(std::vector<ClusterEvent> events);

  struct Page {
    std::vector<ClusterEvent> events;  // oldest first
    int64_t cursor = 0;                // ask for what comes after this next
    bool truncated = false;            // events after the asked cursor are gone from memory
  };
  // Up to `limit` events after `cursor` (0: from the oldest kept) that match `filter`.
  // The cursor of a page passes every event looked at, matching or not, so a reader
  // that filters does not look at the same events again.
  Page after(int64_t cursor, const EventFilter& filter, size_t limit) const;

  // The newest `limit` matching events (for `ag events` without a cursor).
  Page newest(const EventFilter& filter, size_t limit) const;

  // The newest event shown (a reader's cursor for "from now on").
  int64_t last_seq() const { return unstored_.empty() ? last_seq_ : unstored_.front() - 1; }
  // The newest event added, shown or not.
  int64_t appended_seq() const { return last_seq_; }
  size_t size() const { return events_.size(); }

  // Listeners hear of every event as it is shown, in order. A listener may add or remove
  // listeners.
  uint64_t listen(Listener listener);
  void unlisten(uint64_t id) { listeners_.erase(id); }

 private:
  const Clock& clock_;
  size_t capacity_;
  std::deque<ClusterEvent> events_;  // by seq, oldest first
  int64_t last_seq_ = 0;
  bool dropped_ = false;     // some events are older than the ring holds
  int64_t dropped_upto_ = 0;  // the seq of the newest of them
  std::deque<int64_t> unstored_;  // seqs of events added but not stored yet, oldest first
  std::map<uint64_t, Listener> listeners_;
  uint64_t next_listener_ = 1;
  struct ShownWaiter {
    uint64_t id;
    int64_t seq;  // runs once this is shown
    std::function<void()> fn;
  };
  std::vector<ShownWaiter> shown_waiters_;
  uint64_t next_waiter_ = 1;

  const ClusterEvent& add(ClusterEvent event);
  // Tells the listeners of the shown events after `from`, oldest first. (A listener
  // that appended would be told of its event inside this walk, ahead of older ones
  // still to tell: none does.)
  void tell_after(int64_t from);
};

}  // namespace ag::head
