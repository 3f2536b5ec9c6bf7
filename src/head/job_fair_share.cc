// Fair share as the head keeps it (head/scheduler/fair_share.h decides the order): each
// user's decayed usage, charged for every running job from its placement to its end and
// stored with the meta table every kUsageTickMs, so a restart keeps it.
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "head/job_manager.h"

namespace ag::head {

using nlohmann::json;

namespace {

constexpr const char* kUsageKey = "usage";  // {"user": [units, at_ms], ...}
constexpr int64_t kUsageTickMs = 30'000;

}  // namespace

Status JobManager::recover_usage() {
  auto stored = deps_.store.get(store::kMetaTable, kUsageKey);
  if (!stored.ok()) return stored.error();
  if (stored.value()) {
    const json doc = json::parse(*stored.value(), nullptr, false);
    if (doc.is_object()) {
      for (const auto& [user, record] : doc.items()) {
        if (record.is_array() && record.size() == 2 && record[0].is_number() && record[1].is_number_integer()) {
          sharing_.usage[user] = {record[0].get<double>(), record[1].get<int64_t>()};
        }
      }
    }
  }
  sharing_.usage_timer = deps_.timers.start(kUsageTickMs, [this] { charge_running(); });
  return {};
}

namespace {

// What holding the job's gang costs per second.
double job_rate(const Job& job) {
  const AttemptRecord* attempt = job.current_attempt();
  const int64_t tasks = attempt ? static_cast<int64_t>(attempt->tasks.size()) : 0;
  const Resources per_task = job.spec.per_task();
  return sched::billing_rate({per_task.cpu_millis * tasks, per_task.memory_bytes * tasks, per_task.gpus * tasks});
}

}  // namespace

std::map<std::string, sched::UsageRecord> JobManager::usage_with_running() const {
  std::map<std::string, sched::UsageRecord> usage = sharing_.usage;
  const int64_t now = deps_.clock.now_ms();
  for (const auto& [id, since] : sharing_.charged_until) {
    const Job& job = jobs_.at(id);
    const double seconds = static_cast<double>(std::max<int64_t>(0, now - since)) / 1000.0;
    usage[job.owner] = sched::charged(usage[job.owner], job_rate(job) * seconds, now, config_.usage_half_life_ms);
  }
  return usage;
}

std::function<double(const std::string&)> JobManager::usage_now() const {
  const int64_t now = deps_.clock.now_ms();
  // Divided by the owner's share weight: a user with twice the share goes first until
  // they used twice as much.
  return [usage = usage_with_running(), weights = share_weights(), now,
          half_life = config_.usage_half_life_ms](const std::string& owner) {
    auto it = usage.find(owner);
    if (it == usage.end()) return 0.0;
    auto weight = weights.find(owner);
    return sched::decayed(it->second, now, half_life) / (weight == weights.end() ? 1.0 : weight->second);
  };
}

void JobManager::charge(const Job& job, bool ended) {
  auto it = sharing_.charged_until.find(job.id);
  const int64_t now = deps_.clock.now_ms();
  if (it == sharing_.charged_until.end()) {
    if (!ended) sharing_.charged_until[job.id] = now;
    return;
  }
  const double seconds = static_cast<double>(std::max<int64_t>(0, now - it->second)) / 1000.0;
  sharing_.usage[job.owner] = sched::charged(sharing_.usage[job.owner], job_rate(job) * seconds, now, config_.usage_half_life_ms);
  if (ended) {
    sharing_.charged_until.erase(it);
  } else {
    it->second = now;
  }
}

void JobManager::charge_running() {
  sharing_.usage_timer = deps_.timers.start(kUsageTickMs, [this] { charge_running(); });
  for (const auto& [_, job] : active_) charge(*job, false);
  if (sharing_.usage.empty()) return;
  json doc = json::object();
  for (const auto& [user, record] : sharing_.usage) doc[user] = {record.units, record.at_ms};
  deps_.store.write({{store::kMetaTable, kUsageKey, doc.dump()}}, [](const Status& status) {
    // The next tick writes it again; what is lost meanwhile is at most one tick's charge.
    if (!status) spdlog::warn("could not store users' usage: {}", status.error().message);
  });
}

std::map<std::string, double> JobManager::share_weights() const {
  std::map<std::string, double> weights;
  for (const auto& [user, limits] : sharing_.quotas.users) {
    if (limits.share != 1) weights[user] = limits.share;
  }
  return weights;
}

std::vector<sched::ShareLine> JobManager::share_report() const {
  auto lines =
      sched::share_report(usage_with_running(), deps_.clock.now_ms(), config_.usage_half_life_ms, share_weights());
  std::sort(lines.begin(), lines.end(), [](const auto& a, const auto& b) { return a.usage > b.usage; });
  return lines;
}

}  // namespace ag::head
