#include "head/sharing/usage_ledger.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <nlohmann/json.hpp>

namespace ag::head {
namespace {

using nlohmann::json;

constexpr const char* kUsageKey = "usage";  // {"user": [units, at_ms], ...}

// What holding the gang costs per second.
double rate(const Gang& gang) {
  return sched::billing_rate(gang.holds);
}

double seconds_between(int64_t from_ms, int64_t to_ms) {
  return static_cast<double>(std::max<int64_t>(0, to_ms - from_ms)) / 1000.0;
}

}  // namespace

UsageLedger::UsageLedger(const Clock& clock, Timers& timers, store::KvStore& store, int64_t half_life_ms)
    : clock_(clock), timers_(timers), store_(store), half_life_ms_(half_life_ms), base_ms_(clock.now_ms()) {}

UsageLedger::~UsageLedger() {
  if (timer_ != 0) timers_.cancel(timer_);
  *alive_ = false;
}

Status UsageLedger::recover() {
  auto stored = store_.get(store::kMetaTable, kUsageKey);
  if (!stored.ok()) return stored.error();
  if (stored.value()) {
    const json doc = json::parse(*stored.value(), nullptr, false);
    if (doc.is_object()) {
      for (const auto& [user, record] : doc.items()) {
        if (record.is_array() && record.size() == 2 && record[0].is_number() && record[1].is_number_integer()) {
          usage_[user] = {record[0].get<double>(), record[1].get<int64_t>()};
        }
      }
    }
  }
  timer_ = timers_.start(kUsageTickMs, [this, alive = alive_] {
    if (*alive) tick();
  });
  return {};
}

void UsageLedger::charge(const Gang& gang, bool ended) {
  const int64_t now = clock_.now_ms();
  auto it = charging_.find(gang.job_id);
  if (it == charging_.end()) {
    if (!ended) count(charging_[gang.job_id] = {gang.owner, rate(gang), now}, +1);
    return;
  }
  usage_[gang.owner] = sched::charged(usage_[gang.owner], rate(gang) * seconds_between(it->second.since_ms, now), now,
                                     half_life_ms_);
  count(it->second, -1);
  if (ended) {
    charging_.erase(it);
  } else {
    it->second = {gang.owner, rate(gang), now};
    count(it->second, +1);
  }
}

void UsageLedger::count(const Charging& charging, int sign) {
  Running& running = running_[charging.owner];
  running.jobs += sign;
  if (running.jobs == 0) {
    running_.erase(charging.owner);  // and with it what rounding left
    return;
  }
  running.rate += sign * charging.rate;
  running.rate_ms += sign * charging.rate * static_cast<double>(charging.since_ms - base_ms_);
}

std::map<std::string, sched::UsageRecord> UsageLedger::with_running() const {
  std::map<std::string, sched::UsageRecord> usage = usage_;
  const int64_t now = clock_.now_ms();
  for (const auto& [owner, running] : running_) {
    const double used_ms = running.rate * static_cast<double>(now - base_ms_) - running.rate_ms;
    usage[owner] = sched::charged(usage[owner], std::max(0.0, used_ms) / 1000.0, now, half_life_ms_);
  }
  return usage;
}

std::function<double(const std::string&)> UsageLedger::usage_now(const std::map<std::string, double>& weights) const {
  // Divided by the owner's share weight: a user with twice the share goes first until
  // they used twice as much.
  return [usage = with_running(), weights, now = clock_.now_ms(), half_life = half_life_ms_](const std::string& owner) {
    auto it = usage.find(owner);
    if (it == usage.end()) return 0.0;
    auto weight = weights.find(owner);
    return sched::decayed(it->second, now, half_life) / (weight == weights.end() ? 1.0 : weight->second);
  };
}

std::vector<sched::ShareLine> UsageLedger::report(const std::map<std::string, double>& weights) const {
  auto lines = sched::share_report(with_running(), clock_.now_ms(), half_life_ms_, weights);
  std::sort(lines.begin(), lines.end(), [](const auto& a, const auto& b) { return a.usage > b.usage; });
  return lines;
}

void UsageLedger::tick() {
  timer_ = timers_.start(kUsageTickMs, [this, alive = alive_] {
    if (*alive) tick();
  });
  const int64_t now = clock_.now_ms();
  // Every job is charged up to now: the sums start again from here (made afresh, so
  // that no rounding piles up).
  base_ms_ = now;
  running_.clear();
  for (auto& [id, c] : charging_) {
    usage_[c.owner] = sched::charged(usage_[c.owner], c.rate * seconds_between(c.since_ms, now), now, half_life_ms_);
    c.since_ms = now;
    Running& running = running_[c.owner];
    running.rate += c.rate;
    ++running.jobs;
  }
  if (usage_.empty()) return;
  json doc = json::object();
  for (const auto& [user, record] : usage_) doc[user] = {record.units, record.at_ms};
  store_.write({{store::kMetaTable, kUsageKey, doc.dump()}}, [](const Status& status) {
    // The next tick writes it again; what is lost meanwhile is at most one tick's charge.
    if (!status) spdlog::warn("could not store users' usage: {}", status.error().message);
  });
}

}  // namespace ag::head
