// The scheduler's index of nodes by what they have free (internal to scheduler.cc).
//
// A pass on a large cluster would otherwise weigh every node for every job. Nodes are
// grouped by their free amount: a cluster of alike nodes has a few dozen distinct
// amounts however many nodes it has, so a pack job without constraints weighs each
// amount once and then takes the lowest-numbered nodes of the amounts it chose.
//
// Nodes are numbered as the pass numbers them (sorted by node id). Within one pass a
// node's free amount only shrinks (placements and reservations take from it), so a node
// never returns to a group it has left: members leave a group lazily, by no longer
// naming it as theirs, and the group's sorted member list is never rebuilt.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "common/resources.h"

namespace ag::sched::detail {

// How many tasks needing `need` fit into `avail`: the minimum over the dimensions the
// task asks for. A task that asks for nothing fits without limit, so the caller passes
// the count to report then (the job's num_tasks is enough to place the whole gang).
int64_t slots_in(const Resources& avail, const Resources& need, int64_t when_no_demand);

// How many tasks of one job a node takes, in the order the policy chose the nodes.
struct Assignment {
  size_t node = 0;  // the pass's node number (nodes sorted by node_id)
  int64_t tasks = 0;
};

class FreeIndex {
 public:
  // Below this many nodes a scan costs less than keeping the index.
  static constexpr size_t kMinNodes = 512;

  // Call add() for nodes 0, 1, 2, ... in order, then use the index; with fewer than
  // kMinNodes nodes it stays disabled and every call is a no-op.
  explicit FreeIndex(size_t num_nodes);
  void add(size_t node, const Resources& free);

  bool enabled() const { return enabled_; }

  // Node `node`'s free amount went from `before` to `after` (never up: see above).
  void moved(size_t node, const Resources& before, const Resources& after);

  // Where a pack job of `num_tasks` tasks of `need` goes, exactly as the pack policy
  // over every node would choose: the node with the fewest slots that still holds the
  // whole gang (then the lowest number); else nodes by most slots first (then lowest
  // number). Empty when all nodes together do not hold the gang now. `need` must ask
  // for something.
  std::vector<Assignment> pack(const Resources& need, int64_t num_tasks);

 private:
  struct Group {
    Resources free;
    std::vector<size_t> members;  // ascending; some may have left (see group_of_node_)
    size_t front = 0;             // members before it have all left
    std::set<size_t> arrivals;    // joined during the pass; erased when they leave
    size_t live = 0;
  };
  using Key = std::tuple<int64_t, int64_t, int64_t>;
  static Key key(const Resources& r) { return {r.cpu_millis, r.memory_bytes, r.gpus}; }
  uint32_t group_for(const Resources& free);
  // The up to `count` lowest-numbered nodes still in group `g`, ascending.
  std::vector<size_t> lowest(uint32_t g, size_t count);

  bool enabled_ = false;
  std::vector<Group> groups_;
  std::map<Key, uint32_t> group_of_key_;
  std::vector<uint32_t> group_of_node_;
  uint32_t last_group_ = 0;  // add() is mostly called with the previous node's amount
};

}  // namespace ag::sched::detail
