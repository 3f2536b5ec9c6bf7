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

FreeIndex::FreeIndex(size_t num_nodes) : enabled_(num_nodes >= kMinNodes) {
  if (enabled_) group_of_node_.resize(num_nodes);
}

uint32_t FreeIndex::group_for(const Resources& free) {
  if (!groups_.empty() && groups_[last_group_].free == free) return last_group_;
  auto [it, added] = group_of_key_.try_emplace(key(free), static_cast<uint32_t>(groups_.size()));
  if (added) groups_.push_back(Group{free, {}, 0, {}, 0});
  last_group_ = it->second;
  return it->second;
}

void FreeIndex::add(size_t node, const Resources& free) {
  if (!enabled_) return;
  const uint32_t g = group_for(free);
  groups_[g].members.push_back(node);
  ++groups_[g].live;
  group_of_node_[node] = g;
}

void FreeIndex::moved(size_t node, const Resources& before, const Resources& after) {
  if (!enabled_ || before == after) return;
  Group& from = groups_[group_of_node_[node]];
  --from.live;
  from.arrivals.erase(node);
  const uint32_t to = group_for(after);  // may grow groups_: `from` is not used after this
  groups_[to].arrivals.insert(node);
  ++groups_[to].live;
  group_of_node_[node] = to;
}

std::vector<size_t> FreeIndex::lowest(uint32_t g, size_t count) {
  Group& group = groups_[g];
  const auto still_here = [&](size_t node) { return group_of_node_[node] == g; };
  while (group.front < group.members.size() && !still_here(group.members[group.front])) ++group.front;
  std::vector<size_t> out;
  size_t k = group.front;
  auto arrival = group.arrivals.begin();
  while (out.size() < count) {
    while (k < group.members.size() && !still_here(group.members[k])) ++k;
    const bool member = k < group.members.size();
    const bool arrived = arrival != group.arrivals.end();
    if (!member && !arrived) break;
    if (member && (!arrived || group.members[k] < *arrival)) {
      out.push_back(group.members[k++]);
    } else {
      out.push_back(*arrival++);
    }
  }
  return out;
}

std::vector<Assignment> FreeIndex::pack(const Resources& need, int64_t num_tasks) {
  // One node that holds the whole gang: the fewest slots, then the lowest number.
  std::optional<std::pair<int64_t, size_t>> single;
  struct Level {
    int64_t slots;
    uint32_t group;
  };
  std::vector<Level> levels;  // groups that hold part of the gang
  int64_t total = 0;
  for (uint32_t g = 0; g < groups_.size(); ++g) {
    if (groups_[g].live == 0) continue;
    const int64_t slots = slots_in(groups_[g].free, need, num_tasks);
    if (slots < 1) continue;
    if (slots >= num_tasks) {
      const std::pair<int64_t, size_t> here{slots, lowest(g, 1).front()};
      if (!single || here < *single) single = here;
      continue;
    }
    levels.push_back({slots, g});
    total = std::min(total + slots * static_cast<int64_t>(groups_[g].live), num_tasks);
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
      const std::vector<size_t> some = lowest(levels[i].group, wanted);
      nodes.insert(nodes.end(), some.begin(), some.end());
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
