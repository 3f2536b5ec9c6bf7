#include "head/auth/audit_log.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace ag::head {
namespace {

using nlohmann::json;

constexpr const char* kAuditTable = "audit";

// Keys sort by time, then by order within the head's run.
std::string entry_key(int64_t time_ms, uint64_t seq) {
  char key[48];
  std::snprintf(key, sizeof key, "%016lld.%012llu", static_cast<long long>(time_ms),
                static_cast<unsigned long long>(seq));
  return key;
}

}  // namespace

Status AuditLog::recover() {
  auto records = store_.scan(kAuditTable);
  if (!records.ok()) return records.error();
  for (const auto& [key, value] : records.value()) {
    json j = json::parse(value, nullptr, false);
    if (!j.is_object()) continue;
    entries_.emplace_back(key, AuditEntry{j.value("time_ms", int64_t{0}), j.value("actor", ""), j.value("from", ""),
                                          j.value("action", ""), j.value("outcome", "")});
  }
  return {};
}

void AuditLog::record(AuditEntry entry) {
  spdlog::info("audit: {} from {}: {}: {}", entry.actor.empty() ? "(unauthenticated)" : entry.actor, entry.from,
               entry.action, entry.outcome);
  std::string key = entry_key(entry.time_ms, ++seq_);
  // A key at or below the newest kept one (the clock stepped back) still sorts last.
  if (!entries_.empty() && key <= entries_.back().first) key = entries_.back().first + "+";
  std::vector<store::Mutation> batch;
  batch.push_back({kAuditTable, key,
                   json{{"time_ms", entry.time_ms}, {"actor", entry.actor}, {"from", entry.from},
                        {"action", entry.action}, {"outcome", entry.outcome}}
                       .dump(-1, ' ', false, json::error_handler_t::replace)});
  entries_.emplace_back(key, std::move(entry));
  while (entries_.size() > kKeep) {
    batch.push_back({kAuditTable, entries_.front().first, std::nullopt});
    entries_.pop_front();
  }
  store_.write(std::move(batch), [](const Status& s) {
    if (!s) spdlog::error("an audit entry could not be stored: {}", s.error().message);
  });
}

std::vector<AuditEntry> AuditLog::recent(size_t limit, const AuditFilter& filter) const {
  std::vector<AuditEntry> out;
  for (auto it = entries_.rbegin(); it != entries_.rend() && out.size() < limit; ++it) {
    if (filter.matches(it->second)) out.push_back(it->second);
  }
  // Submissions, from the jobs (newest first too); then both lists merge by time.
  std::vector<AuditEntry> submits;
  for (const Job* job : jobs_.list()) {
    if (submits.size() >= limit || job->submitted_ms < filter.since_ms) break;
    AuditEntry entry{job->submitted_ms, job->owner, job->submitted_from, "submit " + job->id, "ok"};
    if (filter.matches(entry)) submits.push_back(std::move(entry));
  }
  std::vector<AuditEntry> merged;
  merged.reserve(std::min(limit, out.size() + submits.size()));
  std::merge(out.begin(), out.end(), submits.begin(), submits.end(), std::back_inserter(merged),
             [](const AuditEntry& a, const AuditEntry& b) { return a.time_ms > b.time_ms; });
  if (merged.size() > limit) merged.resize(limit);
  return merged;
}

}  // namespace ag::head
