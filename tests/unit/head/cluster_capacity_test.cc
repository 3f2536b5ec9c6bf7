// The scheduler's working view kept between passes (ClusterCapacity): after any
// sequence of events the job layer takes in, the view it kept equals the one rebuilt
// from scratch from the node registry and the job table, and counts the drained and
// unhealthy nodes as the registry has them, and a pass from its kept base plans what
// one from the rebuilt views does; a registration that brings
// nothing a queued job could use posts no pass.
#include "head/jobs/cluster_capacity.h"

#include <random>

#include "job_layer_fixture.h"

namespace ag::head {
namespace {

void expect_same(const ClusterCapacity& kept, const ClusterCapacity& rebuilt, const std::string& after) {
  SCOPED_TRACE("after " + after);
  const auto& a = kept.nodes();
  const auto& b = rebuilt.nodes();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE(b[i]->node_id);
    EXPECT_EQ(a[i]->node_id, b[i]->node_id);
    EXPECT_EQ(a[i]->total, b[i]->total);
    EXPECT_EQ(a[i]->free, b[i]->free);
    EXPECT_EQ(a[i]->free_gpu_ids, b[i]->free_gpu_ids);
    EXPECT_EQ(a[i]->schedulable, b[i]->schedulable);
    EXPECT_EQ(a[i]->labels, b[i]->labels);
    EXPECT_EQ(a[i]->containers, b[i]->containers);
    EXPECT_EQ(a[i]->mount_prefixes, b[i]->mount_prefixes);
  }
  EXPECT_EQ(kept.schedulable(), rebuilt.schedulable());
  const auto same_use = [](const sched::Use& x, const sched::Use& y) {
    return x.held == y.held && x.running_jobs == y.running_jobs;
  };
  const auto owners_a = kept.use_by_owner(), owners_b = rebuilt.use_by_owner();
  ASSERT_EQ(owners_a.size(), owners_b.size());
  for (auto x = owners_a.begin(), y = owners_b.begin(); x != owners_a.end(); ++x, ++y) {
    EXPECT_EQ(x->first, y->first);
    EXPECT_TRUE(same_use(x->second, y->second)) << x->first;
  }
  const auto queues_a = kept.use_by_queue(), queues_b = rebuilt.use_by_queue();
  ASSERT_EQ(queues_a.size(), queues_b.size());
  for (auto x = queues_a.begin(), y = queues_b.begin(); x != queues_a.end(); ++x, ++y) {
    EXPECT_EQ(x->first, y->first);
    EXPECT_TRUE(same_use(x->second, y->second)) << x->first.first;
  }
}

class ClusterCapacityTest : public JobLayerTest {
 protected:
  void check(const std::string& after) {
    clock_.run_ready();
    ClusterCapacity rebuilt;
    rebuilt.rebuild(nodes_, jobs_->table);
    expect_same(jobs_->capacity, rebuilt, after);
    // A pass from the kept base plans what one from the rebuilt views does: jobs of every
    // shape, more than fit, so that some place, some block and reserve.
    std::vector<sched::PendingJob> probe;
    for (int i = 0; i < 12; ++i) {
      sched::PendingJob job;
      job.job_id = "probe_" + std::to_string(i);
      job.num_tasks = 1 + i % 3;
      job.per_task = {1000 * (1 + i % 4), 0, i % 3};
      job.policy = i % 4 == 3 ? sched::PlacementPolicy::kSpread : sched::PlacementPolicy::kPack;
      job.exclusive = i % 5 == 4;
      probe.push_back(job);
    }
    sched::PassInput input;
    const sched::Plan from_base = sched::schedule(jobs_->capacity.base(), probe, input);
    const sched::Plan from_views = sched::schedule(rebuilt.nodes(), probe, input);
    ASSERT_EQ(from_base.placements.size(), from_views.placements.size()) << after;
    for (size_t i = 0; i < from_base.placements.size(); ++i) {
      const auto& a = from_base.placements[i];
      const auto& b = from_views.placements[i];
      EXPECT_EQ(a.job_id, b.job_id) << after;
      ASSERT_EQ(a.tasks.size(), b.tasks.size()) << after;
      for (size_t t = 0; t < a.tasks.size(); ++t) {
        EXPECT_EQ(a.tasks[t].node_id, b.tasks[t].node_id) << after;
        EXPECT_EQ(a.tasks[t].gpu_ids, b.tasks[t].gpu_ids) << after;
      }
    }
    ASSERT_EQ(from_base.pending.size(), from_views.pending.size()) << after;
    for (size_t i = 0; i < from_base.pending.size(); ++i) {
      EXPECT_EQ(from_base.pending[i].reason, from_views.pending[i].reason) << after;
    }
    // The nodes set aside that every pending reason names, counted from the registry.
    size_t draining = 0, unhealthy = 0;
    for (const auto& [_, node] : nodes_.nodes()) {
      if (node.state != NodeState::kAlive) continue;
      draining += node.draining;
      unhealthy += !node.draining && node.unhealthy;
    }
    EXPECT_EQ(jobs_->capacity.draining(), draining) << after;
    EXPECT_EQ(jobs_->capacity.unhealthy(), unhealthy) << after;
    // Listed sorted by node id, as a pass numbers them (a NodeBase made from them needs no sort).
    const auto& listed = jobs_->capacity.nodes();
    EXPECT_TRUE(std::is_sorted(listed.begin(), listed.end(),
                               [](const sched::NodeView* a, const sched::NodeView* b) { return a->node_id < b->node_id; }))
        << after;
  }

  // Every task the job layer placed and has not seen end, by node.
  std::vector<api::TaskKey> live_tasks() {
    std::vector<api::TaskKey> out;
    for (const auto& [id, job] : jobs_->table.active()) {
      const AttemptRecord* attempt = job->current_attempt();
      for (const auto& task : attempt->tasks) {
        if (!task.terminal()) out.push_back({id, attempt->number, task.index});
      }
    }
    return out;
  }
};

TEST_F(ClusterCapacityTest, KeptViewEqualsOneRebuiltAfterRandomEvents) {
  for (unsigned seed = 1; seed <= 6; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 random(seed);
    const auto pick = [&random](size_t n) { return static_cast<size_t>(random() % n); };
    std::vector<std::string> node_ids;
    for (int i = 0; i < 6; ++i) {
      node_ids.push_back("node_" + std::to_string(seed) + "_" + std::to_string((i * 5) % 6));  // joins out of order
      add_node(node_ids.back(), 8, {0, 1, 2, 3});
    }
    check("nodes joined");
    for (int step = 0; step < 150; ++step) {
      const auto tasks = live_tasks();
      switch (random() % 9) {
        case 0:
        case 1: {  // a job of 1-3 tasks, some with GPUs, some exclusive, some in a queue
          api::JobSpec s = spec(1 + static_cast<int>(pick(3)), 1 + static_cast<double>(pick(3)));
          s.num_gpus = static_cast<int64_t>(pick(3));
          s.exclusive = pick(8) == 0;
          s.max_retries = 1;
          std::optional<Result<std::string>> result;
          jobs_->controller.submit(
              s, [&](Result<std::string> id) { result = std::move(id); },
              JobController::Submitter{pick(2) ? "alice" : "bob"});
          check("a submit");
          break;
        }
        case 2:
          if (!tasks.empty()) {
            const api::TaskKey& task = tasks[pick(tasks.size())];
            (void)jobs_->controller.on_task_started(node_of(task), task, 4242);
            check("a start");
          }
          break;
        case 3:
        case 4:
          if (!tasks.empty()) {
            api::TaskExit exit;
            exit.exit_code = static_cast<int>(pick(2));
            report_exit(tasks[pick(tasks.size())], exit);
            check("an exit");
          }
          break;
        case 5:
          if (!tasks.empty()) {
            (void)stop(tasks[pick(tasks.size())].job_id);
            check("a stop");
          }
          break;
        case 6: {  // drained or resumed
          std::set<std::string> drained = nodes_.drained();
          const std::string& id = node_ids[pick(node_ids.size())];
          if (!drained.erase(id)) drained.insert(id);
          nodes_.set_drained(drained);
          check("a drain");
          break;
        }
        case 7: {  // lost, then back with nothing running
          const std::string& id = node_ids[pick(node_ids.size())];
          nodes_.mark_dead(id);
          jobs_->controller.on_node_dead(id);
          check("a node lost");
          add_node(id, 8, {0, 1, 2, 3});
          jobs_->controller.on_node_registered(id, {}, {});
          check("a node back");
          break;
        }
        case 8: {  // unhealthy, or healthy again
          const std::string& id = node_ids[pick(node_ids.size())];
          api::HealthReport report;
          report.healthy = pick(2) == 0;
          report.reason = "a check failed";
          jobs_->controller.on_node_health(id, report);
          check("a health report");
          break;
        }
      }
    }
  }
}

TEST_F(ClusterCapacityTest, TasksOnANodeNotYetKnownCountOnceItRegisters) {
  add_node("node_a", 8, {0, 1});
  api::JobSpec s = spec(1, 2);
  s.num_gpus = 1;
  submit(s);
  const std::string node = jobs_->capacity.nodes().at(0)->node_id;
  EXPECT_EQ(jobs_->capacity.node(node)->free_gpu_ids, std::vector<int>{1});
  // The node goes away (erased, as `ag remove-node` does) and comes back: what its task
  // holds is taken off again.
  nodes_.erase(node);
  EXPECT_EQ(jobs_->capacity.node(node), nullptr);
  add_node(node, 8, {0, 1});
  EXPECT_EQ(jobs_->capacity.node(node)->free_gpu_ids, std::vector<int>{1});
  EXPECT_EQ(jobs_->capacity.node(node)->free.cpu_millis, 6000);
  check("the node back");
}

TEST_F(ClusterCapacityTest, AnExclusiveJobLeavesNothingFreeOnItsNode) {
  add_node("node_a", 8, {0, 1});
  api::JobSpec s = spec(1, 1);
  s.exclusive = true;
  const std::string id = submit(s);
  EXPECT_EQ(jobs_->capacity.node("node_a")->free, Resources{});
  EXPECT_TRUE(jobs_->capacity.node("node_a")->free_gpu_ids.empty());
  EXPECT_EQ(jobs_->capacity.use_by_owner().size(), 1u);
  ASSERT_TRUE(stop(id).ok());
  check("the stop");
}

TEST_F(ClusterCapacityTest, ANodeBackWithNothingAQueuedJobCanUsePostsNoPass) {
  add_node("node_a", 4, {0});
  add_node("node_b", 4, {0});
  api::JobSpec s = spec(1, 1);
  s.num_gpus = 1;
  const std::string first = submit(s);
  submit(s);
  start_all(channel_.take<api::Launch>());
  const std::string waiting = submit(s);  // no GPU is free
  ASSERT_EQ(job(waiting).state, JobState::kPending);
  clock_.run_ready();
  // node_a comes back (as after a head restart) running its task: CPUs free, no GPU,
  // and every queued job needs one: no pass.
  const std::string node = node_of({first, 0, 0});
  jobs_->controller.on_node_registered(node, {{{first, 0, 0}, 1000}}, {});
  EXPECT_EQ(clock_.run_ready(), 0);
  EXPECT_EQ(job(waiting).state, JobState::kPending);
  // A node with a GPU free asks for one, which places the job.
  add_node("node_c", 4, {0});
  jobs_->controller.on_node_registered("node_c", {}, {});
  EXPECT_GT(clock_.run_ready(), 0);
  EXPECT_EQ(job(waiting).state, JobState::kRunning);
  check("the registrations");
}

// Room only for jobs whose owner holds all her quota allows is room no pass can use: a
// storm of such registrations (a head restarted with quotas binding and nodes half
// free) would otherwise be a pass per node.
TEST_F(ClusterCapacityTest, ANodeBackWithRoomOnlyForJobsOverTheirQuotaPostsNoPass) {
  add_node("node_a", 4, {0});
  sched::Limits one;
  one.gpus = 1;
  Status set = invalid_argument("not called");
  jobs_->changes.set_quota(false, "alice", one, [&](const Status& s) { set = s; });
  clock_.run_ready();
  ASSERT_TRUE(set.ok()) << set.error().message;
  api::JobSpec s = spec(1, 1);
  s.num_gpus = 1;
  const auto submit_as = [&](const std::string& owner) {
    std::string id;
    jobs_->controller.submit(
        s, [&](Result<std::string> r) { id = r.ok() ? r.value() : ""; }, JobController::Submitter{owner});
    clock_.run_ready();
    return id;
  };
  const std::string first = submit_as("alice");
  start_all(channel_.take<api::Launch>());
  const std::string waiting = submit_as("alice");  // over her quota
  ASSERT_EQ(job(first).state, JobState::kRunning);
  ASSERT_EQ(job(waiting).state, JobState::kPending);
  EXPECT_EQ(job(waiting).pending_kind, sched::PendingKind::kQuota);
  // A node with a GPU free: only alice waits, and she may hold no more.
  add_node("node_b", 4, {0});
  jobs_->controller.on_node_registered("node_b", {}, {});
  EXPECT_EQ(clock_.run_ready(), 0);
  EXPECT_EQ(job(waiting).state, JobState::kPending);
  // Bob's job could use it: his registration asks for a pass, which places his.
  const std::string his = submit_as("bob");
  EXPECT_EQ(job(his).state, JobState::kRunning);
  add_node("node_c", 4, {0});
  const std::string his_next = submit_as("bob");
  ASSERT_EQ(job(his_next).state, JobState::kRunning);
  add_node("node_d", 4, {0});
  jobs_->controller.on_node_registered("node_d", {}, {});
  EXPECT_EQ(clock_.run_ready(), 0) << "only alice waits, over her quota";
  // A quota raised asks for a pass, which places her job.
  one.gpus = 2;
  jobs_->changes.set_quota(false, "alice", one, [&](const Status& s) { set = s; });
  clock_.run_ready();
  EXPECT_EQ(job(waiting).state, JobState::kRunning);
  check("the registrations");
}

TEST_F(ClusterCapacityTest, ANodeNoQueuedJobMayRunOnPostsNoPass) {
  // node_a (pool=a) and node_b (pool=b) are full; a job asking for pool=a waits for room
  // on such a node, and one in a queue whose nodes carry pool=b waits for one of those.
  const auto add_labelled = [&](const std::string& id, const std::string& pool) {
    add_node(id, 4);
    Node node = *nodes_.find(id);
    if (!pool.empty()) node.labels["pool"] = pool;
    nodes_.upsert(std::move(node));
    jobs_->controller.on_node_registered(id, {}, {});
  };
  add_labelled("node_a", "a");
  add_labelled("node_b", "b");
  clock_.run_ready();
  QueueDef pool_b;
  pool_b.nodes_with["pool"] = "b";
  Status set = invalid_argument("not called");
  jobs_->changes.set_queue("bees", pool_b, [&](const Status& s) { set = s; });
  clock_.run_ready();
  ASSERT_TRUE(set.ok()) << set.error().message;
  api::JobSpec on_a = spec(1, 4);
  on_a.constraints["pool"] = "a";
  api::JobSpec in_bees = spec(1, 4);
  in_bees.queue = "bees";
  submit(on_a);
  submit(in_bees);
  start_all(channel_.take<api::Launch>());
  const std::string waiting = submit(on_a);
  const std::string queued = submit(in_bees);
  for (const std::string& id : {waiting, queued}) {
    ASSERT_EQ(job(id).state, JobState::kPending);
    ASSERT_EQ(job(id).pending_kind, sched::PendingKind::kWaitingForResources) << "room will come";
  }
  // Nodes with room that neither may use: no pass (it would place nothing).
  add_labelled("node_plain", "");
  EXPECT_EQ(clock_.run_ready(), 0) << "no queued job may run on a node without the pool label";
  add_labelled("node_c", "c");
  EXPECT_EQ(clock_.run_ready(), 0) << "nor on one of another pool";
  // Another node of pool b: the job in the queue of pool b may run there, and does.
  add_labelled("node_b2", "b");
  clock_.run_ready();
  EXPECT_EQ(job(queued).state, JobState::kRunning);
  EXPECT_EQ(job(waiting).state, JobState::kPending);
  // Another of pool a: the other job runs there.
  add_labelled("node_a2", "a");
  clock_.run_ready();
  EXPECT_EQ(job(waiting).state, JobState::kRunning);
  check("the registrations");
}

}  // namespace
}  // namespace ag::head
