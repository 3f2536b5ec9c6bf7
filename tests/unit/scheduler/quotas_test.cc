// Quotas in the pure scheduler (quotas.h): a job over its owner's or group's quota waits
// with the reason and holds nothing back; a simulated cluster never passes a quota.
#include "head/scheduler/quotas.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include "scheduler/scheduler_fixtures.h"

namespace ag::sched {
namespace {

using ::testing::HasSubstr;
using testing::make_job;
using testing::make_node;

PendingJob owned(PendingJob job, const std::string& owner) {
  job.owner = owner;
  return job;
}

Limits gpus(int64_t n) {
  Limits limits;
  limits.gpus = n;
  return limits;
}

const PendingReason* reason_for(const Plan& plan, const std::string& id) {
  for (const auto& r : plan.pending) {
    if (r.job_id == id) return &r;
  }
  return nullptr;
}

TEST(QuotaTest, AUserOverHerGpuQuotaWaitsAndHoldsNobodyBack) {
  QuotaPolicy policy;
  policy.users["alice"] = gpus(8);
  const std::vector<NodeView> nodes{make_node("n1", 64, 8), make_node("n2", 64, 8)};
  const std::vector<PendingJob> queue{owned(make_job("a1", 1, 1, 4), "alice"), owned(make_job("a2", 1, 1, 4), "alice"),
                                      owned(make_job("a3", 1, 1, 4), "alice"), owned(make_job("b1", 1, 1, 8), "bob")};
  const Plan plan = schedule(nodes, queue, policy, {});
  ASSERT_EQ(plan.placements.size(), 3u);
  EXPECT_EQ(plan.placements[2].job_id, "b1");  // behind alice's third job, and not held back by it
  const PendingReason* waiting = reason_for(plan, "a3");
  ASSERT_NE(waiting, nullptr);
  EXPECT_EQ(waiting->kind, PendingKind::kQuota);
  EXPECT_EQ(waiting->reason, "user alice holds 8 of the 8 GPUs its quota allows; this job needs 4");
}

TEST(QuotaTest, AQueueLimitsEachUserWithinItAndNowhereElse) {
  PassInput input;
  input.quotas.queue_users["gpu"] = gpus(4);
  input.queue_use[{"gpu", "alice"}].held.gpus = 2;  // running already
  const auto in_queue = [](PendingJob job, const std::string& queue) {
    job.queue = queue;
    return job;
  };
  const std::vector<NodeView> nodes{make_node("n1", 64, 8), make_node("n2", 64, 8)};
  const std::vector<PendingJob> queue{in_queue(owned(make_job("a1", 1, 1, 2), "alice"), "gpu"),
                                      in_queue(owned(make_job("a2", 1, 1, 2), "alice"), "gpu"),
                                      owned(make_job("a3", 1, 1, 2), "alice"),  // outside the queue
                                      in_queue(owned(make_job("b1", 1, 1, 4), "bob"), "gpu")};
  const Plan plan = schedule(nodes, queue, input);
  ASSERT_EQ(plan.placements.size(), 3u);
  EXPECT_EQ(reason_for(plan, "a2")->reason, "user alice in queue gpu holds 4 of the 4 GPUs its quota allows; this job needs 2");
}

TEST(QuotaTest, WhatRunningJobsHoldCountsAndSoDoesTheRunningJobLimit) {
  QuotaPolicy policy;
  Limits two_jobs;
  two_jobs.running_jobs = 2;
  policy.users["alice"] = two_jobs;
  std::map<std::string, Use> use;
  use["alice"].running_jobs = 1;
  const Plan plan = schedule({make_node("n1", 64)},
                             {owned(make_job("a1", 1, 1), "alice"), owned(make_job("a2", 1, 1), "alice")}, policy, use);
  ASSERT_EQ(plan.placements.size(), 1u);
  EXPECT_EQ(reason_for(plan, "a2")->reason, "user alice runs 2 of the 2 jobs its quota allows");
}

TEST(QuotaTest, AGroupQuotaCountsEveryMember) {
  QuotaPolicy policy;
  Limits cpus;
  cpus.cpu_millis = 10'000;
  policy.groups["vision"] = cpus;
  policy.groups_of["alice"] = {"vision"};
  policy.groups_of["bob"] = {"vision"};
  std::map<std::string, Use> use;
  use["alice"].held.cpu_millis = 6'000;
  const Plan plan = schedule({make_node("n1", 64)},
                             {owned(make_job("b1", 1, 4), "bob"), owned(make_job("b2", 1, 1), "bob"),
                              owned(make_job("c1", 1, 8), "carol")},
                             policy, use);
  ASSERT_EQ(plan.placements.size(), 2u);
  EXPECT_EQ(plan.placements[0].job_id, "b1");
  EXPECT_EQ(plan.placements[1].job_id, "c1");
  EXPECT_EQ(reason_for(plan, "b2")->reason,
            "group vision (of user bob) holds 10 of the 10 CPUs its quota allows; this job needs 1");
}

TEST(QuotaTest, APriorityCapIsTheLowestOfTheUsersAndHerGroups) {
  QuotaPolicy policy;
  EXPECT_FALSE(priority_cap(policy, "alice").has_value());
  Limits user_cap, group_cap;
  user_cap.max_priority = 100;
  group_cap.max_priority = 0;
  policy.users["alice"] = user_cap;
  EXPECT_EQ(priority_cap(policy, "alice")->max_priority, 100);
  EXPECT_EQ(priority_cap(policy, "alice")->whose, "user alice");
  policy.groups["interns"] = group_cap;
  policy.groups_of["alice"] = {"vision", "interns"};
  EXPECT_EQ(priority_cap(policy, "alice")->max_priority, 0);
  EXPECT_EQ(priority_cap(policy, "alice")->whose, "group interns");
  EXPECT_FALSE(priority_cap(policy, "bob").has_value());
  EXPECT_TRUE(user_cap.any());
}

TEST(QuotaTest, NoQuotaMeansNoLimit) {
  const Plan plan = schedule({make_node("n1", 64, 8)}, {owned(make_job("a1", 2, 1, 4), "alice")}, QuotaPolicy{}, {});
  EXPECT_EQ(plan.placements.size(), 1u);
}

PendingJob exclusive(PendingJob job) {
  job.exclusive = true;
  return job;
}

TEST(ExclusiveTest, AnExclusiveJobTakesIdleNodesWholeAndNobodySharesThem) {
  // n1 runs something; n2 and n3 are idle.
  std::vector<NodeView> nodes{testing::with_busy_cpus(make_node("n1", 16), 1), make_node("n2", 16), make_node("n3", 16)};
  const Plan plan = schedule(nodes, {exclusive(make_job("x", 1, 1)), make_job("small", 2, 1)});
  ASSERT_EQ(plan.placements.size(), 2u);
  EXPECT_EQ(plan.placements[0].tasks[0].node_id, "n2");  // not the busy n1
  for (const auto& task : plan.placements[1].tasks) EXPECT_NE(task.node_id, "n2") << "a job shared x's node";
}

TEST(ExclusiveTest, ABlockedExclusiveJobReservesWholeNodesAndSaysWhy) {
  std::vector<NodeView> nodes{testing::with_busy_cpus(make_node("n1", 16), 1), testing::with_busy_cpus(make_node("n2", 16), 1)};
  const Plan plan = schedule(nodes, {exclusive(make_job("x", 1, 1)), make_job("small", 1, 1)});
  ASSERT_EQ(plan.placements.size(), 1u);  // the small job fits beside the running tasks
  const PendingReason* waiting = reason_for(plan, "x");
  ASSERT_NE(waiting, nullptr);
  EXPECT_EQ(waiting->reason,
            "waiting for resources: needs 1 task of {1 CPU} on nodes of its own (--exclusive); 0 fit on idle nodes now");
  // The node it reserved gets nothing more: the small job went to the other one.
  const std::string reserved = plan.placements[0].tasks[0].node_id == "n1" ? "n2" : "n1";
  const Plan again = schedule(nodes, {exclusive(make_job("x", 1, 1)), make_job("a", 1, 1), make_job("b", 1, 1)});
  for (const auto& placement : again.placements) {
    for (const auto& task : placement.tasks) EXPECT_NE(task.node_id, reserved) << placement.job_id;
  }
}

// A simulated cluster under random arrivals and completions: after every pass each
// user holds no more than their quota, and the cluster goes on placing jobs.
TEST(QuotaTest, ASimulatedClusterNeverPassesAQuota) {
  std::mt19937 random(7);
  QuotaPolicy policy;
  const std::vector<std::string> users{"u0", "u1", "u2", "u3", "u4"};
  for (size_t i = 0; i < users.size(); ++i) policy.users[users[i]] = gpus(static_cast<int64_t>(4 + 4 * i));
  std::vector<NodeView> nodes;
  for (int i = 0; i < 16; ++i) nodes.push_back(make_node("n" + std::to_string(i), 64, 8));
  struct Running {
    PendingJob job;
    JobPlacement placement;
    int ends_at = 0;
  };
  std::vector<Running> running;
  std::vector<PendingJob> queue;
  int next_id = 0, started = 0;
  for (int step = 0; step < 2000; ++step) {
    for (int k = 0; k < 2; ++k) {
      PendingJob job = make_job("j" + std::to_string(next_id++), 1 + static_cast<int>(random() % 2), 1,
                                1 + static_cast<int64_t>(random() % 4));
      job.owner = users[random() % users.size()];
      queue.push_back(job);
    }
    // Finish what is due, giving its GPUs back.
    std::erase_if(running, [&](const Running& r) {
      if (r.ends_at > step) return false;
      for (const auto& task : r.placement.tasks) {
        for (auto& node : nodes) {
          if (node.node_id != task.node_id) continue;
          node.free += r.job.per_task;
          node.free_gpu_ids.insert(node.free_gpu_ids.end(), task.gpu_ids.begin(), task.gpu_ids.end());
        }
      }
      return true;
    });
    std::map<std::string, Use> use;
    for (const auto& r : running) {
      use[r.job.owner].held.gpus += r.job.per_task.gpus * r.job.num_tasks;
      ++use[r.job.owner].running_jobs;
    }
    const Plan plan = schedule(nodes, queue, policy, use);
    for (const auto& placement : plan.placements) {
      auto it = std::find_if(queue.begin(), queue.end(), [&](const PendingJob& j) { return j.job_id == placement.job_id; });
      ASSERT_NE(it, queue.end());
      for (const auto& task : placement.tasks) {
        for (auto& node : nodes) {
          if (node.node_id != task.node_id) continue;
          node.free -= it->per_task;
          std::erase_if(node.free_gpu_ids, [&](int g) { return std::count(task.gpu_ids.begin(), task.gpu_ids.end(), g) > 0; });
        }
      }
      use[it->owner].held.gpus += it->per_task.gpus * it->num_tasks;
      running.push_back({*it, placement, step + 1 + static_cast<int>(random() % 20)});
      queue.erase(it);
      ++started;
    }
    for (const auto& [user, held] : use) {
      ASSERT_LE(held.held.gpus, policy.users[user].gpus) << user << " at step " << step;
    }
    if (queue.size() > 200) queue.erase(queue.begin() + 100, queue.end());  // arrivals outpace the quotas
  }
  EXPECT_GT(started, 1000);
}

}  // namespace
}  // namespace ag::sched
