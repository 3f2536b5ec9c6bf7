#include "head/webhooks/webhook_store.h"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

namespace ag::head {

using nlohmann::json;

constexpr int64_t kCursorFlushMs = 200;

WebhookStore::WebhookStore(store::KvStore& store, Timers& timers) : store_(store), timers_(timers) {}

WebhookStore::~WebhookStore() {
  *alive_ = false;
  if (flush_timer_) timers_.cancel(flush_timer_);
  // What moved since the last write, written as the head stops.
  if (!dirty_.empty()) {
    std::vector<store::Mutation> batch;
    for (const auto& id : dirty_) batch.push_back({kWebhookCursorsTable, id, std::to_string(cursors_[id])});
    store_.write(std::move(batch), [](const Status&) {});
    store_.flush();
  }
}

Status WebhookStore::recover() {
  auto hooks = store_.scan(kWebhooksTable);
  if (!hooks.ok()) return hooks.error();
  for (const auto& [key, value] : hooks.value()) {
    auto hook = webhook_from_json(json::parse(value, nullptr, false));
    if (!hook.ok()) {
      spdlog::error("skipping stored webhook {}: {}", key, hook.error().message);
      continue;
    }
    webhooks_[key] = std::move(hook.value());
  }
  auto cursors = store_.scan(kWebhookCursorsTable);
  if (!cursors.ok()) return cursors.error();
  for (const auto& [key, value] : cursors.value()) {
    if (webhooks_.count(key)) cursors_[key] = std::atoll(value.c_str());
  }
  return {};
}

const Webhook* WebhookStore::find(const std::string& id) const {
  auto it = webhooks_.find(id);
  return it == webhooks_.end() ? nullptr : &it->second;
}

void WebhookStore::add(Webhook webhook, int64_t cursor, std::function<void(Status)> done) {
  const std::string id = webhook.id;
  std::vector<store::Mutation> batch{{kWebhooksTable, id, webhook_to_json(webhook, true).dump()},
                                     {kWebhookCursorsTable, id, std::to_string(cursor)}};
  store_.write(std::move(batch), [this, alive = alive_, webhook = std::move(webhook), cursor,
                                  done = std::move(done)](const Status& s) mutable {
    timers_.post([this, alive, webhook = std::move(webhook), cursor, done = std::move(done), s]() mutable {
      if (!*alive) return;
      if (s) {
        cursors_[webhook.id] = cursor;
        webhooks_[webhook.id] = std::move(webhook);
      }
      done(s);
    });
  });
}

void WebhookStore::remove(const std::string& id, std::function<void(Status)> done) {
  std::vector<store::Mutation> batch{{kWebhooksTable, id, std::nullopt}, {kWebhookCursorsTable, id, std::nullopt}};
  store_.write(std::move(batch), [this, alive = alive_, id, done = std::move(done)](const Status& s) {
    timers_.post([this, alive, id, done, s] {
      if (!*alive) return;
      if (s) {
        webhooks_.erase(id);
        cursors_.erase(id);
        dirty_.erase(id);
      }
      done(s);
    });
  });
}

int64_t WebhookStore::cursor(const std::string& id) const {
  auto it = cursors_.find(id);
  return it == cursors_.end() ? 0 : it->second;
}

void WebhookStore::set_cursor(const std::string& id, int64_t seq) {
  if (!webhooks_.count(id) || cursors_[id] >= seq) return;
  cursors_[id] = seq;
  dirty_.insert(id);
  if (!flush_timer_) flush_timer_ = timers_.start(kCursorFlushMs, [this] { flush_cursors(); });
}

void WebhookStore::flush_cursors() {
  flush_timer_ = 0;
  std::vector<store::Mutation> batch;
  for (const auto& id : dirty_) {
    if (webhooks_.count(id)) batch.push_back({kWebhookCursorsTable, id, std::to_string(cursors_[id])});
  }
  dirty_.clear();
  if (batch.empty()) return;
  store_.write(std::move(batch), [](const Status& s) {
    if (!s) spdlog::warn("could not store webhook cursors: {}", s.error().message);
  });
}

}  // namespace ag::head
