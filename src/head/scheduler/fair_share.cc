// Fair share. See fair_share.h.
#include "head/scheduler/fair_share.h"

#include <cmath>
#include <queue>
#include <tuple>

namespace ag::sched {

double decayed(const UsageRecord& record, int64_t now_ms, int64_t half_life_ms) {
  if (record.units <= 0 || half_life_ms <= 0) return record.units;
  const double elapsed = static_cast<double>(std::max<int64_t>(0, now_ms - record.at_ms));
  return record.units * std::exp2(-elapsed / static_cast<double>(half_life_ms));
}

UsageRecord charged(const UsageRecord& record, double units, int64_t now_ms, int64_t half_life_ms) {
  return {decayed(record, now_ms, half_life_ms) + units, std::max(now_ms, record.at_ms)};
}

double billing_rate(const Resources& held) {
  return static_cast<double>(held.gpus) + static_cast<double>(held.cpu_millis) / 1000.0 / 16.0;
}

std::vector<ShareLine> share_report(const std::map<std::string, UsageRecord>& usage, int64_t now_ms,
                                    int64_t half_life_ms, const std::map<std::string, double>& weights) {
  std::vector<ShareLine> lines;
  double total = 0;
  double total_weight = 0;
  const auto weight_of = [&weights](const std::string& user) {
    auto it = weights.find(user);
    return it == weights.end() ? 1.0 : it->second;
  };
  for (const auto& [user, record] : usage) {
    lines.push_back({user, decayed(record, now_ms, half_life_ms), 0, 0, 0});
    total += lines.back().usage;
    total_weight += weight_of(user);
  }
  for (auto& line : lines) {
    line.usage_part = total > 0 ? line.usage / total : 0;
    line.share = total_weight > 0 ? weight_of(line.user) / total_weight : 0;
    line.factor = line.share > 0 ? std::exp2(-line.usage_part / line.share) : 0;
  }
  return lines;
}

void PendingQueue::add(const Entry& entry) {
  Owner& owner = by_owner_[entry.owner];
  if (!owner.jobs.insert_or_assign({-int64_t{entry.priority}, entry.seq}, entry.job_id).second) return;
  ++size_;
  ++node_needs_[entry.where];
  owner.cpu_millis.insert(entry.need.cpu_millis);
  owner.memory_bytes.insert(entry.need.memory_bytes);
  owner.gpus.insert(entry.need.gpus);
}

void PendingQueue::remove(const Entry& entry) {
  auto owner = by_owner_.find(entry.owner);
  if (owner == by_owner_.end()) return;
  if (owner->second.jobs.erase({-int64_t{entry.priority}, entry.seq}) == 0) return;
  --size_;
  if (auto where = node_needs_.find(entry.where); where != node_needs_.end() && --where->second == 0) {
    node_needs_.erase(where);
  }
  const auto drop = [](std::multiset<int64_t>& needs, int64_t need) {
    if (auto it = needs.find(need); it != needs.end()) needs.erase(it);
  };
  drop(owner->second.cpu_millis, entry.need.cpu_millis);
  drop(owner->second.memory_bytes, entry.need.memory_bytes);
  drop(owner->second.gpus, entry.need.gpus);
  if (owner->second.jobs.empty()) by_owner_.erase(owner);
}

Resources PendingQueue::least_need(const std::string& owner) const {
  auto it = by_owner_.find(owner);
  if (it == by_owner_.end() || it->second.jobs.empty()) return {};
  return {*it->second.cpu_millis.begin(), *it->second.memory_bytes.begin(), *it->second.gpus.begin()};
}

std::vector<std::string> PendingQueue::owners() const {
  std::vector<std::string> out;
  out.reserve(by_owner_.size());
  for (const auto& [owner, _] : by_owner_) out.push_back(owner);
  return out;
}

void PendingQueue::walk(const std::function<double(const std::string&)>& usage_of,
                        const std::function<bool(const std::string&)>& visit) const {
  walk_owners(usage_of, [&visit](const std::string&, const std::string& job_id) {
    return visit(job_id) ? Visit::kNext : Visit::kStop;
  });
}

void PendingQueue::walk_owners(const std::function<double(const std::string&)>& usage_of,
                               const std::function<Visit(const std::string&, const std::string&)>& visit) const {
  // A merge of the owners' queues: the head of each, ordered by (-priority, usage, seq).
  using Cursor = std::map<Key, std::string>::const_iterator;
  struct Head {
    int64_t neg_priority;
    double usage;
    uint64_t seq;
    size_t owner;
    bool operator>(const Head& o) const {
      return std::tie(neg_priority, usage, seq) > std::tie(o.neg_priority, o.usage, o.seq);
    }
  };
  std::vector<std::pair<Cursor, Cursor>> cursors;
  std::vector<const std::string*> owners;
  std::vector<double> usage;
  std::priority_queue<Head, std::vector<Head>, std::greater<>> heads;
  for (const auto& [owner, queued] : by_owner_) {
    cursors.emplace_back(queued.jobs.begin(), queued.jobs.end());
    owners.push_back(&owner);
    usage.push_back(usage_of(owner));
    heads.push({queued.jobs.begin()->first.first, usage.back(), queued.jobs.begin()->first.second, cursors.size() - 1});
  }
  while (!heads.empty()) {
    const Head head = heads.top();
    heads.pop();
    auto& [at, end] = cursors[head.owner];
    const Visit next = visit(*owners[head.owner], at->second);
    if (next == Visit::kStop) return;
    if (next == Visit::kSkipOwner) continue;
    if (++at != end) heads.push({at->first.first, usage[head.owner], at->first.second, head.owner});
  }
}

}  // namespace ag::sched
