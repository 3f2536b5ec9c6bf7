// The scheduler's view of the head's state, alone: plan_pass over a job table, a node
// registry, a policy, a usage ledger and a scheduling loop filled by hand. What live
// tasks hold is taken off their nodes; jobs set aside, waiting out a retry delay or
// over their owner's quota take no place in the window; a queue's nodes and preemption
// apply to its jobs; an exclusive job holds its nodes whole.
#include "head/jobs/scheduling_view.h"

#include <gtest/gtest.h>

#include "fakes/fake_clock.h"
#include "head/store/memory_store.h"

namespace ag::head {
namespace {

class SchedulingViewTest : public ::testing::Test {
 protected:
  SchedulingViewTest()
      : policy_(store_), usage_(clock_, clock_, store_, sched::kDefaultUsageHalfLifeMs), loop_(clock_, clock_, [] {}) {
    EXPECT_TRUE(policy_.recover().ok());
    EXPECT_TRUE(usage_.recover().ok());
  }

  void add_node(const std::string& id, int cpus) {
    Node node;
    node.node_id = id;
    node.total.cpu_millis = cpus * 1000;
    node.total.memory_bytes = int64_t{16} << 30;
    node.state = NodeState::kAlive;
    nodes_.upsert(node);
  }

  // A pending job of `tasks` tasks of `cpus` each, in the queue.
  Job& queue(const std::string& id, int tasks, double cpus, const std::string& owner = "alice") {
    Job job;
    job.id = id;
    job.owner = owner;
    job.queue_seq = table_.next_seq();
    job.spec.entrypoint = "python train.py";
    job.spec.num_workers = tasks;
    job.spec.num_cpus = cpus;
    Job& added = table_.add(job, {1, "submitted"});
    loop_.queue().add(queue_entry(added));
    return added;
  }

  // A running job holding `cpus` on `node`.
  Job& running(const std::string& id, const std::string& node, double cpus) {
    Job job;
    job.id = id;
    job.owner = "bob";
    job.state = JobState::kRunning;
    job.spec.num_workers = 1;
    job.spec.num_cpus = cpus;
    AttemptRecord attempt;
    attempt.tasks.push_back(TaskRecord{0, node, "", {}, TaskState::kRunning});
    job.attempts.push_back(attempt);
    Job& added = table_.add(job, {1, "submitted"});
    table_.activate(added);
    return added;
  }

  PassPlan plan() {
    ClusterCapacity capacity;
    capacity.rebuild(nodes_, table_);
    return plan_pass({table_, nodes_, capacity, policy_, usage_, loop_, clock_.now_ms()});
  }

  void apply(const PolicyStore::Change& change) {
    store_.write(change.batch, [](const Status&) {});
    change.apply();
  }

  testing::FakeClock clock_;
  store::MemoryStore store_;
  NodeRegistry nodes_;
  JobTable table_;
  PolicyStore policy_;
  UsageLedger usage_;
  SchedulingLoop loop_;
};

TEST_F(SchedulingViewTest, WhatLiveTasksHoldIsTakenOffTheirNodes) {
  add_node("node_a", 4);
  add_node("node_b", 4);
  running("job_busy", "node_a", 3);
  queue("job_new", 1, 2);
  PassPlan pass = plan();
  ASSERT_EQ(pass.plan.placements.size(), 1u);
  EXPECT_EQ(pass.plan.placements[0].tasks.at(0).node_id, "node_b");
  EXPECT_EQ(pass.weighed, 1u);
}

TEST_F(SchedulingViewTest, JobsSetAsideOrWaitingOutARetryTakeNoPlaceInTheWindow) {
  add_node("node_a", 4);
  queue("job_huge", 1, 64);
  Job& retrying = queue("job_retry", 1, 1);
  retrying.retry_at_ms = clock_.now_ms() + 5000;
  queue("job_fits", 1, 1);
  loop_.set_aside_job("job_huge");
  PassPlan pass = plan();
  EXPECT_EQ(pass.weighed, 1u);
  ASSERT_EQ(pass.plan.placements.size(), 1u);
  EXPECT_EQ(pass.plan.placements[0].job_id, "job_fits");
  EXPECT_EQ(pass.next_retry_ms, clock_.now_ms() + 5000);
  EXPECT_TRUE(pass.plan.pending.empty()) << "neither is weighed, so neither gets a new reason";
}

TEST_F(SchedulingViewTest, AJobOverItsOwnersQuotaWaitsWithThatReasonAndOthersGoAhead) {
  add_node("node_a", 8);
  sched::Limits two_cpus;
  two_cpus.cpu_millis = 2000;
  apply(policy_.set_quota(false, "alice", two_cpus));
  queue("job_alice", 1, 4, "alice");
  queue("job_carol", 1, 4, "carol");
  PassPlan pass = plan();
  ASSERT_EQ(pass.plan.placements.size(), 1u);
  EXPECT_EQ(pass.plan.placements[0].job_id, "job_carol");
  ASSERT_EQ(pass.plan.pending.size(), 1u);
  EXPECT_EQ(pass.plan.pending[0].job_id, "job_alice");
  EXPECT_EQ(pass.plan.pending[0].kind, sched::PendingKind::kQuota);
  EXPECT_EQ(pass.weighed, 1u);
}

TEST_F(SchedulingViewTest, APassWeighsNoMoreThanTheLoopsWindow) {
  add_node("node_a", 1);
  for (int i = 0; i < 100; ++i) queue("job_" + std::to_string(100 + i), 1, 1);
  PassPlan pass = plan();
  EXPECT_EQ(pass.weighed, SchedulingLoop::kMaxJobsPerPass);
  EXPECT_EQ(pass.plan.placements.size(), 1u);
}

TEST_F(SchedulingViewTest, AQueuesNodesAndPreemptionApplyToItsJobs) {
  QueueDef a100;
  a100.nodes_with = {{"gpu", "a100"}};
  a100.preempt = true;
  apply(policy_.set_queue("a100", a100));
  api::JobSpec spec;
  spec.num_workers = 2;
  spec.queue = "a100";
  spec.constraints = {{"zone", "west"}};
  sched::PendingJob job = pending_job("job_q", spec, policy_);
  EXPECT_EQ(job.constraints, (std::map<std::string, std::string>{{"gpu", "a100"}, {"zone", "west"}}));
  EXPECT_TRUE(job.may_preempt);
  spec.queue.clear();
  EXPECT_FALSE(pending_job("job_q", spec, policy_).may_preempt);
}

TEST_F(SchedulingViewTest, AnExclusiveJobHoldsItsNodesWholeForPreemption) {
  add_node("node_a", 8);
  running("job_shared", "node_a", 1);
  running("job_whole", "node_a", 1).spec.exclusive = true;
  std::map<std::string, int64_t> held;
  for (const auto& job : running_for_preemption(table_, nodes_)) held[job.job_id] = job.tasks.at(0).held.cpu_millis;
  EXPECT_EQ(held, (std::map<std::string, int64_t>{{"job_shared", 1000}, {"job_whole", 8000}}));
  // Draining nodes count only when asked (a submit's check: they take tasks again).
  nodes_.set_drained({"node_a"});
  EXPECT_FALSE(node_capacity(nodes_).at("node_a").schedulable);
  EXPECT_TRUE(node_capacity(nodes_, true).at("node_a").schedulable);
}

}  // namespace
}  // namespace ag::head
