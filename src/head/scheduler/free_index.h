// The scheduler's index of nodes by what they have free (internal to scheduler.cc).
//
// A pass on a large cluster would otherwise weigh every node for every job. Nodes are
// grouped by their free amount: a cluster of alike nodes has a few dozen distinct
// amounts however many nodes it has, so a pack job without constraints weighs each
// amount once and then takes the lowest-numbered nodes of the amounts it chose.
//
// Nodes are numbered as a pass numbers them (sorted by node id). A node moves between
// groups in either direction: a pass's placements and reservations take from it, and
// the kept nodes (NodeBase) give it back after the pass and follow its changes between
// passes, so the index is made once and kept, not made per pass. A group holds its
// members in order and goes once it has none.
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

  // Empties the index for nodes 0 .. num_nodes-1; call add() for each of them, in
  // order, then use it. With fewer than kMinNodes nodes it stays disabled and every
  // call is a no-op.
  void reset(size_t num_nodes);
  void add(size_t node, const Resources& free);

  bool enabled() const { return enabled_; }

  // Node `node` has `free` now (more or less than before).
  void set(size_t node, const Resources& free);

  // Where a pack job of `num_tasks` tasks of `need` goes, exactly as the pack policy
  // over every node would choose: the node with the fewest slots that still holds the
  // whole gang (then the lowest number); else nodes by most slots first (then lowest
  // number). Empty when all nodes together do not hold the gang now. `need` must ask
  // for something.
  std::vector<Assignment> pack(const Resources& need, int64_t num_tasks) const;

 private:
  struct Group {
    Resources free;
    std::set<size_t> members;
  };
  using Key = std::tuple<int64_t, int64_t, int64_t>;
  static Key key(const Resources& r) { return {r.cpu_millis, r.memory_bytes, r.gpus}; }
  Group& group_for(const Resources& free);

  bool enabled_ = false;
  std::map<Key, Group> groups_;        // none empty
  std::vector<Group*> group_of_node_;  // into groups_ (a map's elements stay put)
  Group* last_group_ = nullptr;        // add() is mostly called with the previous node's amount
};

}  // namespace ag::sched::detail
