// WebhookStore: the webhooks (table `webhooks`) and how far each has delivered (table
// `webhook_cursors`: the seq of the last event of the cluster's stream it is done with).
// An added or removed webhook is durable before it counts; cursors are written behind,
// at most every 200 ms, so that a head that restarts resumes each webhook from where it
// was (at least once: what was sent after the last written cursor is sent again).
// Io thread only (the store's answers come back through Timers::post).
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>

#include "common/result.h"
#include "common/timers.h"
#include "head/store/kv_store.h"
#include "head/webhooks/webhook.h"

namespace ag::head {

inline constexpr const char* kWebhooksTable = "webhooks";
inline constexpr const char* kWebhookCursorsTable = "webhook_cursors";

class WebhookStore {
 public:
  WebhookStore(store::KvStore& store, Timers& timers);
  ~WebhookStore();
  WebhookStore(const WebhookStore&) = delete;
  WebhookStore& operator=(const WebhookStore&) = delete;

  // At start: every webhook and its cursor. A record that does not parse is skipped
  // (and said in the log). Errors: the store's.
  Status recover();

  const std::map<std::string, Webhook>& all() const { return webhooks_; }
  const Webhook* find(const std::string& id) const;

  // Stores `webhook` with `cursor` (where its deliveries start), then keeps it and
  // calls done({}); done(error) with nothing kept if the store failed.
  void add(Webhook webhook, int64_t cursor, std::function<void(Status)> done);
  // Deletes it and its cursor, then done.
  void remove(const std::string& id, std::function<void(Status)> done);

  int64_t cursor(const std::string& id) const;
  // The webhook is done with every event up to `seq`: written behind.
  void set_cursor(const std::string& id, int64_t seq);

 private:
  void flush_cursors();

  store::KvStore& store_;
  Timers& timers_;
  std::map<std::string, Webhook> webhooks_;
  std::map<std::string, int64_t> cursors_;
  std::set<std::string> dirty_;
  Timers::Id flush_timer_ = 0;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ag::head
