// Preemption in the pure scheduler (preemption.h): which lower-priority jobs a blocked
// gang stops, and that the set is the cheapest that makes room (checked against every
// subset on random small clusters) and never holds a needless victim.
#include "head/scheduler/preemption.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <tuple>

#include "scheduler/scheduler_fixtures.h"

namespace ag::sched {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::find_pending;
using testing::make_job;
using testing::make_node;

// A running job holding `gpus` GPUs (ids `gpu_ids`) and `cpus` CPUs on one node.
RunningJob running_on(std::string id, const std::string& node, std::vector<int> gpu_ids, double cpus, int priority,
                      int64_t started_ms) {
  RunningJob job;
  job.job_id = std::move(id);
  job.priority = priority;
  job.started_ms = started_ms;
  RunningJob::Task task;
  task.node_id = node;
  task.held = {testing::cpu_millis(cpus), 0, static_cast<int64_t>(gpu_ids.size())};
  task.gpu_ids = std::move(gpu_ids);
  job.tasks.push_back(std::move(task));
  return job;
}

// A node with what `running` holds on it taken off.
NodeView minus(NodeView node, const std::vector<RunningJob>& running) {
  for (const auto& job : running) {
    for (const auto& task : job.tasks) {
      if (task.node_id != node.node_id) continue;
      node.free -= task.held;
      for (int g : task.gpu_ids) std::erase(node.free_gpu_ids, g);
    }
  }
  node.free.gpus = static_cast<int64_t>(node.free_gpu_ids.size());
  return node;
}

PendingJob urgent(PendingJob job, int priority = 100) {
  job.priority = priority;
  job.may_preempt = true;
  return job;
}

TEST(PreemptionTest, FewestGpusThenTheYoungestJob) {
  const std::vector<RunningJob> running{running_on("big", "n1", {0, 1, 2, 3}, 1, 0, 1000),
                                        running_on("old", "n1", {4, 5}, 1, 0, 2000),
                                        running_on("young", "n1", {6, 7}, 1, 0, 9000)};
  const std::vector<NodeView> nodes{minus(make_node("n1", 16, 8), running)};
  auto victims = choose_victims(nodes, urgent(make_job("p", 1, 1, 2)), running, 10000);
  ASSERT_TRUE(victims);
  EXPECT_THAT(*victims, ElementsAre("young"));
  // Four GPUs: the one job holding four costs as many GPUs as the two jobs of two, and
  // fewer CPUs than both of those together.
  victims = choose_victims(nodes, urgent(make_job("p", 1, 1, 4)), running, 10000);
  ASSERT_TRUE(victims);
  EXPECT_THAT(*victims, ElementsAre("big"));
}

TEST(PreemptionTest, NeverAJobOfEqualOrHigherPriorityNorOneThatOptedOut) {
  std::vector<RunningJob> running{running_on("same", "n1", {0, 1}, 1, 100, 0),
                                  running_on("kept", "n1", {2, 3}, 1, 0, 0)};
  running[1].preemptible = false;
  const std::vector<NodeView> nodes{minus(make_node("n1", 16, 4), running)};
  EXPECT_FALSE(choose_victims(nodes, urgent(make_job("p", 1, 1, 2)), running, 10));
  // Through a pass: it waits as any blocked job, and nobody is preempted.
  Plan plan = schedule(nodes, {urgent(make_job("p", 1, 1, 2))}, PassInput{{}, {}, {}, running, 10});
  EXPECT_TRUE(plan.preemptions.empty());
  EXPECT_EQ(find_pending(plan, "p")->kind, PendingKind::kWaitingForResources);
}

TEST(PreemptionTest, AJobWhoseQueueDoesNotAllowItPreemptsNobody) {
  const std::vector<RunningJob> running{running_on("low", "n1", {0, 1}, 1, 0, 0)};
  const std::vector<NodeView> nodes{minus(make_node("n1", 16, 2), running)};
  PendingJob job = urgent(make_job("p", 1, 1, 2));
  job.may_preempt = false;
  Plan plan = schedule(nodes, {job}, PassInput{{}, {}, {}, running, 10});
  EXPECT_TRUE(plan.preemptions.empty());
}

TEST(PreemptionTest, ThePassNamesVictimsAndReservesWhatTheyFree) {
  const std::vector<RunningJob> running{running_on("low", "n1", {0, 1}, 1, 0, 0)};
  const std::vector<NodeView> nodes{minus(make_node("n1", 16, 2), running)};
  // A small job behind must not take the GPUs the preemptor waits for.
  Plan plan = schedule(nodes, {urgent(make_job("p", 1, 1, 2)), make_job("small", 1, 1, 1)},
                       PassInput{{}, {}, {}, running, 10});
  ASSERT_EQ(plan.preemptions.size(), 1u);
  EXPECT_EQ(plan.preemptions[0].job_id, "p");
  EXPECT_THAT(plan.preemptions[0].victims, ElementsAre("low"));
  EXPECT_EQ(find_pending(plan, "p")->kind, PendingKind::kPreempting);
  EXPECT_THAT(find_pending(plan, "p")->reason, HasSubstr("preempting low (lower priority than 100)"));
  EXPECT_NE(find_pending(plan, "small"), nullptr);
}

TEST(PreemptionTest, JobsStoppingAlreadyAreWaitedForNotJoinedByMore) {
  std::vector<RunningJob> running{running_on("stopping", "n1", {0, 1}, 1, 0, 0),
                                  running_on("other", "n1", {2, 3}, 1, 0, 0)};
  running[0].stopping = true;
  const std::vector<NodeView> nodes{minus(make_node("n1", 16, 4), running)};
  Plan plan = schedule(nodes, {urgent(make_job("p", 1, 1, 2))}, PassInput{{}, {}, {}, running, 10});
  EXPECT_TRUE(plan.preemptions.empty());
  EXPECT_EQ(find_pending(plan, "p")->kind, PendingKind::kPreempting);
  EXPECT_THAT(find_pending(plan, "p")->reason, HasSubstr("jobs stopping now will free it"));
}

TEST(PreemptionTest, OnlyTheFirstBlockedJobPreempts) {
  const std::vector<RunningJob> running{running_on("low", "n1", {0, 1}, 1, 0, 0)};
  const std::vector<NodeView> nodes{minus(make_node("n1", 16, 2), running), make_node("n2", 16, 0)};
  // "first" cannot run anywhere while n1's GPUs are held, but its queue does not preempt.
  PendingJob first = make_job("first", 1, 1, 2);
  first.priority = 200;
  Plan plan = schedule(nodes, {first, urgent(make_job("second", 1, 1, 2))}, PassInput{{}, {}, {}, running, 10});
  EXPECT_TRUE(plan.preemptions.empty());
}

TEST(PreemptionTest, OnlyNodesTheGangCanUseCount) {
  std::vector<NodeView> nodes{make_node("a100", 16, 2), make_node("t4", 16, 2)};
  nodes[0].labels["gpu"] = "a100";
  nodes[1].labels["gpu"] = "t4";
  const std::vector<RunningJob> running{running_on("on-t4", "t4", {0, 1}, 1, 0, 0),
                                        running_on("on-a100", "a100", {0, 1}, 1, 0, 0)};
  for (auto& node : nodes) node = minus(node, running);
  PendingJob job = urgent(make_job("p", 1, 1, 2));
  job.constraints["gpu"] = "a100";
  auto victims = choose_victims(nodes, job, running, 10);
  ASSERT_TRUE(victims);
  EXPECT_THAT(*victims, ElementsAre("on-a100"));
}

TEST(PreemptionTest, AGangAcrossNodesStopsJobsOnEach) {
  std::vector<RunningJob> running{running_on("x", "n1", {0, 1}, 1, 0, 5), running_on("y", "n2", {0, 1}, 1, 0, 6)};
  std::vector<NodeView> nodes{minus(make_node("n1", 16, 2), running), minus(make_node("n2", 16, 2), running)};
  auto victims = choose_victims(nodes, urgent(make_job("p", 2, 1, 2, 0, PlacementPolicy::kSpread)), running, 10);
  ASSERT_TRUE(victims);
  EXPECT_THAT(*victims, ::testing::UnorderedElementsAre("x", "y"));
}

// The oracle: whether the job fits with `freed` stopped, and what a set costs.
bool fits_with(std::vector<NodeView> nodes, const std::vector<RunningJob>& freed, PendingJob job) {
  for (auto& node : nodes) {
    for (const auto& other : freed) {
      for (const auto& task : other.tasks) {
        if (task.node_id != node.node_id) continue;
        node.free += task.held;
        node.free_gpu_ids.insert(node.free_gpu_ids.end(), task.gpu_ids.begin(), task.gpu_ids.end());
      }
    }
    node.free.gpus = static_cast<int64_t>(node.free_gpu_ids.size());
  }
  job.may_preempt = false;
  return !schedule(nodes, {job}).placements.empty();
}

std::tuple<int64_t, int64_t, int64_t, size_t> cost(const std::vector<RunningJob>& set, int64_t now) {
  int64_t gpus = 0, cpus = 0, lost = 0;
  for (const auto& job : set) {
    for (const auto& task : job.tasks) {
      gpus += task.held.gpus;
      cpus += task.held.cpu_millis;
    }
    lost += now - job.started_ms;
  }
  return {gpus, cpus, lost, set.size()};
}

// Random clusters of 1-4 nodes of 8 GPUs, filled by jobs of 1-4 GPUs with priorities
// 0-2; a gang of priority 3 needing 1-3 tasks of 1-8 GPUs. The victims choose_victims
// names make room, and no set of candidates that costs less does.
TEST(PreemptionTest, VictimSetsAreTheCheapestThatMakeRoomOnRandomClusters) {
  std::mt19937 rng(1234);
  int preempted = 0;
  for (int round = 0; round < 400; ++round) {
    const int node_count = 1 + static_cast<int>(rng() % 4);
    std::vector<NodeView> nodes;
    std::vector<RunningJob> running;
    for (int n = 0; n < node_count; ++n) {
      const std::string id = "n" + std::to_string(n);
      nodes.push_back(make_node(id, 64, 8));
      int next_gpu = 0;
      while (next_gpu < 8 && rng() % 5 != 0) {
        const int gpus = std::min(8 - next_gpu, 1 + static_cast<int>(rng() % 4));
        std::vector<int> ids;
        for (int g = 0; g < gpus; ++g) ids.push_back(next_gpu++);
        running.push_back(running_on("j" + std::to_string(running.size()), id, ids, 1 + rng() % 4,
                                     static_cast<int>(rng() % 3), static_cast<int64_t>(rng() % 1000)));
        if (rng() % 8 == 0) running.back().preemptible = false;
      }
    }
    for (auto& node : nodes) node = minus(node, running);
    const PendingJob job = urgent(make_job("p", 1 + static_cast<int>(rng() % 3), 1, 1 + static_cast<int64_t>(rng() % 8)), 3);
    const int64_t now = 1000;
    auto victims = choose_victims(nodes, job, running, now);

    std::vector<RunningJob> candidates;
    for (const auto& other : running) {
      if (other.preemptible && other.priority < job.priority) candidates.push_back(other);
    }
    if (!victims) {
      EXPECT_FALSE(fits_with(nodes, candidates, job)) << "round " << round;
      continue;
    }
    std::vector<RunningJob> chosen;
    for (const auto& id : *victims) {
      for (const auto& other : running) {
        if (other.job_id == id) chosen.push_back(other);
      }
    }
    ASSERT_EQ(chosen.size(), victims->size());
    for (const auto& other : chosen) {
      EXPECT_TRUE(other.preemptible && other.priority < job.priority) << other.job_id;
    }
    if (fits_with(nodes, {}, job)) {
      EXPECT_TRUE(victims->empty()) << "round " << round;
      continue;
    }
    ++preempted;
    ASSERT_TRUE(fits_with(nodes, chosen, job)) << "round " << round;
    // No needless victim.
    for (size_t i = 0; i < chosen.size(); ++i) {
      std::vector<RunningJob> without = chosen;
      without.erase(without.begin() + static_cast<std::ptrdiff_t>(i));
      EXPECT_FALSE(fits_with(nodes, without, job)) << "round " << round << ": " << chosen[i].job_id << " was needless";
    }
    // No cheaper set (every subset, when few enough to weigh them all).
    if (candidates.size() > kExactCandidates) continue;
    const auto best = cost(chosen, now);
    for (uint32_t mask = 1; mask < (uint32_t{1} << candidates.size()); ++mask) {
      std::vector<RunningJob> set;
      for (size_t i = 0; i < candidates.size(); ++i) {
        if (mask & (uint32_t{1} << i)) set.push_back(candidates[i]);
      }
      if (cost(set, now) < best) {
        EXPECT_FALSE(fits_with(nodes, set, job)) << "round " << round << ": a cheaper set fits";
      }
    }
  }
  EXPECT_GT(preempted, 50);  // the rounds did exercise preemption
}

}  // namespace
}  // namespace ag::sched
