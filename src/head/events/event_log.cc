#include "head/events/event_log.h"

#include <algorithm>
#include <cctype>

namespace ag::head {

const std::vector<std::string>& event_types() {
  static const std::vector<std::string> kTypes = {
      "job.submitted",     "job.update",   "job.requeued",      "job.preempted",     "job.succeeded",
      "job.failed",        "job.stopped",  "job.hung",          "job.idle",          "node.registered",
      "node.disconnected", "node.dead",    "node.removed",      "node.drained",      "node.resumed",
      "node.unhealthy",    "node.healthy", "log_export.failed", "log_export.resumed"};
  return kTypes;
}

bool known_event_type(std::string_view type) {
  const auto& types = event_types();
  return std::find(types.begin(), types.end(), type) != types.end();
}

std::string unknown_event_type(std::string_view type) {
  std::string known;
  for (const auto& t : event_types()) known += (known.empty() ? "" : ", ") + t;
  return "unknown event type '" + std::string(type) + "'; the types are " + known;
}

namespace {

// Whether `message` names `node_id` as a word ("placed on node_ab12 (127.0.0.2)"), not
// as the start of a longer id.
bool names_node(const std::string& message, const std::string& node_id) {
  for (size_t at = message.find(node_id); at != std::string::npos; at = message.find(node_id, at + 1)) {
    const size_t end = at + node_id.size();
    const auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; };
    if ((at == 0 || !word(message[at - 1])) && (end == message.size() || !word(message[end]))) return true;
  }
  return false;
}

}  // namespace

bool EventFilter::matches(const ClusterEvent& event) const {
  if (event.time_ms < since_ms) return false;
  if (!owner.empty() && event.owner != owner) return false;
  if (!types.empty() && types.count(event.type) == 0) return false;
  // An array's elements are ARRAY_INDEX.
  if (!job_id.empty() && event.job_id != job_id &&
      !(event.job_id.size() > job_id.size() && event.job_id.starts_with(job_id) &&
        event.job_id[job_id.size()] == '_')) {
    return false;
  }
  if (!node_id.empty() && event.node_id != node_id && !(event.node_id.empty() && names_node(event.message, node_id))) {
    return false;
  }
  return true;
}

EventLog::EventLog(const Clock& clock, size_t capacity) : clock_(clock), capacity_(std::max<size_t>(capacity, 1)) {}

const ClusterEvent& EventLog::add(ClusterEvent event) {
  event.time_ms = clock_.now_ms();
  last_seq_ = std::max(last_seq_ + 1, event.time_ms * 1000);
  event.seq = last_seq_;
  if (events_.size() == capacity_) {
    dropped_upto_ = events_.front().seq;
    events_.pop_front();
    dropped_ = true;
  }
  events_.push_back(std::move(event));
  return events_.back();
}

const ClusterEvent& EventLog::append(ClusterEvent event) {
  const int64_t shown = last_seq();
  const ClusterEvent& added = add(std::move(event));
  if (unstored_.empty()) tell_after(shown);
  return added;
}

const ClusterEvent& EventLog::append_unstored(ClusterEvent event) {
  const ClusterEvent& added = add(std::move(event));
  unstored_.push_back(added.seq);
  return added;
}

void EventLog::stored_upto(int64_t seq) {
  const int64_t shown = last_seq();
  while (!unstored_.empty() && unstored_.front() <= seq) unstored_.pop_front();
  if (last_seq() == shown) return;
  tell_after(shown);
  if (shown_waiters_.empty()) return;
  std::vector<std::function<void()>> ready;
  std::erase_if(shown_waiters_, [&](ShownWaiter& waiter) {
    if (waiter.seq > last_seq()) return false;
    ready.push_back(std::move(waiter.fn));
    return true;
  });
  for (auto& fn : ready) fn();
}

uint64_t EventLog::when_shown(std::function<void()> fn) {
  if (unstored_.empty()) {
    fn();
    return 0;
  }
  const uint64_t id = next_waiter_++;
  shown_waiters_.push_back({id, last_seq_, std::move(fn)});
  return id;
}

void EventLog::forget_when_shown(uint64_t id) {
  std::erase_if(shown_waiters_, [id](const ShownWaiter& waiter) { return waiter.id == id; });
}

void EventLog::tell_after(int64_t from) {
  if (listeners_.empty()) return;
  const int64_t upto = last_seq();
  // By seq, not by place: a listener may add events (and the oldest may go).
  for (int64_t at = from;;) {
    auto it = std::upper_bound(events_.begin(), events_.end(), at,
                               [](int64_t c, const ClusterEvent& e) { return c < e.seq; });
    if (it == events_.end() || it->seq > upto) return;
    at = it->seq;
    // A listener may add or remove listeners: walk the ids as they stand now.
    std::vector<uint64_t> ids;
    ids.reserve(listeners_.size());
    for (const auto& [id, _] : listeners_) ids.push_back(id);
    for (uint64_t id : ids) {
      auto listener = listeners_.find(id);
      if (listener != listeners_.end()) listener->second(*it);
    }
  }
}

void EventLog::recover(std::vector<ClusterEvent> events) {
  std::erase_if(events, [](const ClusterEvent& e) { return e.seq <= 0; });
  events.insert(events.end(), std::make_move_iterator(events_.begin()), std::make_move_iterator(events_.end()));
  std::sort(events.begin(), events.end(), [](const ClusterEvent& a, const ClusterEvent& b) { return a.seq < b.seq; });
  if (!events.empty()) last_seq_ = std::max(last_seq_, events.back().seq);
  if (events.size() > capacity_) {
    dropped_ = true;
    dropped_upto_ = std::max(dropped_upto_, (events.end() - static_cast<std::ptrdiff_t>(capacity_) - 1)->seq);
    events.erase(events.begin(), events.end() - static_cast<std::ptrdiff_t>(capacity_));
  }
  events_.assign(std::make_move_iterator(events.begin()), std::make_move_iterator(events.end()));
}

EventLog::Page EventLog::after(int64_t cursor, const EventFilter& filter, size_t limit) const {
  Page page;
  page.cursor = std::max(cursor, int64_t{0});
  auto it = std::upper_bound(events_.begin(), events_.end(), cursor,
                             [](int64_t c, const ClusterEvent& e) { return c < e.seq; });
  // Events after the cursor were dropped: it is older than the newest dropped one.
  page.truncated = cursor > 0 && dropped_ && cursor < dropped_upto_;
  const int64_t shown = last_seq();
  for (; it != events_.end() && it->seq <= shown && page.events.size() < limit; ++it) {
    if (filter.matches(*it)) page.events.push_back(*it);
    page.cursor = it->seq;
  }
  // Nothing more matched: the reader may skip everything looked at.
  if (it == events_.end() || it->seq > shown) page.cursor = std::max(page.cursor, shown);
  return page;
}

EventLog::Page EventLog::newest(const EventFilter& filter, size_t limit) const {
  Page page;
  page.cursor = last_seq();
  for (auto it = events_.rbegin(); it != events_.rend() && page.events.size() < limit; ++it) {
    if (it->seq > page.cursor) continue;
    if (filter.matches(*it)) page.events.push_back(*it);
  }
  std::reverse(page.events.begin(), page.events.end());
  page.truncated = dropped_ && page.events.size() < limit;
  return page;
}

uint64_t EventLog::listen(Listener listener) {
  const uint64_t id = next_listener_++;
  listeners_.emplace(id, std::move(listener));
  return id;
}

}  // namespace ag::head
