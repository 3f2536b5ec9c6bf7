// Fixture builders for scheduler tests: short ways to make nodes and jobs, and a
// checker that a plan never hands out more than the nodes had free.
#pragma once

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "head/scheduler/scheduler.h"

namespace ag::sched::testing {

inline constexpr int64_t kGiB = int64_t{1} << 30;

inline int64_t cpu_millis(double cpus) { return std::llround(cpus * 1000.0); }

// An idle, schedulable node: everything it has is free, GPUs numbered 0..gpus-1.
inline NodeView make_node(std::string id, double cpus = 16, int64_t gpus = 0,
                          int64_t memory_gib = 64) {
  NodeView node;
  node.node_id = std::move(id);
  node.total = {cpu_millis(cpus), memory_gib * kGiB, gpus};
  node.free = node.total;
  for (int i = 0; i < gpus; ++i) node.free_gpu_ids.push_back(i);
  return node;
}

// Marks GPUs as held by running tasks, keeping free.gpus and free_gpu_ids in step.
inline NodeView with_busy_gpus(NodeView node, const std::set<int>& busy) {
  std::erase_if(node.free_gpu_ids, [&](int id) { return busy.count(id) > 0; });
  node.free.gpus = static_cast<int64_t>(node.free_gpu_ids.size());
  return node;
}

inline NodeView with_busy_cpus(NodeView node, double cpus) {
  node.free.cpu_millis -= cpu_millis(cpus);
  return node;
}

inline NodeView unschedulable(NodeView node) {
  node.schedulable = false;
  return node;
}

inline PendingJob make_job(std::string id, int num_tasks, double cpus, int64_t gpus = 0,
                           int64_t memory_bytes = 0,
                           PlacementPolicy policy = PlacementPolicy::kPack) {
  PendingJob job;
  job.job_id = std::move(id);
  job.num_tasks = num_tasks;
  job.per_task = {cpu_millis(cpus), memory_bytes, gpus};
  job.policy = policy;
  return job;
}

inline PendingJob spread(PendingJob job) {
  job.policy = PlacementPolicy::kSpread;
  return job;
}

// Finds a job's placement or pending reason in a plan; nullptr when absent.
inline const JobPlacement* find_placement(const Plan& plan, const std::string& job_id) {
  for (const auto& p : plan.placements) {
    if (p.job_id == job_id) return &p;
  }
  return nullptr;
}
inline const PendingReason* find_pending(const Plan& plan, const std::string& job_id) {
  for (const auto& p : plan.pending) {
    if (p.job_id == job_id) return &p;
  }
  return nullptr;
}

// The node of each task, in task order: {"a", "a", "b"}.
inline std::vector<std::string> task_nodes(const JobPlacement& placement) {
  std::vector<std::string> out;
  for (const auto& task : placement.tasks) out.push_back(task.node_id);
  return out;
}

// Checks the invariants every plan must keep: each job is placed or pending exactly
// once, placed gangs are whole, no node gives out more than it had free, and every
// GPU index is one the node listed as free and goes to exactly one task.
inline void expect_plan_respects_capacity(const std::vector<NodeView>& nodes,
                                          const std::vector<PendingJob>& queue, const Plan& plan) {
  std::map<std::string, const NodeView*> by_id;
  for (const auto& node : nodes) by_id[node.node_id] = &node;
  std::map<std::string, const PendingJob*> jobs;
  for (const auto& job : queue) jobs[job.job_id] = &job;

  std::map<std::string, int> seen;
  for (const auto& p : plan.placements) ++seen[p.job_id];
  for (const auto& p : plan.pending) ++seen[p.job_id];
  for (const auto& job : queue) EXPECT_EQ(seen[job.job_id], 1) << job.job_id;

  std::map<std::string, Resources> used;
  std::map<std::string, std::set<int>> gpus_given;
  for (const auto& placement : plan.placements) {
    const PendingJob& job = *jobs.at(placement.job_id);
    ASSERT_EQ(placement.tasks.size(), static_cast<size_t>(job.num_tasks)) << job.job_id;
    for (const auto& task : placement.tasks) {
      ASSERT_TRUE(by_id.count(task.node_id)) << task.node_id;
      const NodeView& node = *by_id.at(task.node_id);
      EXPECT_TRUE(node.schedulable) << task.node_id;
      used[task.node_id] += job.per_task;
      ASSERT_EQ(task.gpu_ids.size(), static_cast<size_t>(job.per_task.gpus));
      EXPECT_TRUE(std::is_sorted(task.gpu_ids.begin(), task.gpu_ids.end()));
      for (int gpu : task.gpu_ids) {
        EXPECT_TRUE(gpus_given[task.node_id].insert(gpu).second)
            << "GPU " << gpu << " on " << task.node_id << " given twice";
        EXPECT_NE(std::find(node.free_gpu_ids.begin(), node.free_gpu_ids.end(), gpu),
                  node.free_gpu_ids.end())
            << "GPU " << gpu << " on " << task.node_id << " was not free";
      }
    }
  }
  for (const auto& [node_id, amount] : used) {
    EXPECT_TRUE(by_id.at(node_id)->free.fits(amount)) << node_id << " over-committed";
  }
}

}  // namespace ag::sched::testing
