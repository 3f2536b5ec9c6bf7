#include "head/scheduler/free_index.h"

#include <algorithm>
#include <optional>
#include <utility>

namespace ag::sched::detail {

int64_t slots_in(const Resources& avail, const Resources& need, int64_t when_no_demand) {
  if (need.cpu_millis == 0 && need.memory_bytes == 0 && need.gpus == 0) return when_no_demand;
  int64_t slots = INT64_MAX;
  const auto bound = [&slots](int64_t have, int64_t want) {
    if (want > 0) slots = std::min(slots, std::max<int64_t>(have, 0) / want);
  };
  bound(avail.cpu_millis, need.cpu_millis);
  bound(avail.memory_bytes, need.memory_bytes);
  bound(avail.gpus, need.gpus);
  return slots;
}

void FreeIndex::reset(size_t num_nodes) {
  enabled_ = num_nodes >= kMinNodes;
  groups_.clear();
  group_of_node_.assign(enabled_ ? num_nodes : 0, nullptr);
  last_group_ = nullptr;
}

FreeIndex::Group& FreeIndex::group_for(const Resources& free) {
  if (last_group_ != nullptr && last_group_->free == free) return *last_group_;
  auto [it, added] = groups_.try_emplace(key(free));
  if (added) it->second.free = free;
  last_group_ = &it->second;
  return it->second;
}

void FreeIndex::add(size_t node, const Resources& free) {
  if (!enabled_) return;
  Group& group = group_for(free);
  group.members.insert(group.members.end(), node);  // in order: no search
  group_of_node_[node] = &group;
}

void FreeIndex::set(size_t node, const Resources& free) {
  if (!enabled_) return;
  Group* from = group_of_node_[node];
  if (from->free == free) return;
  from->members.erase(node);
  if (from->members.empty()) {
    if (last_group_ == from) last_group_ = nullptr;
    groups_.erase(key(from->free));
  }
  Group& to = group_for(free);
  to.members.insert(node);
  group_of_node_[node] = &to;
}

std::vector<Assignment> FreeIndex::pack(const Resources& need, int64_t num_tasks) const {
  // One node that holds the whole gang: the fewest slots, then the lowest number.
  std::optional<std::pair<int64_t, size_t>> single;
  struct Level {
    int64_t slots;
    const Group* group;
  };
  std::vector<Level> levels;  // groups that hold part of the gang
  int64_t total = 0;
  for (const auto& [key, group] : groups_) {
    const int64_t slots = slots_in(group.free, need, num_tasks);
    if (slots < 1) continue;
    if (slots >= num_tasks) {
      const std::pair<int64_t, size_t> here{slots, *group.members.begin()};
      if (!single || here < *single) single = here;
      continue;
    }
    levels.push_back({slots, &group});
    total = std::min(total + slots * static_cast<int64_t>(group.members.size()), num_tasks);
  }
  if (single) return {{single->second, num_tasks}};
  if (total < num_tasks) return {};
  // Most slots first; among nodes with as many, the lowest numbers, whatever group.
  std::sort(levels.begin(), levels.end(), [](const Level& a, const Level& b) { return a.slots > b.slots; });
  std::vector<Assignment> chosen;
  int64_t remaining = num_tasks;
  for (size_t i = 0; i < levels.size() && remaining > 0;) {
    const int64_t slots = levels[i].slots;
    const auto wanted = static_cast<size_t>((remaining + slots - 1) / slots);
    std::vector<size_t> nodes;
    for (; i < levels.size() && levels[i].slots == slots; ++i) {
      const std::set<size_t>& members = levels[i].group->members;
      auto it = members.begin();
      for (size_t k = 0; k < wanted && it != members.end(); ++k) nodes.push_back(*it++);
    }
    std::sort(nodes.begin(), nodes.end());
    for (size_t node : nodes) {
      if (remaining == 0) break;
      const int64_t take = std::min(slots, remaining);
      chosen.push_back({node, take});
      remaining -= take;
    }
  }
  return chosen;
}

}  // namespace ag::sched::detail
