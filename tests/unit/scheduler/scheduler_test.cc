// Tests for the gang scheduler, through schedule() only.
#include "head/scheduler/scheduler.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "scheduler/scheduler_fixtures.h"

namespace ag::sched {
namespace {

using namespace ag::sched::testing;  // NOLINT: fixture builders keep tests short.
using Nodes = std::vector<std::string>;

// A plan written out in full, so two plans compare with one EXPECT_EQ.
std::string describe(const Plan& plan) {
  std::ostringstream out;
  for (const auto& p : plan.placements) {
    out << p.job_id << ":";
    for (const auto& t : p.tasks) {
      out << " " << t.node_id << "[";
      for (int gpu : t.gpu_ids) out << gpu << ",";
      out << "]";
    }
    out << "\n";
  }
  for (const auto& p : plan.pending)
    out << p.job_id << " pending " << p.infeasible() << " " << p.reason << "\n";
  return out.str();
}

// --- Gang all-or-nothing ---------------------------------------------------------

TEST(GangTest, GangLargerThanClusterPlacesNothingAndLeavesCapacityForLaterJobs) {
  const std::vector<NodeView> nodes = {make_node("a", 16, /*gpus=*/2)};
  const std::vector<PendingJob> queue = {make_job("big", 3, 1, /*gpus=*/1),
                                         make_job("small", 2, 1, /*gpus=*/1)};

  const Plan plan = schedule(nodes, queue);

  ASSERT_EQ(plan.placements.size(), 1u);
  EXPECT_EQ(plan.placements[0].job_id, "small");
  EXPECT_EQ(plan.placements[0].tasks.size(), 2u);
  ASSERT_NE(find_pending(plan, "big"), nullptr);
}

TEST(GangTest, FeasibleGangWithTooFewFreeSlotsIsNotPartiallyPlaced) {
  const std::vector<NodeView> nodes = {with_busy_gpus(make_node("a", 16, 4), {0, 1})};
  const std::vector<PendingJob> queue = {make_job("j", 3, 1, 1)};

  const Plan plan = schedule(nodes, queue);

  EXPECT_TRUE(plan.placements.empty());
  ASSERT_EQ(plan.pending.size(), 1u);
  EXPECT_FALSE(plan.pending[0].infeasible());
  EXPECT_EQ(plan.pending[0].reason,
            "waiting for resources: needs 3 tasks of {1 CPU, 1 GPU}; 2 fit on free capacity now");
}

// --- GPU index assignment --------------------------------------------------------

TEST(GpuIdsTest, TasksGetDistinctAscendingIdsFromFreeListWithHoles) {
  const std::vector<NodeView> nodes = {with_busy_gpus(make_node("a", 16, 4), {0, 2})};

  const Plan plan = schedule(nodes, {make_job("j", 2, 1, 1)});

  ASSERT_EQ(plan.placements.size(), 1u);
  EXPECT_EQ(plan.placements[0].tasks[0].gpu_ids, std::vector<int>({1}));
  EXPECT_EQ(plan.placements[0].tasks[1].gpu_ids, std::vector<int>({3}));
}

TEST(GpuIdsTest, MultiGpuTasksTakeLowestIdsInTaskOrder) {
  const std::vector<NodeView> nodes = {with_busy_gpus(make_node("a", 16, 8), {1, 3, 4, 6})};

  const Plan plan = schedule(nodes, {make_job("j", 2, 1, 2)});

  ASSERT_EQ(plan.placements.size(), 1u);
  EXPECT_EQ(plan.placements[0].tasks[0].gpu_ids, std::vector<int>({0, 2}));
  EXPECT_EQ(plan.placements[0].tasks[1].gpu_ids, std::vector<int>({5, 7}));
}

TEST(GpuIdsTest, LaterJobsInSamePassDoNotReuseIds) {
  const std::vector<NodeView> nodes = {make_node("a", 16, 4)};

  const Plan plan = schedule(nodes, {make_job("x", 1, 1, 1), make_job("y", 1, 1, 2)});

  ASSERT_EQ(plan.placements.size(), 2u);
  EXPECT_EQ(plan.placements[0].tasks[0].gpu_ids, std::vector<int>({0}));
  EXPECT_EQ(plan.placements[1].tasks[0].gpu_ids, std::vector<int>({1, 2}));
}

// --- Pack --------------------------------------------------------------------------

TEST(PackTest, WholeGangGoesOnOneNodeWhenOneCanHoldIt) {
  const std::vector<NodeView> nodes = {make_node("a", 64, 2), make_node("b", 64, 8),
                                       make_node("c", 64, 4)};

  const Plan plan = schedule(nodes, {make_job("j", 6, 1, 1)});

  ASSERT_EQ(plan.placements.size(), 1u);
  EXPECT_EQ(task_nodes(plan.placements[0]), Nodes(6, "b"));
}

TEST(PackTest, ChoosesBestFitAmongNodesThatHoldTheGang) {
  const std::vector<NodeView> nodes = {make_node("a", 64, 8), make_node("b", 64, 4),
                                       make_node("c", 64, 2)};

  const Plan plan = schedule(nodes, {make_job("j", 3, 1, 1)});

  ASSERT_EQ(plan.placements.size(), 1u);
  EXPECT_EQ(task_nodes(plan.placements[0]), Nodes(3, "b"));
}

TEST(PackTest, BestFitTieGoesToLowestNodeId) {
  const std::vector<NodeView> nodes = {make_node("b", 64, 4), make_node("a", 64, 4)};

  const Plan plan = schedule(nodes, {make_job("j", 2, 1, 1)});

  ASSERT_EQ(plan.placements.size(), 1u);
  EXPECT_EQ(task_nodes(plan.placements[0]), Nodes(2, "a"));
}

TEST(PackTest, UsesFewestNodesWhenNoSingleNodeFits) {
  const std::vector<NodeView> nodes = {make_node("a", 64, 2), make_node("b", 64, 4),
                                       make_node("c", 64, 4), make_node("d", 64, 3)};

  const Plan plan = schedule(nodes, {make_job("j", 7, 1, 1)});

  ASSERT_EQ(plan.placements.size(), 1u);
  EXPECT_EQ(task_nodes(plan.placements[0]), Nodes({"b", "b", "b", "b", "c", "c", "c"}));
}

// --- Spread ------------------------------------------------------------------------

TEST(SpreadTest, UsesDistinctNodes) {
  const std::vector<NodeView> nodes = {make_node("a", 64, 4), make_node("b", 64, 4),
                                       make_node("c", 64, 4), make_node("d", 64, 4)};

  const Plan plan = schedule(nodes, {spread(make_job("j", 4, 1, 1))});

  ASSERT_EQ(plan.placements.size(), 1u);
  EXPECT_EQ(task_nodes(plan.placements[0]), Nodes({"a", "b", "c", "d"}));
}

TEST(SpreadTest, RoundRobinsOverNodesWithMostFreeSlotsFirst) {
  const std::vector<NodeView> nodes = {make_node("a", 64, 2), make_node("b", 64, 4),
                                       make_node("c", 64, 4), make_node("d", 64, 1)};

  const Plan plan = schedule(nodes, {spread(make_job("j", 6, 1, 1))});

  ASSERT_EQ(plan.placements.size(), 1u);
  EXPECT_EQ(task_nodes(plan.placements[0]), Nodes({"b", "b", "c", "c", "a", "d"}));
}

// --- Task order --------------------------------------------------------------------

TEST(TaskOrderTest, TaskZeroOnNodeWithMostTasksAndIndicesConsecutivePerNode) {
  const std::vector<NodeView> nodes = {make_node("a", 64, 2), make_node("b", 64, 5)};

  const Plan plan = schedule(nodes, {make_job("j", 6, 1, 1)});

  ASSERT_EQ(plan.placements.size(), 1u);
  const auto& tasks = plan.placements[0].tasks;
  EXPECT_EQ(task_nodes(plan.placements[0]), Nodes({"b", "b", "b", "b", "b", "a"}));
  for (int i = 0; i < 5; ++i) EXPECT_EQ(tasks[i].gpu_ids, std::vector<int>({i}));
  EXPECT_EQ(tasks[5].gpu_ids, std::vector<int>({0}));
}

// --- Backfill ----------------------------------------------------------------------

TEST(BackfillTest, SmallJobPassesBlockedHeadWhenItUsesNoReservedResources) {
  // The head needs all 8 GPUs; 4 are busy, so it waits and reserves 8 GPUs and 8 CPUs.
  // A CPU-only job fits in the 56 CPUs left over and may run now.
  const std::vector<NodeView> nodes = {with_busy_gpus(make_node("a", 64, 8), {0, 1, 2, 3})};
  const std::vector<PendingJob> queue = {make_job("head", 1, 8, 8), make_job("cpu", 1, 4)};

  const Plan plan = schedule(nodes, queue);

  ASSERT_EQ(plan.placements.size(), 1u);
  EXPECT_EQ(plan.placements[0].job_id, "cpu");
  ASSERT_NE(find_pending(plan, "head"), nullptr);
  EXPECT_EQ(find_pending(plan, "head")->reason,
            "waiting for resources: needs 1 task of {8 CPUs, 8 GPUs}; 0 fit on free capacity now");
  EXPECT_EQ(find_pending(plan, "head")->kind, PendingKind::kWaitingForResources);
}

TEST(BackfillTest, SmallJobThatWouldTakeReservedResourcesWaitsBehindHead) {
  const std::vector<NodeView> nodes = {with_busy_gpus(make_node("a", 64, 8), {0, 1, 2, 3})};
  const std::vector<PendingJob> queue = {make_job("head", 1, 1, 8), make_job("small", 1, 1, 2)};

  const Plan plan = schedule(nodes, queue);

  EXPECT_TRUE(plan.placements.empty());
  const PendingReason* small = find_pending(plan, "small");
  ASSERT_NE(small, nullptr);
  EXPECT_EQ(small->reason, "waiting behind job head (resources reserved for it)");
  EXPECT_EQ(small->kind, PendingKind::kWaitingBehind);
  EXPECT_FALSE(small->infeasible());
}

TEST(BackfillTest, SmallJobsUseOnlyNodesOutsideTheReservation) {
  // The head's reservation lands on "a", which has more of its GPUs free already.
  // The first small job fits on "b"; the second would need "a" and must wait.
  const std::vector<NodeView> nodes = {with_busy_gpus(make_node("a", 64, 8), {0, 1, 2, 3}),
                                       with_busy_gpus(make_node("b", 64, 8), {0, 1, 2, 3, 4, 5})};
  const std::vector<PendingJob> queue = {make_job("head", 1, 1, 8), make_job("s1", 1, 1, 2),
                                         make_job("s2", 1, 1, 2)};

  const Plan plan = schedule(nodes, queue);

  ASSERT_EQ(plan.placements.size(), 1u);
  EXPECT_EQ(plan.placements[0].job_id, "s1");
  EXPECT_EQ(plan.placements[0].tasks[0].node_id, "b");
  EXPECT_EQ(find_pending(plan, "s2")->reason,
            "waiting behind job head (resources reserved for it)");
}

TEST(BackfillTest, OnceBlockedJobsHoldAWholeResourceLaterJobsNeedingItWaitAndOthersStillRun) {
  // Both nodes are busy; "r1" and "r2" reserve all four CPUs between them.
  NodeView a = make_node("a", 2), b = make_node("b", 2);
  a.free.cpu_millis = b.free.cpu_millis = 0;
  const std::vector<NodeView> nodes = {a, b};
  std::vector<PendingJob> queue = {make_job("r1", 1, 2), make_job("r2", 1, 2)};
  for (int i = 0; i < 50; ++i) queue.push_back(make_job("cpu" + std::to_string(i), 1, 0.5));
  queue.push_back(make_job("memory_only", 1, 0, 0, int64_t{1} << 30));

  const Plan plan = schedule(nodes, queue);

  ASSERT_EQ(plan.placements.size(), 1u);
  EXPECT_EQ(plan.placements[0].job_id, "memory_only");  // it needs no CPU
  EXPECT_EQ(find_pending(plan, "r2")->kind, PendingKind::kWaitingForResources);
  for (const char* id : {"cpu0", "cpu49"}) {
    const PendingReason* waiting = find_pending(plan, id);
    ASSERT_NE(waiting, nullptr) << id;
    EXPECT_EQ(waiting->kind, PendingKind::kWaitingBehind);
    EXPECT_EQ(waiting->reason, "waiting behind job r1 (resources reserved for it)");
  }
  EXPECT_EQ(plan.pending.size(), queue.size() - 1);
}

TEST(BackfillTest, ReservationPrefersNodeWhereHeadCanStartSoonest) {
  // "b" has more GPUs free, so the head's reservation goes there and the small job
  // may use the free GPUs on "a".
  const std::vector<NodeView> nodes = {with_busy_gpus(make_node("a", 64, 8), {0, 1, 2, 3, 4, 5}),
                                       with_busy_gpus(make_node("b", 64, 8), {0, 1})};
  const std::vector<PendingJob> queue = {make_job("head", 1, 1, 8), make_job("small", 1, 1, 2)};

  const Plan plan = schedule(nodes, queue);

  ASSERT_EQ(plan.placements.size(), 1u);
  EXPECT_EQ(plan.placements[0].tasks[0].node_id, "a");
  EXPECT_EQ(plan.placements[0].tasks[0].gpu_ids, std::vector<int>({6, 7}));
}

TEST(BackfillTest, InfeasibleJobsDoNotBlockLaterOnes) {
  const std::vector<NodeView> nodes = {make_node("a", 16, 2)};
  const std::vector<PendingJob> queue = {make_job("huge", 1, 1, 4), make_job("many", 8, 1, 1),
                                         make_job("ok", 2, 1, 1)};

  const Plan plan = schedule(nodes, queue);

  ASSERT_EQ(plan.placements.size(), 1u);
  EXPECT_EQ(plan.placements[0].job_id, "ok");
  EXPECT_TRUE(find_pending(plan, "huge")->infeasible());
  EXPECT_TRUE(find_pending(plan, "many")->infeasible());
}

// --- Reasons -----------------------------------------------------------------------

TEST(ReasonTest, GpusPerTaskBeyondLargestNodeIsInfeasible) {
  const std::vector<NodeView> nodes = {make_node("a", 16, 2), make_node("b", 16, 1)};

  const Plan plan = schedule(nodes, {make_job("j", 1, 1, 4)});

  ASSERT_EQ(plan.pending.size(), 1u);
  EXPECT_TRUE(plan.pending[0].infeasible());
  EXPECT_EQ(plan.pending[0].reason, "needs 4 GPUs per task; largest node has 2");
}

TEST(ReasonTest, MemoryPerTaskBeyondLargestNodeIsInfeasible) {
  const std::vector<NodeView> nodes = {make_node("a", 16, 0, /*memory_gib=*/32)};

  const Plan plan = schedule(nodes, {make_job("j", 1, 1, 0, 64 * kGiB)});

  ASSERT_EQ(plan.pending.size(), 1u);
  EXPECT_TRUE(plan.pending[0].infeasible());
  EXPECT_EQ(plan.pending[0].reason, "needs 64 GiB memory per task; largest node has 32 GiB");
}

TEST(ReasonTest, GangLargerThanWholeClusterIsInfeasible) {
  const std::vector<NodeView> nodes = {make_node("a", 16, 2), make_node("b", 16, 2)};

  const Plan plan = schedule(nodes, {make_job("j", 8, 0, 2)});

  ASSERT_EQ(plan.pending.size(), 1u);
  EXPECT_TRUE(plan.pending[0].infeasible());
  EXPECT_EQ(plan.pending[0].reason,
            "needs 8 tasks of {2 GPUs}; the cluster can hold at most 2 such tasks");
}

TEST(ReasonTest, TaskThatFitsNoSingleNodeIsInfeasible) {
  // Enough CPUs on "a" and enough GPUs on "b", but never both on one node.
  const std::vector<NodeView> nodes = {make_node("a", 64, 0), make_node("b", 1, 8)};

  const Plan plan = schedule(nodes, {make_job("j", 1, 4, 1)});

  ASSERT_EQ(plan.pending.size(), 1u);
  EXPECT_TRUE(plan.pending[0].infeasible());
  EXPECT_EQ(plan.pending[0].reason,
            "needs {4 CPUs, 1 GPU} per task; no single node has that much in total");
}

TEST(ReasonTest, NoNodesMeansWaitForAWorker) {
  const Plan plan = schedule({}, {make_job("j", 1, 1)});

  ASSERT_EQ(plan.pending.size(), 1u);
  EXPECT_EQ(plan.pending[0].kind, PendingKind::kNoNodes);
  EXPECT_FALSE(plan.pending[0].infeasible());
  EXPECT_EQ(plan.pending[0].reason,
            "no alive nodes in the cluster; start a worker with `ag start-worker`");
}

TEST(ReasonTest, OnlyUnschedulableNodesCountsAsNoNodes) {
  const Plan plan = schedule({unschedulable(make_node("a", 64, 8))}, {make_job("j", 1, 1)});

  ASSERT_EQ(plan.pending.size(), 1u);
  EXPECT_FALSE(plan.pending[0].infeasible());
  EXPECT_EQ(plan.pending[0].reason,
            "no alive nodes in the cluster; start a worker with `ag start-worker`");
}

// --- Node selection ------------------------------------------------------------

TEST(NodeTest, UnschedulableNodesAreIgnored) {
  const std::vector<NodeView> nodes = {unschedulable(make_node("a", 64, 8)), make_node("b", 64, 2)};

  const Plan plan = schedule(nodes, {make_job("fits", 1, 1, 1), make_job("too_big", 1, 1, 4)});

  ASSERT_EQ(plan.placements.size(), 1u);
  EXPECT_EQ(plan.placements[0].tasks[0].node_id, "b");
  EXPECT_EQ(find_pending(plan, "too_big")->reason, "needs 4 GPUs per task; largest node has 2");
}

TEST(NodeTest, FractionalCpusAddUpExactly) {
  const std::vector<NodeView> nodes = {make_node("a", 2)};

  const Plan plan = schedule(nodes, {make_job("quarters", 4, 0.25), make_job("half", 2, 0.5),
                                     make_job("more", 1, 0.5), make_job("too_big", 1, 2.5)});

  EXPECT_NE(find_placement(plan, "quarters"), nullptr);
  EXPECT_NE(find_placement(plan, "half"), nullptr);
  EXPECT_EQ(find_pending(plan, "more")->reason,
            "waiting for resources: needs 1 task of {0.5 CPUs}; 0 fit on free capacity now");
  EXPECT_EQ(find_pending(plan, "too_big")->reason, "needs 2.5 CPUs per task; largest node has 2");
}

// --- Scale and determinism -----------------------------------------------------

struct Cluster {
  std::vector<NodeView> nodes;
  std::vector<PendingJob> queue;
};

// A busy cluster of mixed nodes (some partly used, some draining) and a queue of mixed
// jobs, reproducible from `seed`.
Cluster make_busy_cluster(unsigned seed, int num_nodes, int num_jobs) {
  std::mt19937 rng(seed);
  const auto pick = [&rng](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng);
  };
  Cluster cluster;
  for (int i = 0; i < num_nodes; ++i) {
    const int gpus = std::vector<int>{0, 0, 2, 4, 8}[pick(0, 4)];
    NodeView node = make_node("node-" + std::to_string(i), pick(4, 96), gpus, pick(16, 512));
    std::set<int> busy;
    for (int g = 0; g < gpus; ++g) {
      if (pick(0, 2) == 0) busy.insert(g);
    }
    node = with_busy_cpus(with_busy_gpus(std::move(node), busy), pick(0, 3));
    node.free.memory_bytes -= pick(0, 8) * kGiB;
    if (pick(0, 19) == 0) node = unschedulable(std::move(node));
    cluster.nodes.push_back(std::move(node));
  }
  for (int j = 0; j < num_jobs; ++j) {
    PendingJob job = make_job(
        "job-" + std::to_string(j), std::vector<int>{1, 1, 2, 4, 8, 16}[pick(0, 5)],
        pick(1, 16) * 0.5, std::vector<int64_t>{0, 0, 1, 2, 4, 8}[pick(0, 5)], pick(0, 64) * kGiB);
    if (pick(0, 3) == 0) job = spread(std::move(job));
    cluster.queue.push_back(std::move(job));
  }
  return cluster;
}

TEST(ScaleTest, ThousandNodesAndTwoThousandJobsRespectCapacity) {
  const Cluster cluster = make_busy_cluster(42, 1000, 2000);

  const Plan plan = schedule(cluster.nodes, cluster.queue);

  expect_plan_respects_capacity(cluster.nodes, cluster.queue, plan);
  EXPECT_GT(plan.placements.size(), 100u);  // the test must exercise real placements
  EXPECT_FALSE(plan.pending.empty());       // and real contention
}

TEST(ScaleTest, BackfillScenariosRespectCapacity) {
  for (unsigned seed = 0; seed < 20; ++seed) {
    const Cluster cluster = make_busy_cluster(seed, 50, 200);
    expect_plan_respects_capacity(cluster.nodes, cluster.queue,
                                  schedule(cluster.nodes, cluster.queue));
  }
}

// The promise of backfill: once the tasks running now (and the jobs placed ahead of it)
// end, the first blocked job fits in what the jobs backfilled past it left over, so
// backfilling did not delay it.
TEST(ScaleTest, BackfillNeverDelaysTheFirstBlockedJob) {
  for (unsigned seed = 0; seed < 20; ++seed) {
    const Cluster cluster = make_busy_cluster(seed, 50, 200);
    const Plan plan = schedule(cluster.nodes, cluster.queue);
    const auto first_blocked = std::find_if(plan.pending.begin(), plan.pending.end(),
                                            [](const PendingReason& p) { return !p.infeasible(); });
    ASSERT_NE(first_blocked, plan.pending.end()) << "seed " << seed;

    std::vector<NodeView> after_running_tasks_end;
    for (const NodeView& node : cluster.nodes) {
      NodeView freed = node;
      freed.free = node.total;
      freed.free_gpu_ids.clear();
      for (int g = 0; g < node.total.gpus; ++g) freed.free_gpu_ids.push_back(g);
      after_running_tasks_end.push_back(std::move(freed));
    }
    std::vector<PendingJob> blocked_only;
    for (const PendingJob& job : cluster.queue) {
      if (job.job_id == first_blocked->job_id) blocked_only.push_back(job);
    }
    const auto blocked_at =
        std::find_if(cluster.queue.begin(), cluster.queue.end(),
                     [&](const PendingJob& j) { return j.job_id == first_blocked->job_id; });
    for (const JobPlacement& placement : plan.placements) {
      const auto job =
          std::find_if(cluster.queue.begin(), cluster.queue.end(),
                       [&](const PendingJob& j) { return j.job_id == placement.job_id; });
      if (job < blocked_at) continue;  // ahead of it in the queue, not a backfill
      for (const TaskPlacement& task : placement.tasks) {
        for (NodeView& node : after_running_tasks_end) {
          if (node.node_id != task.node_id) continue;
          node.free -= job->per_task;
          std::erase_if(node.free_gpu_ids, [&](int g) {
            return std::find(task.gpu_ids.begin(), task.gpu_ids.end(), g) != task.gpu_ids.end();
          });
        }
      }
    }

    const Plan later = schedule(after_running_tasks_end, blocked_only);

    EXPECT_EQ(later.placements.size(), 1u) << "seed " << seed << ": " << first_blocked->job_id;
  }
}

TEST(DeterminismTest, SameInputsGiveSamePlan) {
  const Cluster cluster = make_busy_cluster(7, 200, 400);

  EXPECT_EQ(describe(schedule(cluster.nodes, cluster.queue)),
            describe(schedule(cluster.nodes, cluster.queue)));
}

TEST(DeterminismTest, NodeOrderDoesNotMatter) {
  const Cluster cluster = make_busy_cluster(7, 200, 400);
  std::vector<NodeView> shuffled = cluster.nodes;
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(1));

  EXPECT_EQ(describe(schedule(cluster.nodes, cluster.queue)),
            describe(schedule(shuffled, cluster.queue)));
}

}  // namespace
}  // namespace ag::sched

namespace ag::sched {
namespace {

TEST(PendingKindTest, NamesRoundTripAndUnknownNamesAreRefused) {
  for (PendingKind kind : {PendingKind::kNoNodes, PendingKind::kInfeasible, PendingKind::kWaitingForResources,
                           PendingKind::kWaitingBehind}) {
    EXPECT_EQ(parse_pending_kind(to_string(kind)), kind);
  }
  EXPECT_EQ(to_string(PendingKind::kWaitingBehind), std::string("waiting_behind"));
  EXPECT_EQ(parse_pending_kind("waiting"), std::nullopt);
  EXPECT_EQ(parse_pending_kind(""), std::nullopt);
}

}  // namespace
}  // namespace ag::sched

// --- Constraints on node labels -------------------------------------------------------

namespace ag::sched {
namespace {

using namespace ag::sched::testing;  // NOLINT: fixture builders keep tests short.

NodeView labelled(NodeView node, std::map<std::string, std::string> labels) {
  node.labels = std::move(labels);
  return node;
}

PendingJob constrained(PendingJob job, std::map<std::string, std::string> constraints) {
  job.constraints = std::move(constraints);
  return job;
}

TEST(ConstraintTest, TasksGoOnlyToNodesWithEveryLabelAsked) {
  const std::vector<NodeView> nodes = {
      labelled(make_node("a", 8), {{"gpu", "a100"}, {"zone", "b"}}),
      labelled(make_node("b", 8), {{"gpu", "a100"}}),
      labelled(make_node("c", 64), {{"gpu", "h100"}, {"zone", "b"}}),
      make_node("d", 64),
  };
  Plan plan = schedule(nodes, {constrained(make_job("j", 2, 8), {{"gpu", "a100"}}),
                               constrained(make_job("k", 1, 4), {{"gpu", "a100"}, {"zone", "b"}})});
  const JobPlacement* j = find_placement(plan, "j");
  ASSERT_NE(j, nullptr);
  std::set<std::string> used;
  for (const auto& t : j->tasks) used.insert(t.node_id);
  EXPECT_EQ(used, (std::set<std::string>{"a", "b"}));  // never c or d, though they have more room
  // k's only node is full now: it waits for it, not for c.
  const PendingReason* k = find_pending(plan, "k");
  ASSERT_NE(k, nullptr);
  EXPECT_NE(k->kind, PendingKind::kInfeasible);
}

TEST(ConstraintTest, NoNodeWithTheLabelsIsInfeasibleAndSaysWhich) {
  const std::vector<NodeView> nodes = {labelled(make_node("a", 8), {{"gpu", "a100"}}), make_node("b", 64)};
  Plan plan = schedule(nodes, {constrained(make_job("j", 1, 1), {{"gpu", "h100"}})});
  const PendingReason* j = find_pending(plan, "j");
  ASSERT_NE(j, nullptr);
  EXPECT_EQ(j->kind, PendingKind::kInfeasible);
  EXPECT_NE(j->reason.find("no alive node has the label(s) gpu=h100"), std::string::npos) << j->reason;
  // Sized against the labelled nodes only: 16 CPUs never fit the 8-CPU a100 node.
  Plan big = schedule(nodes, {constrained(make_job("k", 1, 16), {{"gpu", "a100"}})});
  EXPECT_EQ(find_pending(big, "k")->kind, PendingKind::kInfeasible);
  EXPECT_TRUE(never_fits(nodes, constrained(make_job("m", 1, 16), {{"gpu", "a100"}})).has_value());
  EXPECT_FALSE(never_fits(nodes, constrained(make_job("n", 1, 8), {{"gpu", "a100"}})).has_value());
}

NodeView with_engine(NodeView node, std::vector<std::string> mount_prefixes = {}) {
  node.containers = true;
  node.mount_prefixes = std::move(mount_prefixes);
  return node;
}

PendingJob in_image(PendingJob job, std::vector<std::string> mount_sources = {}) {
  job.needs_containers = true;
  job.mount_sources = std::move(mount_sources);
  return job;
}

TEST(ContainerTest, AJobInAnImageGoesOnlyToNodesThatRunContainers) {
  const std::vector<NodeView> nodes = {make_node("a", 64), with_engine(make_node("b", 8)), make_node("c", 64)};
  Plan plan = schedule(nodes, {in_image(make_job("j", 2, 4)), make_job("k", 1, 4)});
  const JobPlacement* j = find_placement(plan, "j");
  ASSERT_NE(j, nullptr);
  for (const auto& t : j->tasks) EXPECT_EQ(t.node_id, "b");
  // Sized against the nodes that run containers: 16 CPUs never fit b.
  Plan big = schedule(nodes, {in_image(make_job("m", 1, 16))});
  EXPECT_EQ(find_pending(big, "m")->kind, PendingKind::kInfeasible);
}

TEST(ContainerTest, NoNodeWithAnEngineIsInfeasibleAndSaysWhatToInstall) {
  const std::vector<NodeView> nodes = {make_node("a", 8), make_node("b", 8)};
  Plan plan = schedule(nodes, {in_image(make_job("j", 1, 1))});
  const PendingReason* j = find_pending(plan, "j");
  ASSERT_NE(j, nullptr);
  EXPECT_EQ(j->kind, PendingKind::kInfeasible);
  EXPECT_EQ(j->reason,
            "it runs in a container image and no alive node can run containers; install podman (or docker) on the "
            "workers and restart them");
}

TEST(ContainerTest, MountsGoOnlyWhereANodeAllowsThem) {
  const std::vector<NodeView> nodes = {with_engine(make_node("a", 64), {"/scratch"}),
                                       with_engine(make_node("b", 8), {"/data", "/scratch"})};
  Plan plan = schedule(nodes, {in_image(make_job("j", 1, 4), {"/data/imagenet"})});
  const JobPlacement* j = find_placement(plan, "j");
  ASSERT_NE(j, nullptr);
  EXPECT_EQ(j->tasks.at(0).node_id, "b");
  auto why = never_fits(nodes, in_image(make_job("k", 1, 1), {"/database"}));
  ASSERT_TRUE(why.has_value());
  EXPECT_EQ(*why,
            "no alive node that could run it allows mounting /database; start the workers with `--allow-mount "
            "/database` (or a folder above it)");
}

TEST(ConstraintTest, AConstrainedGangBlockedOnItsNodesReservesOnlyThoseNodes) {
  // j (constrained to a) is blocked; k may still use b, which j could never use.
  const std::vector<NodeView> nodes = {labelled(with_busy_cpus(make_node("a", 8), 6), {{"pool", "x"}}),
                                       make_node("b", 8)};
  Plan plan = schedule(nodes, {constrained(make_job("j", 1, 4), {{"pool", "x"}}), make_job("k", 1, 4)});
  EXPECT_NE(find_pending(plan, "j"), nullptr);
  const JobPlacement* k = find_placement(plan, "k");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->tasks.at(0).node_id, "b");
}

// On a large cluster, one-task jobs are placed through an index of free amounts
// instead of a scan of every node. The plan must be the one the scan gives: the same
// jobs with a constraint every node meets take the scan, and the plans are compared on
// random partly-filled clusters of 600 nodes (reasons and reservations included).
TEST(SchedulerTest, APassWeighsAtMostMaxBlockedBlockedJobsAndTheRestWaitBehindThem) {
  const std::vector<NodeView> nodes = {with_busy_cpus(make_node("n1", 4), 3), make_node("n2", 2)};
  const std::vector<PendingJob> queue = {make_job("a", 1, 4), make_job("b", 1, 4), make_job("c", 1, 1)};
  // Unbounded: a and b wait, c starts on n2.
  Plan all = schedule(nodes, queue, PassInput{});
  ASSERT_EQ(all.placements.size(), 1u);
  EXPECT_EQ(all.placements[0].job_id, "c");
  // One blocked job weighed: b and c are not weighed, and say why.
  PassInput input;
  input.max_blocked = 1;
  Plan bounded = schedule(nodes, queue, input);
  EXPECT_TRUE(bounded.placements.empty());
  ASSERT_EQ(bounded.pending.size(), 3u);
  EXPECT_EQ(bounded.pending[0].kind, PendingKind::kWaitingForResources);
  for (size_t i : {1u, 2u}) {
    EXPECT_EQ(bounded.pending[i].kind, PendingKind::kWaitingBehind);
    EXPECT_EQ(bounded.pending[i].reason, "waiting behind 1 job ahead of it that cannot start yet");
  }
}

TEST(LargeClusterTest, TheFreeIndexPlacesExactlyAsTheScanWould) {
  std::mt19937 rng(99);
  for (int round = 0; round < 40; ++round) {
    std::vector<NodeView> nodes;
    for (int i = 0; i < 600; ++i) {
      char id[16];
      std::snprintf(id, sizeof id, "n%04d", i);
      NodeView node = make_node(id, 32, 8, 256);
      std::set<int> busy;
      for (int g = 0; g < 8; ++g) {
        if (rng() % 3 == 0) busy.insert(g);
      }
      node = with_busy_cpus(with_busy_gpus(node, busy), static_cast<double>(rng() % 24));
      node.labels["pool"] = "all";
      nodes.push_back(node);
    }
    // Some nodes list their free GPUs out of order, or twice.
    for (int i = 0; i < 20; ++i) {
      auto& ids = nodes[rng() % nodes.size()].free_gpu_ids;
      std::reverse(ids.begin(), ids.end());
      if (!ids.empty() && rng() % 2) ids.push_back(ids.front());
    }
    std::vector<PendingJob> queue;
    for (int j = 0; j < 64; ++j) {
      // Gangs of 2-7 tasks, and some of 8-40 that no one node holds.
      const int tasks = rng() % 8 == 0 ? 2 + static_cast<int>(rng() % 6)
                        : rng() % 10 == 0 ? 8 + static_cast<int>(rng() % 33)
                                          : 1;
      queue.push_back(make_job("j" + std::to_string(j), tasks, 1 + rng() % 8, static_cast<int64_t>(rng() % 5),
                               static_cast<int64_t>(rng() % 64) * kGiB));
    }
    std::vector<PendingJob> scanned = queue;
    for (auto& job : scanned) job.constraints["pool"] = "all";
    const Plan indexed = schedule(nodes, queue);
    const Plan scan = schedule(nodes, scanned);
    ASSERT_EQ(describe(indexed), describe(scan)) << "round " << round;
    ASSERT_EQ(indexed.pending.size(), scan.pending.size());
    for (size_t k = 0; k < indexed.pending.size(); ++k) {
      EXPECT_EQ(indexed.pending[k].job_id, scan.pending[k].job_id);
      EXPECT_EQ(indexed.pending[k].kind, scan.pending[k].kind);
    }
    expect_plan_respects_capacity(nodes, queue, indexed);
  }
}

// --- The kept base ----------------------------------------------------------------

// A pass from a kept NodeBase plans what one from the views does, leaves the base as it
// found it (a second pass plans the same), and follows each view changed.
TEST(NodeBaseTest, PlansAsTheViewsDoAndFollowsTheirChanges) {
  std::vector<NodeView> views;
  for (int i = 0; i < 8; ++i) views.push_back(make_node("n" + std::to_string(7 - i), 16, 4));
  views[2] = with_busy_gpus(views[2], {1, 3});  // listed n7 .. n0: the base sorts them as a pass does
  std::vector<const NodeView*> pointers;
  for (const NodeView& view : views) pointers.push_back(&view);
  std::vector<PendingJob> queue;
  for (int i = 0; i < 14; ++i) queue.push_back(make_job("j" + std::to_string(i), 1 + i % 3, 2 + i % 5, i % 4));
  queue[3].exclusive = true;
  queue[5].policy = PlacementPolicy::kSpread;
  NodeBase base;
  base.reset(pointers);
  const auto same = [&](const std::string& after) {
    SCOPED_TRACE(after);
    const std::string from_views = describe(schedule(views, queue, PassInput{}));
    EXPECT_EQ(describe(schedule(base, queue, PassInput{})), from_views);
    EXPECT_EQ(describe(schedule(base, queue, PassInput{})), from_views) << "the pass changed the base";
  };
  same("reset");
  views[4].free = {};
  views[4].free_gpu_ids.clear();
  base.changed(views[4]);
  same("a node filled");
  views[5].free_gpu_ids = {3, 0};  // not sorted, as a node may name them
  views[5].free.gpus = 2;
  base.changed(views[5]);
  same("GPU ids out of order");
  views[0].schedulable = false;
  base.changed(views[0]);
  same("a node set aside");
  views[0].schedulable = true;
  base.changed(views[0]);
  same("and back");
}

// On a cluster large enough for the free index, the base keeps the index (and the
// largest node) between passes: after random changes to the views, to what is free, to a
// node's total and to whether it is schedulable, and after the plans are applied to
// them, a pass from the base plans what one from the views does.
TEST(NodeBaseTest, OnALargeClusterItKeepsItsIndexAndLargestNodeInStep) {
  std::mt19937 rng(7);
  std::vector<NodeView> views;
  for (int i = 0; i < 600; ++i) {
    char id[16];
    std::snprintf(id, sizeof id, "n%04d", i);
    views.push_back(with_busy_cpus(make_node(id, 32, 8, 256), static_cast<double>(rng() % 24)));
  }
  views[300] = make_node("n0300", 96, 8, 256);  // the one largest node
  std::vector<const NodeView*> pointers;
  for (const NodeView& view : views) pointers.push_back(&view);
  NodeBase base;
  base.reset(pointers);
  const auto queue_of = [&](int round) {
    std::vector<PendingJob> queue;
    for (int j = 0; j < 24; ++j) {
      const int tasks = rng() % 6 == 0 ? 2 + static_cast<int>(rng() % 12) : 1;
      queue.push_back(make_job("r" + std::to_string(round) + "j" + std::to_string(j), tasks, 1 + rng() % 12,
                               static_cast<int64_t>(rng() % 3), static_cast<int64_t>(rng() % 64) * kGiB));
    }
    queue.push_back(make_job("r" + std::to_string(round) + "big", 1, 64));  // only the largest node holds it
    return queue;
  };
  const auto apply = [&](const Plan& plan, const std::vector<PendingJob>& queue) {
    for (const JobPlacement& placement : plan.placements) {
      const PendingJob& job =
          *std::find_if(queue.begin(), queue.end(), [&](const PendingJob& q) { return q.job_id == placement.job_id; });
      for (const TaskPlacement& task : placement.tasks) {
        NodeView& view =
            *std::find_if(views.begin(), views.end(), [&](const NodeView& v) { return v.node_id == task.node_id; });
        view.free -= job.per_task;
        std::erase_if(view.free_gpu_ids, [&](int id) {
          return std::find(task.gpu_ids.begin(), task.gpu_ids.end(), id) != task.gpu_ids.end();
        });
        base.changed(view);
      }
    }
  };
  for (int round = 0; round < 60; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    for (int k = 0; k < 12; ++k) {
      NodeView& view = views[rng() % views.size()];
      switch (rng() % 8) {
        case 0:  // tasks ended: all of it free again
          view.free = view.total;
          view.free_gpu_ids.clear();
          for (int g = 0; g < view.total.gpus; ++g) view.free_gpu_ids.push_back(g);
          break;
        case 1:  // re-registered smaller or larger (the largest node among them)
          view.total.cpu_millis = cpu_millis(16 + 16 * static_cast<double>(rng() % 6));
          view.free = view.total;
          break;
        case 2:
          if (&view != &views[0]) view.schedulable = !view.schedulable;
          break;
        default:
          view = with_busy_cpus(view, static_cast<double>(rng() % 4));
      }
      base.changed(view);
    }
    const std::vector<PendingJob> queue = queue_of(round);
    const Plan from_views = schedule(views, queue, PassInput{});
    ASSERT_EQ(describe(schedule(base, queue, PassInput{})), describe(from_views));
    ASSERT_EQ(describe(schedule(base, queue, PassInput{})), describe(from_views)) << "the pass changed the base";
    apply(from_views, queue);
  }
}

// The largest node that a job's need is judged against follows a node that shrinks.
TEST(NodeBaseTest, AJobTooBigForTheLargestNodeLeftSaysSo) {
  std::vector<NodeView> views;
  for (int i = 0; i < 600; ++i) {
    char id[16];
    std::snprintf(id, sizeof id, "n%04d", i);
    views.push_back(make_node(id, i == 42 ? 64 : 32));
  }
  std::vector<const NodeView*> pointers;
  for (const NodeView& view : views) pointers.push_back(&view);
  NodeBase base;
  base.reset(pointers);
  const std::vector<PendingJob> queue = {make_job("big", 1, 48)};
  Plan plan = schedule(base, queue, PassInput{});
  ASSERT_EQ(plan.placements.size(), 1u);
  views[42] = make_node("n0042", 32);
  base.changed(views[42]);
  plan = schedule(base, queue, PassInput{});
  ASSERT_EQ(plan.pending.size(), 1u);
  EXPECT_TRUE(plan.pending[0].infeasible());
  EXPECT_EQ(plan.pending[0].reason, "needs 48 CPUs per task; largest node has 32");
}

}  // namespace
}  // namespace ag::sched
