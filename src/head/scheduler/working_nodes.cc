#include "head/scheduler/working_nodes.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <utility>

namespace ag::sched {
namespace detail {

Resources clamp_at_zero(Resources r) {
  r.cpu_millis = std::max<int64_t>(r.cpu_millis, 0);
  r.memory_bytes = std::max<int64_t>(r.memory_bytes, 0);
  r.gpus = std::max<int64_t>(r.gpus, 0);
  return r;
}

std::vector<const NodeView*> pointers_to(const std::vector<NodeView>& nodes) {
  std::vector<const NodeView*> out;
  out.reserve(nodes.size());
  for (const NodeView& view : nodes) out.push_back(&view);
  return out;
}

WorkingNode make_working_node(const NodeView& view) {
  WorkingNode node;
  node.view = &view;
  const std::vector<int>& ids = view.free_gpu_ids;
  if (std::adjacent_find(ids.begin(), ids.end(), std::greater_equal<int>()) != ids.end()) {
    node.sorted_gpu_ids = ids;
    std::sort(node.sorted_gpu_ids.begin(), node.sorted_gpu_ids.end());
    node.sorted_gpu_ids.erase(std::unique(node.sorted_gpu_ids.begin(), node.sorted_gpu_ids.end()),
                              node.sorted_gpu_ids.end());
  }
  // A GPU counts as free only when the node also names its index; otherwise we could
  // promise a task a device we cannot hand out.
  Resources free = clamp_at_zero(view.free);
  free.gpus = std::min<int64_t>(free.gpus, static_cast<int64_t>(node.num_free_gpu_ids()));
  node.unreserved_free = free;
  node.free = free;
  const Resources total = clamp_at_zero(view.total);
  node.capacity = {std::max(total.cpu_millis, free.cpu_millis), std::max(total.memory_bytes, free.memory_bytes),
                   std::max(total.gpus, free.gpus)};
  return node;
}

std::vector<WorkingNode> make_working_nodes(const std::vector<const NodeView*>& nodes) {
  std::vector<WorkingNode> working;
  working.reserve(nodes.size());
  for (const NodeView* view : nodes) {
    if (view->schedulable) working.push_back(make_working_node(*view));
  }
  // Sorting once by node_id makes every later tie-break "lowest index first", and makes
  // the plan independent of the order in which the caller listed its nodes (the head's
  // come sorted: only the check is paid, and only when its kept nodes are made again).
  const auto by_id = [](const WorkingNode& a, const WorkingNode& b) { return a.view->node_id < b.view->node_id; };
  if (!std::is_sorted(working.begin(), working.end(), by_id)) std::sort(working.begin(), working.end(), by_id);
  return working;
}

// Infeasibility is judged against the cluster as it is, not as a pass has filled it:
// the largest is taken before the pass (and kept by NodeBase between passes).
Resources largest_node(const std::vector<WorkingNode>& nodes) {
  Resources largest;
  for (const WorkingNode& node : nodes) {
    largest.cpu_millis = std::max(largest.cpu_millis, node.capacity.cpu_millis);
    largest.memory_bytes = std::max(largest.memory_bytes, node.capacity.memory_bytes);
    largest.gpus = std::max(largest.gpus, node.capacity.gpus);
  }
  return largest;
}

void index_all(FreeIndex& index, const std::vector<WorkingNode>& working) {
  index.reset(working.size());
  for (size_t i = 0; i < working.size(); ++i) index.add(i, working[i].free);
}

}  // namespace detail

using detail::FreeIndex;
using detail::largest_node;
using detail::make_working_node;

NodeBase::NodeBase() : index_(std::make_unique<FreeIndex>()) {}
NodeBase::~NodeBase() = default;
NodeBase::NodeBase(NodeBase&&) noexcept = default;
NodeBase& NodeBase::operator=(NodeBase&&) noexcept = default;

void NodeBase::reset(std::vector<const NodeView*> views) {
  views_ = std::move(views);
  stale_ = true;
}

void NodeBase::changed(const NodeView& view) {
  if (stale_) return;
  auto it = position_.find(&view);
  // A node set aside or back: the pass's nodes are others (rare: drains, health, death).
  if ((it != position_.end()) != view.schedulable) {
    stale_ = true;
    return;
  }
  if (it != position_.end()) remake(it->second);
}

void NodeBase::remake(size_t i) const {
  const Resources before = nodes_[i].capacity;
  nodes_[i] = make_working_node(*nodes_[i].view);
  index_->set(i, nodes_[i].free);
  // The largest capacity follows a node that grew; one that shrank may have been the
  // largest, and then the next pass looks at every node again.
  const Resources& after = nodes_[i].capacity;
  const auto shrank_from_largest = [](int64_t was, int64_t is, int64_t largest) { return is < was && was == largest; };
  if (shrank_from_largest(before.cpu_millis, after.cpu_millis, largest_.cpu_millis) ||
      shrank_from_largest(before.memory_bytes, after.memory_bytes, largest_.memory_bytes) ||
      shrank_from_largest(before.gpus, after.gpus, largest_.gpus)) {
    largest_stale_ = true;
  }
  largest_ = {std::max(largest_.cpu_millis, after.cpu_millis), std::max(largest_.memory_bytes, after.memory_bytes),
              std::max(largest_.gpus, after.gpus)};
}

void NodeBase::rebuild() const {
  nodes_ = detail::make_working_nodes(views_);
  position_.clear();
  position_.reserve(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) position_.emplace(nodes_[i].view, i);
  detail::index_all(*index_, nodes_);
  largest_ = largest_node(nodes_);
  largest_stale_ = false;
  stale_ = false;
}

}  // namespace ag::sched
