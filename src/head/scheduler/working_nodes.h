// The nodes as a pass works on them (internal to the scheduler): each schedulable
// node's room made from its view, what the pass placed and reserved there, and the
// helpers that make them. scheduler.cc runs the pass over them; NodeBase (scheduler.h)
// keeps them between passes, implemented in working_nodes.cc.
//
// Each node carries three views of its resources:
//
//   unreserved_free  free now, minus what this pass has already placed on it
//   free             unreserved_free, minus what blocked jobs have reserved on it
//                    (clamped at zero); this is all a job may be placed on
//   reserved         the sum of reservations; total - reserved is the capacity
//                    later blocked jobs may still reserve
//
// Keeping `unreserved_free` apart from `free` is what lets a pending reason say
// whether a job waits for running tasks to finish or waits behind a reservation.
#pragma once

#include <cstddef>
#include <vector>

#include "common/resources.h"
#include "head/scheduler/free_index.h"
#include "head/scheduler/scheduler.h"

namespace ag::sched::detail {

struct WorkingNode {
  const NodeView* view = nullptr;
  Resources capacity;         // the node's total, never below what it reports free
  Resources unreserved_free;  // free now minus this pass's placements
  Resources free;             // unreserved_free minus reservations, clamped at zero
  Resources reserved;         // what blocked jobs of this pass reserved here
  int first_reserver = -1;    // queue index of the first job that reserved here
  // The free GPU indices, ascending and without duplicates: the view's own list (or a
  // sorted copy when it is not), less the first `gpus_taken`, which this pass handed
  // out. Not copied per node: a pass on a large cluster touches few nodes.
  std::vector<int> sorted_gpu_ids;  // the copy, when the view's list is not sorted
  size_t gpus_taken = 0;

  const std::vector<int>& all_gpu_ids() const { return sorted_gpu_ids.empty() ? view->free_gpu_ids : sorted_gpu_ids; }
  std::vector<int>::const_iterator first_free_gpu() const {
    return all_gpu_ids().begin() + static_cast<std::ptrdiff_t>(gpus_taken);
  }
  size_t num_free_gpu_ids() const { return all_gpu_ids().size() - gpus_taken; }
};

Resources clamp_at_zero(Resources r);
std::vector<const NodeView*> pointers_to(const std::vector<NodeView>& nodes);
// The node as a pass starts from it: all its free room, nothing placed or reserved.
WorkingNode make_working_node(const NodeView& view);
// The schedulable ones of `nodes`, sorted by node_id.
std::vector<WorkingNode> make_working_nodes(const std::vector<const NodeView*>& nodes);
// The largest total each dimension has on any one of `nodes`.
Resources largest_node(const std::vector<WorkingNode>& nodes);
// `index` made afresh over `working`, node i as working[i].
void index_all(FreeIndex& index, const std::vector<WorkingNode>& working);

}  // namespace ag::sched::detail
