// WebhookDispatcher: delivers the cluster's events to each webhook, at least once, in
// bounded memory. The event stream (EventLog) is the outbox: each webhook reads it from
// its stored cursor, so nothing is queued per webhook but a window of kWindow events.
//
//   EventLog ──after(scanned) (stored events only)──▶ window [e1 e2 e3 e4] ──WebhookSender threads──▶ POST
//                                 │ 2xx: done; else retried with backoff (1 s doubling to 5 min)
//                                 │ for the webhook's retry_for, then given up (said in its log)
//                                 └─ the done prefix moves the cursor (WebhookStore, stored)
//
// Each delivery's outcome is kept (the last kDeliveriesKept per webhook) for `ag webhook
// deliveries`. A slow or dead receiver holds at most kWindow events and its cursor; the
// head's io thread only builds bodies and reads results. Io thread only.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/timers.h"
#include "head/events/event_log.h"
#include "head/jobs/job_layer.h"
#include "head/nodes/node_registry.h"
#include "head/webhooks/webhook_sender.h"
#include "head/webhooks/webhook_store.h"

namespace ag::head {

class WebhookDispatcher {
 public:
  struct Deps {
    const Clock& clock;
    Timers& timers;
    EventLog& events;
    WebhookStore& hooks;
    const JobLayer& jobs;
    const NodeRegistry& nodes;
    std::string dashboard_url;  // "https://HEAD:8265"
  };
  static constexpr size_t kWindow = 4;
  static constexpr size_t kDeliveriesKept = 100;
  // Enough for every window of a few webhooks at once: the threads mostly wait on the network.
  static constexpr size_t kThreads = 16;
  static constexpr int kTimeoutMs = 10000;

  struct Delivery {
    int64_t time_ms = 0;
    int64_t seq = 0;  // 0: a test delivery
    std::string event;
    int attempt = 0;
    int status = 0;  // the HTTP status; 0 when none came
    std::string error;
    int64_t duration_ms = 0;
    bool delivered = false;
    bool given_up = false;
    int64_t next_try_ms = 0;  // when it is tried again (not delivered, not given up)
  };

  explicit WebhookDispatcher(Deps deps);
  ~WebhookDispatcher();
  WebhookDispatcher(const WebhookDispatcher&) = delete;
  WebhookDispatcher& operator=(const WebhookDispatcher&) = delete;

  // Listens to the event log and resumes every stored webhook from its cursor.
  void start();
  // A webhook added (already in the store) or removed.
  void added(const std::string& id);
  void removed(const std::string& id);
  // `ag webhook test`: one "webhook.test" delivery now, outside the stream; `done` gets
  // its outcome.
  void test(const std::string& id, std::function<void(const Delivery&)> done);
  // The webhook's recent deliveries, oldest first.
  std::vector<Delivery> deliveries(const std::string& id) const;
  // Events it has in its window now, being sent or waiting to be tried again.
  size_t pending(const std::string& id) const;

 private:
  struct Slot {
    ClusterEvent event;
    int attempts = 0;
    int64_t first_ms = 0;
    int64_t next_ms = 0;
    bool in_flight = false;
    bool done = false;
  };
  struct Lane {
    int64_t scanned = 0;  // every event up to here is in the window or done with
    std::deque<Slot> window;
    std::deque<Delivery> log;
    Timers::Id retry_timer = 0;
  };
  void pump(const std::string& id);
  void send(const std::string& id, Slot& slot);
  void poll();
  void finished(const WebhookSender::Result& result);
  void note(Lane& lane, Delivery delivery);

  Deps deps_;
  WebhookSender sender_;
  std::map<std::string, Lane> lanes_;
  // In-flight requests: id -> (webhook, seq; 0 for a test).
  std::map<uint64_t, std::pair<std::string, int64_t>> in_flight_;
  std::map<uint64_t, std::function<void(const Delivery&)>> tests_;
  uint64_t next_request_ = 1;
  uint64_t listener_ = 0;
  Timers::Id poll_timer_ = 0;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ag::head
