#include "head/webhooks/webhook_dispatcher.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "head/webhooks/webhook_payload.h"

namespace ag::head {
namespace {

constexpr int64_t kPollMs = 20;
constexpr int64_t kFirstBackoffMs = 1000;
constexpr int64_t kMaxBackoffMs = 5 * 60 * 1000;

int64_t backoff_ms(int attempts) {
  int64_t delay = kFirstBackoffMs;
  for (int i = 1; i < attempts && delay < kMaxBackoffMs; ++i) delay *= 2;
  return std::min(delay, kMaxBackoffMs);
}

EventFilter filter_of(const Webhook& hook) {
  EventFilter filter;
  filter.types = hook.events;
  if (!hook.all) filter.owner = hook.jobs_of;
  return filter;
}

}  // namespace

WebhookDispatcher::WebhookDispatcher(Deps deps) : deps_(std::move(deps)), sender_(kThreads) {}

WebhookDispatcher::~WebhookDispatcher() {
  *alive_ = false;
  if (listener_) deps_.events.unlisten(listener_);
  if (poll_timer_) deps_.timers.cancel(poll_timer_);
  for (auto& [_, lane] : lanes_) {
    if (lane.retry_timer) deps_.timers.cancel(lane.retry_timer);
  }
}

void WebhookDispatcher::start() {
  // The log shows a job's event once it is stored: a change a crash loses, and that
  // happens again after the restart, is told once.
  listener_ = deps_.events.listen([this](const ClusterEvent& event) {
    std::vector<std::string> due;
    for (auto& [id, lane] : lanes_) {
      const Webhook* hook = deps_.hooks.find(id);
      if (!hook) continue;
      // A lane with nothing in its window moves past events it does not want too, so
      // its cursor keeps up with the stream.
      if ((hook->wants(event) && lane.window.size() < kWindow) || lane.window.empty()) due.push_back(id);
    }
    for (const auto& id : due) pump(id);
  });
  for (const auto& [id, _] : deps_.hooks.all()) added(id);
}

void WebhookDispatcher::added(const std::string& id) {
  Lane& lane = lanes_[id];
  lane.scanned = deps_.hooks.cursor(id);
  pump(id);
}

void WebhookDispatcher::removed(const std::string& id) {
  auto it = lanes_.find(id);
  if (it == lanes_.end()) return;
  if (it->second.retry_timer) deps_.timers.cancel(it->second.retry_timer);
  lanes_.erase(it);
}

void WebhookDispatcher::pump(const std::string& id) {
  auto it = lanes_.find(id);
  const Webhook* hook = deps_.hooks.find(id);
  if (it == lanes_.end() || !hook) return;
  Lane& lane = it->second;
  const int64_t now = deps_.clock.now_ms();
  // The finished front of the window moves the cursor.
  while (!lane.window.empty() && lane.window.front().done) {
    deps_.hooks.set_cursor(id, lane.window.front().event.seq);
    lane.window.pop_front();
  }
  if (lane.window.empty()) deps_.hooks.set_cursor(id, lane.scanned);
  // More events into the window.
  if (lane.window.size() < kWindow) {
    auto page = deps_.events.after(lane.scanned, filter_of(*hook), kWindow - lane.window.size());
    if (page.truncated) {
      Delivery lost;
      lost.time_ms = now;
      lost.given_up = true;
      lost.error = "events after the last one delivered are no longer held by the head (it keeps the newest " +
                   std::to_string(kEventLogCapacity) + "): they were not delivered";
      note(lane, std::move(lost));
    }
    for (auto& event : page.events) lane.window.push_back({std::move(event), 0, now, now, false, false});
    lane.scanned = page.cursor;  // past unwanted events too
    if (lane.window.empty()) deps_.hooks.set_cursor(id, lane.scanned);
  }
  // Send what is due; wake up for the next retry.
  int64_t next_due = 0;
  for (auto& slot : lane.window) {
    if (slot.done || slot.in_flight) continue;
    if (slot.next_ms <= now) {
      send(id, slot);
    } else if (next_due == 0 || slot.next_ms < next_due) {
      next_due = slot.next_ms;
    }
  }
  if (lane.retry_timer) deps_.timers.cancel(lane.retry_timer);
  lane.retry_timer = 0;
  if (next_due) {
    lane.retry_timer = deps_.timers.start(next_due - now, [this, id] {
      if (auto l = lanes_.find(id); l != lanes_.end()) l->second.retry_timer = 0;
      pump(id);
    });
  }
}

void WebhookDispatcher::send(const std::string& id, Slot& slot) {
  const Webhook& hook = *deps_.hooks.find(id);
  auto target = parse_webhook_url(hook.url, hook.ca_pem);
  const int64_t now = deps_.clock.now_ms();
  slot.in_flight = true;
  ++slot.attempts;
  const uint64_t request = next_request_++;
  in_flight_[request] = {id, slot.event.seq};
  if (!target.ok()) {  // checked when added; kept for a stored one edited by hand
    // Told later, not from inside the pump that is sending it.
    deps_.timers.start(0, [this, request, why = target.error().message] { finished({request, 0, why, 0}); });
    return;
  }
  const std::string body = delivery_body(slot.event, deps_.jobs, deps_.nodes, deps_.dashboard_url, now, hook.format);
  sender_.send({request, target->endpoint, target->target, body,
                webhook_headers(hook.secret, body, slot.event.type, slot.event.seq, now), kTimeoutMs});
  if (!poll_timer_) poll_timer_ = deps_.timers.start(kPollMs, [this] { poll(); });
}

void WebhookDispatcher::test(const std::string& id, std::function<void(const Delivery&)> done) {
  const Webhook* hook = deps_.hooks.find(id);
  if (!hook) return;
  auto target = parse_webhook_url(hook->url, hook->ca_pem);
  const int64_t now = deps_.clock.now_ms();
  ClusterEvent event;
  event.seq = 0;
  event.time_ms = now;
  event.type = "webhook.test";
  event.owner = hook->owner;
  event.message = "a test delivery of webhook " + id + ", asked for by `ag webhook test`";
  const uint64_t request = next_request_++;
  in_flight_[request] = {id, 0};
  tests_[request] = std::move(done);
  if (!target.ok()) {
    deps_.timers.start(0, [this, request, why = target.error().message] { finished({request, 0, why, 0}); });
    return;
  }
  const std::string body = delivery_body(event, deps_.jobs, deps_.nodes, deps_.dashboard_url, now, hook->format);
  sender_.send({request, target->endpoint, target->target, body,
                webhook_headers(hook->secret, body, event.type, 0, now), kTimeoutMs});
  if (!poll_timer_) poll_timer_ = deps_.timers.start(kPollMs, [this] { poll(); });
}

void WebhookDispatcher::poll() {
  poll_timer_ = 0;
  for (const auto& result : sender_.take_results()) finished(result);
  // finished() may have sent more, and started the timer again already.
  if (!poll_timer_ && sender_.in_flight() > 0) poll_timer_ = deps_.timers.start(kPollMs, [this] { poll(); });
}

void WebhookDispatcher::finished(const WebhookSender::Result& result) {
  auto req = in_flight_.find(result.id);
  if (req == in_flight_.end()) return;
  const auto [id, seq] = req->second;
  in_flight_.erase(req);
  const int64_t now = deps_.clock.now_ms();
  Delivery d;
  d.time_ms = now;
  d.seq = seq;
  d.status = result.status;
  d.error = result.error;
  d.duration_ms = result.duration_ms;
  d.delivered = result.status >= 200 && result.status <= 299;
  if (auto test = tests_.find(result.id); test != tests_.end()) {
    d.event = "webhook.test";
    d.attempt = 1;
    auto done = std::move(test->second);
    tests_.erase(test);
    if (auto lane = lanes_.find(id); lane != lanes_.end()) note(lane->second, d);
    done(d);
    return;
  }
  auto lane_it = lanes_.find(id);
  const Webhook* hook = deps_.hooks.find(id);
  if (lane_it == lanes_.end() || !hook) return;  // removed meanwhile
  Lane& lane = lane_it->second;
  auto slot = std::find_if(lane.window.begin(), lane.window.end(), [seq](const Slot& s) { return s.event.seq == seq; });
  if (slot == lane.window.end()) return;
  slot->in_flight = false;
  d.event = slot->event.type;
  d.attempt = slot->attempts;
  if (d.delivered) {
    slot->done = true;
  } else if (now - slot->first_ms >= hook->retry_for_ms) {
    slot->done = true;
    d.given_up = true;
    spdlog::warn("webhook {} gave up on event {} ({}) after {} attempts: {}", id, seq, d.event, d.attempt,
                 d.error.empty() ? "HTTP " + std::to_string(d.status) : d.error);
  } else {
    slot->next_ms = now + backoff_ms(slot->attempts);
    d.next_try_ms = slot->next_ms;
  }
  note(lane, std::move(d));
  pump(id);
}

void WebhookDispatcher::note(Lane& lane, Delivery delivery) {
  lane.log.push_back(std::move(delivery));
  while (lane.log.size() > kDeliveriesKept) lane.log.pop_front();
}

std::vector<WebhookDispatcher::Delivery> WebhookDispatcher::deliveries(const std::string& id) const {
  auto it = lanes_.find(id);
  if (it == lanes_.end()) return {};
  return {it->second.log.begin(), it->second.log.end()};
}

size_t WebhookDispatcher::pending(const std::string& id) const {
  auto it = lanes_.find(id);
  if (it == lanes_.end()) return 0;
  return static_cast<size_t>(
      std::count_if(it->second.window.begin(), it->second.window.end(), [](const Slot& s) { return !s.done; }));
}

}  // namespace ag::head
