// The job layer over its real collaborators' interfaces and no daemon: a memory store, a
// node registry filled by hand, a fake worker channel and a fake clock. Each test
// drives a job through the events a worker would send and checks what the head sends
// back, what it records, and what it persists.
#include "head/jobs/job_layer.h"

#include "head/job_layer_fixture.h"

namespace ag::head {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TEST_F(JobLayerTest, SubmitPlaceLaunchExitSucceeds) {
  add_node("node_a");
  add_node("node_b");
  std::string id = submit(spec(2, 4));
  EXPECT_EQ(job(id).state, JobState::kRunning);
  auto launches = channel_.take<api::Launch>();
  ASSERT_EQ(launches.size(), 2u);
  // One 4-CPU task per node; task 0's node holds the master port.
  std::set<std::string> nodes{launches[0].first, launches[1].first};
  EXPECT_EQ(nodes, (std::set<std::string>{"node_a", "node_b"}));
  const api::Launch& rank0 = launches[0].second;
  EXPECT_EQ(rank0.task, (api::TaskKey{id, 0, 0}));
  EXPECT_EQ(rank0.entrypoint, "python train.py");
  EXPECT_EQ(rank0.env.at("WORLD_SIZE"), "2");
  EXPECT_EQ(rank0.env.at("MASTER_PORT"), std::to_string(api::kMasterPortFirst));
  EXPECT_EQ(launches[1].second.env.at("MASTER_ADDR"), rank0.env.at("AG_NODE_IP"));

  start_all(launches);
  EXPECT_EQ(job(id).attempts[0].tasks[1].pid, 1001);
  exit_all(id, 0, 2, 0);
  EXPECT_EQ(job(id).state, JobState::kSucceeded);
  clock_.advance(20);  // changes are written together, at most once per 20 ms
  EXPECT_EQ(stored(id).state, JobState::kSucceeded);  // durable, not only in memory
  EXPECT_TRUE(channel_.take<api::Kill>().empty());
  // A finished job holds no stored text of its spec; its record is written whole.
  EXPECT_EQ(job(id).spec_text, nullptr);
  auto record = store_.get(store::kJobsTable, id);
  ASSERT_TRUE(record.ok() && record.value());
  EXPECT_EQ(*record.value(), job_record_text(job(id)));
}

// Two nodes with four GPUs each (numbered apart so that a mix-up shows) and a gang of
// four tasks with two GPUs each: on each node both tasks see the node's four GPUs, and
// LOCAL_RANK x 2 is where each one's own begin; isolated, each sees its own.
TEST_F(JobLayerTest, APackageIsLiveWhileAJobRunsInItAndKeptWhileAFinishedJobHasIt) {
  add_node("node_a");
  const std::string hash(64, 'c');
  api::JobSpec s = spec(1, 1);
  s.runtime_env.working_dir = "sha256:" + hash;
  std::string id = submit(s);
  EXPECT_EQ(jobs_->table.package_use(hash), JobTable::PackageUse::kLiveJobs);
  EXPECT_EQ(jobs_->table.package_use(std::string(64, 'd')), JobTable::PackageUse::kUnused);
  start_all(channel_.take<api::Launch>());
  exit_all(id, 0, 1, 0);
  EXPECT_EQ(job(id).state, JobState::kSucceeded);
  EXPECT_EQ(jobs_->table.package_use(hash), JobTable::PackageUse::kFinishedJobs);
}

TEST_F(JobLayerTest, EachTaskSeesItsGangsGpusOnTheNodeWithItsOwnAtLocalRankTimesNumGpus) {
  for (bool isolated : {false, true}) {
    SCOPED_TRACE(isolated ? "isolated" : "shared");
    std::string suffix = isolated ? "_i" : "_s";
    add_node("node_a" + suffix, 8, {4, 5, 6, 7});
    add_node("node_b" + suffix, 8, {0, 1, 2, 3});
    api::JobSpec s = spec(4, 1);
    s.num_gpus = 2;
    s.gpu_isolation = isolated;
    std::string id = submit(s);
    auto launches = channel_.take<api::Launch>();
    ASSERT_EQ(launches.size(), 4u);
    std::map<std::string, std::vector<const api::Launch*>> by_node;
    for (const auto& [node, launch] : launches) by_node[node].push_back(&launch);
    ASSERT_EQ(by_node.size(), 2u);
    for (const auto& [node, tasks] : by_node) {
      ASSERT_EQ(tasks.size(), 2u);
      for (const api::Launch* launch : tasks) {
        const auto& env = launch->env;
        int local_rank = std::stoi(env.at("LOCAL_RANK"));
        std::string own = env.at("AG_GPU_IDS");
        EXPECT_EQ(own, std::to_string(launch->gpu_ids[0]) + "," + std::to_string(launch->gpu_ids[1]));
        std::string seen = env.at("CUDA_VISIBLE_DEVICES");
        if (isolated) {
          EXPECT_EQ(seen, own);
        } else {
          // Four ids, one character each: its own two begin at index local_rank x 2.
          ASSERT_EQ(seen.size(), 7u) << seen;
          EXPECT_EQ(seen.substr(static_cast<size_t>(local_rank) * 4, 3), own) << seen;
          EXPECT_EQ(seen, tasks[0]->env.at("CUDA_VISIBLE_DEVICES"));
        }
      }
    }
    start_all(launches);
    exit_all(id, 0, 4, 0);
  }
}

// The task that failed the job first: its last lines are kept with the attempt (and
// survive a restart), and the job's failure names it; the task stopped because of it
// and a job that succeeded have none.
TEST_F(JobLayerTest, AFailedJobKeepsTheFailingTasksLastLines) {
  add_node("node_a");
  add_node("node_b");
  std::string id = submit(spec(2, 4));
  auto launches = channel_.take<api::Launch>();
  start_all(launches);
  ASSERT_TRUE(logs_.append({id, 0, 0}, 0, "rank 0 waiting\n"));
  ASSERT_TRUE(logs_.append({id, 0, 1}, 0, "loading\nTraceback (most recent call last):\nValueError: bad shape\n"));
  api::TaskExit failed;
  failed.exit_code = 1;
  report_exit({id, 0, 1}, failed);
  api::TaskExit stopped;
  stopped.signal = 15;
  report_exit({id, 0, 0}, stopped);
  clock_.advance(20);
  ASSERT_EQ(job(id).state, JobState::kFailed);
  const std::string lines = "loading\nTraceback (most recent call last):\nValueError: bad shape\n";
  EXPECT_EQ(job(id).attempts[0].failure_tail, lines);
  nlohmann::json failure = failure_json(job(id));
  EXPECT_EQ(failure["task_index"], 1);
  EXPECT_EQ(failure["attempt"], 0);
  EXPECT_EQ(failure["last_lines"], lines);
  EXPECT_EQ(failure["reason"], "exited with code 1");
  EXPECT_EQ(stored(id).attempts[0].failure_tail, lines);
  EXPECT_EQ(stored(id).attempts[0].failed_task, 1);

  std::string ok = submit(spec(1, 1));
  start_all(channel_.take<api::Launch>());
  exit_all(ok, 0, 1, 0);
  EXPECT_TRUE(failure_json(job(ok)).is_null());
  EXPECT_FALSE(job(ok).attempts[0].failure_tail.has_value());
}

TEST_F(JobLayerTest, ABurstOfTaskReportsIsWrittenInAFewWritesAndAfterDurableWaitsForThem) {
  add_node("node_a", 64);
  std::string id = submit(spec(50, 1));
  auto launches = channel_.take<api::Launch>();
  clock_.advance(20);
  int64_t writes = store_.writes();
  start_all(launches);
  exit_all(id, 0, 50, 0);
  bool durable = false;
  jobs_->writer.after_durable([&] { durable = true; });
  EXPECT_FALSE(durable);
  clock_.advance(20);
  EXPECT_TRUE(durable);
  EXPECT_EQ(stored(id).state, JobState::kSucceeded);
  // 100 task reports within one interval: one write, not one per report.
  EXPECT_LE(store_.writes() - writes, 2);
}

TEST_F(JobLayerTest, AChangeTheStoreCannotWriteIsWrittenAgainAndAfterDurableWaitsForIt) {
  add_node("node_a");
  std::string id = submit(spec());
  auto launches = channel_.take<api::Launch>();
  clock_.advance(20);
  store_.fail_next_writes(1);
  start_all(launches);
  exit_all(id, 0, 1, 0);
  bool durable = false;
  jobs_->writer.after_durable([&] { durable = true; });
  clock_.advance(20);
  EXPECT_FALSE(durable);  // the write failed
  EXPECT_EQ(stored(id).state, JobState::kRunning);
  clock_.advance(1000);
  EXPECT_TRUE(durable);
  EXPECT_EQ(stored(id).state, JobState::kSucceeded);
}

// A head killed -9 before a job's end is stored finishes the job again after its
// restart: the stream shows the end only once stored, so nobody sees it twice.
TEST_F(JobLayerTest, AJobsEndIsInTheEventStreamOnlyOnceStored) {
  add_node("node_a");
  std::string id = submit(spec());
  auto launches = channel_.take<api::Launch>();
  clock_.advance(20);
  EventFilter ends;
  ends.types = {"job.succeeded"};
  const int64_t cursor = jobs_->cluster_events.last_seq();
  std::vector<std::string> heard;
  jobs_->cluster_events.listen([&](const ClusterEvent& e) { heard.push_back(e.type); });
  store_.fail_next_writes(1);
  start_all(launches);
  exit_all(id, 0, 1, 0);
  EXPECT_EQ(job(id).state, JobState::kSucceeded);
  clock_.advance(20);  // the write fails
  EXPECT_TRUE(jobs_->cluster_events.after(cursor, ends, 10).events.empty());
  EXPECT_TRUE(heard.empty());
  // A reader that polls meanwhile does not move past it.
  const int64_t polled = jobs_->cluster_events.after(cursor, {}, 10).cursor;
  clock_.advance(1000);  // written again
  EXPECT_EQ(stored(id).state, JobState::kSucceeded);
  ASSERT_EQ(jobs_->cluster_events.after(polled, ends, 10).events.size(), 1u);
  ASSERT_FALSE(heard.empty());
  EXPECT_EQ(heard.back(), "job.succeeded");
}

TEST_F(JobLayerTest, ATaskIsLaunchedOnlyOnceItsPlacementIsStoredAndOnlyOnce) {
  std::string id = submit_placed_but_unstored();
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(job(id).state, JobState::kRunning);
  EXPECT_TRUE(channel_.take<api::Launch>().empty());  // a restart now would not know attempt 0
  EXPECT_TRUE(stored(id).attempts.empty());
  // The node re-registers meanwhile: the launch still waits, and is not sent twice.
  jobs_->controller.on_node_registered("node_a", {}, {});
  clock_.run_ready();
  EXPECT_TRUE(channel_.take<api::Launch>().empty());
  clock_.advance(1000);  // the write is tried again
  ASSERT_EQ(stored(id).attempts.size(), 1u);
  auto launches = channel_.take<api::Launch>();
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].second.task, (api::TaskKey{id, 0, 0}));
}

TEST_F(JobLayerTest, AJobStoppedBeforeItsPlacementIsStoredIsNeverLaunched) {
  std::string id = submit_placed_but_unstored();
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(stop(id, "alice").ok());
  clock_.advance(1000);
  clock_.advance(1000);
  EXPECT_EQ(stored(id).attempts.size(), 1u);
  EXPECT_TRUE(channel_.take<api::Launch>().empty());
}

TEST_F(JobLayerTest, AJobSubmittedWhileNothingWaitsIsStoredPlacedInOneWrite) {
  add_node("node_a");
  // Another job first: the batch that writes jobs again with their events' places has
  // just run, and the next waits its interval.
  submit(spec());
  channel_.take<api::Launch>();
  const int64_t writes = store_.writes();
  std::optional<Result<std::string>> result;
  jobs_->controller.submit(spec(), [&](Result<std::string> id) { result = std::move(id); });
  EXPECT_TRUE(channel_.take<api::Launch>().empty());  // nothing is launched before the write lands
  clock_.run_ready();
  ASSERT_TRUE(result.has_value() && result->ok());
  const std::string id = result->value();
  EXPECT_EQ(store_.writes(), writes + 1);
  const Job kept = stored(id);
  ASSERT_EQ(kept.attempts.size(), 1u);
  EXPECT_EQ(kept.attempts[0].tasks.at(0).node_id, "node_a");
  EXPECT_EQ(job(id).state, JobState::kRunning);
  auto launches = channel_.take<api::Launch>();
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].second.task, (api::TaskKey{id, 0, 0}));
  EXPECT_THAT(event_texts(id), ::testing::ElementsAre(::testing::StartsWith("submitted"),
                                                      ::testing::StartsWith("attempt 0 placed: task 0 on node_a")));
  // Its events are in the cluster's stream, the submit first.
  const auto& events = jobs_->table.events(id);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_GT(events[0].seq, 0u);
  EXPECT_EQ(events[0].type, "job.submitted");
  EXPECT_EQ(events[1].seq, events[0].seq + 1);
  clock_.advance(100);
  EXPECT_EQ(stored(id).attempts.size(), 1u);
  start_all(launches);
  exit_all(id, 0, 1, 0);
  EXPECT_EQ(job(id).state, JobState::kSucceeded);
}

TEST_F(JobLayerTest, WhatAJobPlacedAtItsSubmitHoldsIsReservedUntilItIsStored) {
  add_node("node_a");  // 4 CPUs
  std::optional<Result<std::string>> first, second;
  jobs_->controller.submit(spec(1, 4), [&](Result<std::string> id) { first = std::move(id); });
  jobs_->controller.submit(spec(1, 4), [&](Result<std::string> id) { second = std::move(id); });
  clock_.run_ready();
  ASSERT_TRUE(first && first->ok() && second && second->ok());
  EXPECT_EQ(job(first->value()).state, JobState::kRunning);
  EXPECT_EQ(job(second->value()).state, JobState::kPending);
  EXPECT_EQ(channel_.take<api::Launch>().size(), 1u);
}

TEST_F(JobLayerTest, AJobIsNotPlacedAtItsSubmitAheadOfQueuedJobs) {
  add_node("node_a");  // 4 CPUs
  const std::string running = submit(spec(1, 3));
  const std::string waiting = submit(spec(1, 2));
  EXPECT_EQ(job(waiting).state, JobState::kPending);
  // One CPU is free, and this job needs one: it still waits behind the one queued.
  const std::string later = submit(spec(1, 1));
  EXPECT_EQ(job(later).state, JobState::kPending);
  EXPECT_EQ(job(running).state, JobState::kRunning);
}

TEST_F(JobLayerTest, AFailedSubmitGivesBackWhatItsJobWasPlacedOn) {
  add_node("node_a");  // 4 CPUs
  store_.fail_next_writes(1);
  std::optional<Result<std::string>> result;
  jobs_->controller.submit(spec(1, 4), [&](Result<std::string> id) { result = std::move(id); });
  clock_.run_ready();
  ASSERT_TRUE(result.has_value());
  ASSERT_FALSE(result->ok());
  EXPECT_TRUE(channel_.take<api::Launch>().empty());
  EXPECT_EQ(jobs_->capacity.node("node_a")->free.cpu_millis, 4000);
  const std::string id = submit(spec(1, 4));
  EXPECT_EQ(job(id).state, JobState::kRunning);
  EXPECT_EQ(channel_.take<api::Launch>().size(), 1u);
}

TEST_F(JobLayerTest, StoreWriteFailureRefusesTheJobAndKeepsNothing) {
  add_node("node_a");
  store_.fail_next_writes(1);
  std::optional<Result<std::string>> result;
  jobs_->controller.submit(spec(), [&](Result<std::string> id) { result = std::move(id); });
  clock_.run_ready();
  ASSERT_TRUE(result.has_value());
  ASSERT_FALSE(result->ok());
  EXPECT_EQ(result->error().code, ErrorCode::kResourceExhausted);
  EXPECT_TRUE(jobs_->table.list().empty());
  EXPECT_TRUE(channel_.sent.empty());
  // The next submission goes through.
  submit(spec());
  EXPECT_EQ(jobs_->table.list().size(), 1u);
}

TEST_F(JobLayerTest, OnlyTheTasksOwnNodeMayReportOnIt) {
  add_node("node_a");
  add_node("node_b");
  std::string id = submit(spec(2, 4));
  auto launches = channel_.take<api::Launch>();
  start_all(launches);
  const api::TaskKey task{id, 0, 0};
  const std::string other = node_of(task) == "node_a" ? "node_b" : "node_a";
  api::TaskExit success;
  success.exit_code = 0;
  Status forged = jobs_->controller.on_task_exited(other, task, success);
  ASSERT_FALSE(forged.ok());
  EXPECT_EQ(forged.error().code, ErrorCode::kPermissionDenied);
  EXPECT_EQ(forged.error().message, "task " + task.to_string() + " is not placed on node " + other);
  EXPECT_EQ(job(id).attempts[0].tasks[0].state, TaskState::kRunning);
  EXPECT_EQ(jobs_->controller.on_task_started(other, task, 666).error().code, ErrorCode::kPermissionDenied);
  EXPECT_EQ(job(id).attempts[0].tasks[0].pid, 1000);
  Status unknown = jobs_->controller.on_task_exited("node_a", {"job_nope", 0, 0}, success);
  EXPECT_EQ(unknown.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(jobs_->controller.on_task_exited("node_a", {id, 7, 0}, success).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(jobs_->controller.on_task_exited("node_a", {id, 0, 9}, success).error().code, ErrorCode::kNotFound);
  exit_all(id, 0, 2, 0);
  EXPECT_EQ(job(id).state, JobState::kSucceeded);
}

TEST_F(JobLayerTest, RetriedSubmissionIdReturnsTheSameJob) {
  add_node("node_a");
  api::JobSpec s = spec();
  s.submission_id = "client-chosen-1";
  std::string first = submit(s);
  std::string second = submit(s);
  EXPECT_EQ(first, second);
  EXPECT_EQ(jobs_->table.list().size(), 1u);
}

TEST_F(JobLayerTest, PendingReasonIsLoggedOncePerKindAndPlacedWhenANodeJoins) {
  std::string id = submit(spec());
  EXPECT_EQ(job(id).state, JobState::kPending);
  EXPECT_THAT(job(id).message, HasSubstr("no alive nodes"));
  // More passes with the same reason log nothing new.
  std::string other = submit(spec());
  clock_.run_ready();
  auto pending_events = [&] {
    int n = 0;
    for (const auto& e : event_texts(id)) n += e.rfind("pending: ", 0) == 0;
    return n;
  };
  EXPECT_EQ(pending_events(), 1);
  // A node too small for the job: the reason changes kind, and is logged again.
  add_node("node_small", 1);
  api::JobSpec big = spec(1, 2);
  big.allow_unschedulable = true;  // queued for nodes still to join
  std::string too_big = submit(big);
  EXPECT_THAT(job(too_big).message, HasSubstr("cannot be placed: needs 2 CPUs per task"));
  EXPECT_EQ(job(too_big).pending_kind, sched::PendingKind::kInfeasible);
  // The first two jobs were placed on the new node one after the other.
  EXPECT_EQ(job(id).state, JobState::kRunning);
  EXPECT_EQ(job(other).state, JobState::kPending);
  EXPECT_EQ(job(other).pending_kind, sched::PendingKind::kWaitingForResources);
}

TEST_F(JobLayerTest, HigherPriorityIsPlacedFirstAndTiesKeepSubmitOrder) {
  add_node("node_a", 2);
  const std::string running = submit(spec(1, 2));  // holds the node
  clock_.run_ready();
  api::JobSpec normal = spec(1, 2), high = spec(1, 2), low = spec(1, 2);
  high.priority = 100;
  low.priority = -100;
  const std::string first_normal = submit(normal), low_id = submit(low), high_id = submit(high),
                    second_normal = submit(normal);
  clock_.run_ready();
  auto positions = queue_positions(*jobs_);
  EXPECT_EQ(positions.at(job(high_id).queue_seq), 1);
  EXPECT_EQ(positions.at(job(first_normal).queue_seq), 2);
  EXPECT_EQ(positions.at(job(second_normal).queue_seq), 3);
  EXPECT_EQ(positions.at(job(low_id).queue_seq), 4);

  // The node frees: the high-priority job gets it, though submitted after two others.
  exit_all(running, 0, 1, 0);
  EXPECT_EQ(job(high_id).state, JobState::kRunning);
  EXPECT_EQ(job(first_normal).state, JobState::kPending);
  exit_all(high_id, 0, 1, 0);
  EXPECT_EQ(job(first_normal).state, JobState::kRunning);
  EXPECT_EQ(job(low_id).state, JobState::kPending);
}

TEST_F(JobLayerTest, JobsNoNodeCanHoldDoNotStopTheJobsBehindThem) {
  add_node("node_a", 2);
  // More infeasible jobs than one scheduling pass looks at, then one that fits.
  std::vector<std::string> infeasible;
  api::JobSpec big = spec(1, 8);
  big.allow_unschedulable = true;  // queued for nodes still to join
  for (int i = 0; i < 100; ++i) infeasible.push_back(submit(big));
  std::string fits = submit(spec(1, 1));
  clock_.run_ready();
  EXPECT_EQ(job(fits).state, JobState::kRunning);
  for (const auto& id : infeasible) {
    EXPECT_EQ(job(id).state, JobState::kPending);
    EXPECT_EQ(job(id).pending_kind, sched::PendingKind::kInfeasible);
    EXPECT_THAT(job(id).message, HasSubstr("cannot be placed: needs 8 CPUs per task"));
  }
  // A node that can hold them brings them back into scheduling.
  add_node("node_big", 16);
  jobs_->controller.on_node_registered("node_big", {}, {});
  clock_.run_ready();
  EXPECT_EQ(job(infeasible[0]).state, JobState::kRunning);
  EXPECT_EQ(job(infeasible[1]).state, JobState::kRunning);
  EXPECT_EQ(job(infeasible[2]).state, JobState::kPending);
  EXPECT_EQ(job(infeasible[2]).pending_kind, sched::PendingKind::kWaitingForResources);
}

TEST_F(JobLayerTest, AQueueLongerThanOnePassIsPlacedWholeWhenRoomComesAtOnce) {
  // 200 jobs queued before any node (more than one pass looks at), then room for all
  // of them joins at once: nothing else happens (no task ends, no submit), yet every
  // job is placed, a pass after each pass that filled its window and placed some.
  api::JobSpec one = spec(1, 1);
  one.allow_unschedulable = true;
  std::vector<std::string> ids(200);
  for (auto& id : ids) id = submit(one);
  EXPECT_EQ(job(ids.back()).state, JobState::kPending);
  for (int n = 0; n < 26; ++n) {
    const std::string node = "node_" + std::to_string(n);
    add_node(node, 8);
    jobs_->controller.on_node_registered(node, {}, {});
  }
  clock_.run_ready();
  for (const auto& id : ids) ASSERT_EQ(job(id).state, JobState::kRunning) << id;
  // 8 CPUs are left: 8 more run; the queue behind them, blocked, is not weighed again
  // and again on its own (run_ready would not return).
  std::vector<std::string> more(100);
  for (auto& id : more) id = submit(one);
  EXPECT_EQ(clock_.run_ready(), 0);
  EXPECT_EQ(job(more[7]).state, JobState::kRunning);
  EXPECT_EQ(job(more[8]).state, JobState::kPending);
  EXPECT_EQ(job(more[8]).pending_kind, sched::PendingKind::kWaitingForResources);
}

TEST_F(JobLayerTest, MasterPortsAreUniqueOnTheirNodeAndAcrossNodesWhileThereAreEnough) {
  // A range of 3 ports and 8 running jobs, 4 with their master on each of two nodes.
  config_.master_port_first = 40000;
  config_.master_port_last = 40002;
  make_manager();
  add_node("node_a", 4);
  add_node("node_b", 4);
  std::vector<std::string> ids(8);
  for (auto& id : ids) id = submit(spec(1, 1));
  std::map<std::string, std::set<int>> ports_by_node;
  std::vector<int> first_three;
  for (const auto& id : ids) {
    const AttemptRecord& attempt = job(id).attempts.at(0);
    ASSERT_EQ(job(id).state, JobState::kRunning);
    // Three ports for eight masters: each node's own are told apart as long as they
    // can be (the fourth on a node shares the range's first port).
    ports_by_node[attempt.tasks.at(0).node_id].insert(attempt.master_port);
    if (first_three.size() < 3) first_three.push_back(attempt.master_port);
  }
  // The first three, while ports are free anywhere, got three different ones.
  EXPECT_EQ(std::set<int>(first_three.begin(), first_three.end()).size(), 3u);
  ASSERT_EQ(ports_by_node.size(), 2u);
  for (const auto& [node, ports] : ports_by_node) EXPECT_EQ(ports.size(), 3u) << node;
  // A finished job's port is free again on its node.
  const std::string done = ids[0];
  const std::string node = job(done).attempts[0].tasks[0].node_id;
  const int port = job(done).attempts[0].master_port;
  exit_all(done, 0, 1, 0);
  const std::string next = submit(spec(1, 1));
  ASSERT_EQ(job(next).attempts.at(0).tasks.at(0).node_id, node);
  EXPECT_EQ(job(next).attempts[0].master_port, port);
}

TEST_F(JobLayerTest, AJobNoNodeCouldEverRunIsRefusedWithTheReasonUnlessAskedToQueueIt) {
  // No node yet: queued (workers may be about to join).
  api::JobSpec gpus = spec(2, 1);
  gpus.num_gpus = 2;
  std::string early = submit(gpus);
  EXPECT_EQ(job(early).state, JobState::kPending);
  add_node("node_a", 4, {0});
  add_node("node_b", 4, {0});
  Result<std::string> refused = invalid_argument("not called");
  jobs_->controller.submit(gpus, [&](Result<std::string> r) { refused = std::move(r); });
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(refused.error().message, AllOf(HasSubstr("no node of this cluster could ever run this job"),
                                             HasSubstr("needs 2 GPUs per task; largest node has 1"),
                                             HasSubstr("--allow-unschedulable")));
  // More tasks than the whole cluster can ever hold at once.
  Result<std::string> too_many = invalid_argument("not called");
  jobs_->controller.submit(spec(3, 4), [&](Result<std::string> r) { too_many = std::move(r); });
  ASSERT_FALSE(too_many.ok());
  EXPECT_THAT(too_many.error().message, HasSubstr("the cluster can hold at most 2 such tasks"));
  clock_.run_ready();
  EXPECT_EQ(jobs_->table.list().size(), 1u);  // nothing else was kept
  gpus.allow_unschedulable = true;
  std::string queued = submit(gpus);
  EXPECT_EQ(job(queued).state, JobState::kPending);
  EXPECT_EQ(job(queued).pending_kind, sched::PendingKind::kInfeasible);
}

TEST_F(JobLayerTest, ASubmissionIdNamesOneSpecAndWorksAsTheJobsAlias) {
  add_node("node_a");
  api::JobSpec s = spec(1, 1);
  s.submission_id = "run-7";
  std::string id = submit(s);
  EXPECT_EQ(submit(s), id);  // a retry gets the same job
  EXPECT_EQ(jobs_->table.find_submission("", "run-7")->id, id);
  EXPECT_EQ(jobs_->table.find_submission("someone-else", "run-7"), nullptr);
  s.entrypoint = "python other.py";
  Result<std::string> reused = invalid_argument("not called");
  jobs_->controller.submit(s, [&](Result<std::string> r) { reused = std::move(r); });
  ASSERT_FALSE(reused.ok());
  EXPECT_EQ(reused.error().code, ErrorCode::kConflict);
  EXPECT_THAT(reused.error().message, AllOf(HasSubstr("submission_id \"run-7\" was already used for job " + id),
                                            HasSubstr("different spec")));
  clock_.run_ready();
  EXPECT_EQ(jobs_->table.list().size(), 1u);
}

TEST_F(JobLayerTest, ADrainedNodeTakesNoNewTasksUntilResumedAndStaysDrainedAcrossARestart) {
  add_node("node_a", 4);
  Status drained = invalid_argument("not called");
  jobs_->changes.set_draining("node_a", true, [&](const Status& s) { drained = s; });
  clock_.run_ready();
  ASSERT_TRUE(drained.ok()) << drained.error().message;
  EXPECT_TRUE(nodes_.find("node_a")->draining);
  // Still accepted (the node will take tasks again), but not placed.
  std::string id = submit(spec(1, 1));
  EXPECT_EQ(job(id).state, JobState::kPending);
  EXPECT_THAT(job(id).message, HasSubstr("1 node(s) draining take no new tasks"));
  // A head started again over the same store still has it drained.
  NodeRegistry fresh;
  JobLayer again({clock_, store_, fresh, channel_, logs_, clock_}, config_);
  ASSERT_TRUE(again.recover().ok());
  EXPECT_EQ(fresh.drained(), (std::set<std::string>{"node_a"}));
  jobs_->changes.set_draining("node_a", false, [&](const Status& s) { drained = s; });
  clock_.run_ready();
  EXPECT_EQ(job(id).state, JobState::kRunning);
  Status unknown;
  jobs_->changes.set_draining("node_zz", true, [&](const Status& s) { unknown = s; });
  EXPECT_EQ(unknown.error().code, ErrorCode::kNotFound);
}

// Each policy record holds a whole table; changes sent before the one ahead of them is
// stored must each keep the others', in the head and in the store.
TEST_F(JobLayerTest, PolicyChangesSentTogetherAreAllKept) {
  add_node("node_a", 4);
  add_node("node_b", 4);
  std::vector<Status> ended(6, invalid_argument("not called"));
  sched::Limits four;
  four.gpus = 4;
  jobs_->changes.set_draining("node_a", true, [&](const Status& s) { ended[0] = s; });
  jobs_->changes.set_draining("node_b", true, [&](const Status& s) { ended[1] = s; });
  jobs_->changes.set_quota(false, "alice", four, [&](const Status& s) { ended[2] = s; });
  jobs_->changes.set_quota(false, "bob", four, [&](const Status& s) { ended[3] = s; });
  jobs_->changes.set_queue("night", QueueDef{}, [&](const Status& s) { ended[4] = s; });
  jobs_->changes.set_queue("day", QueueDef{}, [&](const Status& s) { ended[5] = s; });
  clock_.run_ready();
  for (const Status& s : ended) ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(nodes_.drained(), (std::set<std::string>{"node_a", "node_b"}));
  EXPECT_EQ(jobs_->policy.user_quotas().size(), 2u);
  EXPECT_EQ(jobs_->policy.queues().size(), 2u);
  NodeRegistry fresh;
  JobLayer again({clock_, store_, fresh, channel_, logs_, clock_}, config_);
  ASSERT_TRUE(again.recover().ok());
  EXPECT_EQ(fresh.drained(), (std::set<std::string>{"node_a", "node_b"}));
  EXPECT_EQ(again.policy.user_quotas().size(), 2u);
  EXPECT_EQ(again.policy.queues().size(), 2u);
}

// A change the store refuses ends alone: the one sent after it is kept, without it.
TEST_F(JobLayerTest, APolicyChangeTheStoreRefusesTakesNoneSentWithItAlong) {
  sched::Limits four;
  four.gpus = 4;
  Status first, second = invalid_argument("not called"), unknown;
  store_.fail_next_writes(1);
  jobs_->changes.set_quota(false, "alice", four, [&](const Status& s) { first = s; });
  jobs_->changes.set_quota(false, "bob", four, [&](const Status& s) { second = s; });
  jobs_->changes.set_draining("node_zz", true, [&](const Status& s) { unknown = s; });
  clock_.run_ready();
  EXPECT_FALSE(first.ok());
  ASSERT_TRUE(second.ok()) << second.error().message;
  EXPECT_EQ(unknown.error().code, ErrorCode::kNotFound) << "a refused change ends in its turn too";
  EXPECT_EQ(jobs_->policy.user_quotas().count("alice"), 0u);
  EXPECT_EQ(jobs_->policy.user_quotas().count("bob"), 1u);
  NodeRegistry fresh;
  JobLayer again({clock_, store_, fresh, channel_, logs_, clock_}, config_);
  ASSERT_TRUE(again.recover().ok());
  EXPECT_EQ(again.policy.user_quotas().count("alice"), 0u);
  EXPECT_EQ(again.policy.user_quotas().count("bob"), 1u);
}

TEST_F(JobLayerTest, AJobBeyondWhatOnePassLooksAtStillSaysWhyItWaits) {
  add_node("node_a", 1);
  std::vector<std::string> ids;
  for (int i = 0; i < 100; ++i) ids.push_back(submit(spec(1, 1)));
  clock_.run_ready();
  EXPECT_EQ(job(ids[0]).state, JobState::kRunning);
  EXPECT_EQ(job(ids[1]).pending_kind, sched::PendingKind::kWaitingForResources);
  EXPECT_EQ(job(ids[99]).state, JobState::kPending);
  EXPECT_EQ(job(ids[99]).message, "queued behind jobs submitted before it");
}

TEST_F(JobLayerTest, NodeLossFailsTheGangKillsTheRestAndRetries) {
  add_node("node_a");
  add_node("node_b");
  api::JobSpec s = spec(2, 4);
  s.max_retries = 1;
  std::string id = submit(s);
  auto launches = channel_.take<api::Launch>();
  start_all(launches);
  nodes_.mark_dead("node_b");
  jobs_->controller.on_node_dead("node_b");
  clock_.run_ready();
  auto kills = channel_.take<api::Kill>();
  ASSERT_EQ(kills.size(), 1u);
  EXPECT_EQ(kills[0].first, "node_a");
  EXPECT_EQ(kills[0].second.grace_ms, 3000);
  // The killed task's end completes the attempt; the retry waits for capacity.
  const int survivor = kills[0].second.task.task_index;
  api::TaskExit killed;
  killed.signal = 15;
  report_exit({id, 0, survivor}, killed);
  clock_.run_ready();
  EXPECT_EQ(job(id).state, JobState::kPending);
  EXPECT_THAT(job(id).attempts[0].failure_reason, HasSubstr("node_b"));
  report_exit({id, 0, survivor}, killed);  // a duplicate report changes nothing
  clock_.run_ready();
  EXPECT_EQ(job(id).state, JobState::kPending);
  add_node("node_c");
  jobs_->controller.on_node_registered("node_c", {}, {});
  clock_.run_ready();
  // Not before its retry delay (3 s by default) has passed.
  EXPECT_EQ(job(id).state, JobState::kPending);
  EXPECT_THAT(job(id).message, HasSubstr("attempt 1 of 2 starts in 3s"));
  clock_.advance(2999);
  EXPECT_EQ(job(id).state, JobState::kPending);
  clock_.advance(1);
  EXPECT_EQ(job(id).state, JobState::kRunning);
  EXPECT_EQ(job(id).attempts.size(), 2u);
  EXPECT_EQ(channel_.take<api::Launch>().size(), 2u);
}

TEST_F(JobLayerTest, LaunchToAnUnreachableNodeEndsTheTaskAsNotStarted) {
  add_node("node_a");
  channel_.unreachable.insert("node_a");
  std::string id = submit(spec());
  clock_.run_ready();
  EXPECT_EQ(job(id).state, JobState::kFailed);
  EXPECT_THAT(job(id).message, HasSubstr("its node is not connected"));
}

class ReconnectTest : public JobLayerTest {
 protected:
  // A two-task job on node_a, placed (and, when `started`, running).
  std::string placed_job(bool started) {
    add_node("node_a", 8);
    std::string id = submit(spec(2, 1));
    auto launches = channel_.take<api::Launch>();
    EXPECT_EQ(launches.size(), 2u);
    if (started) start_all(launches);
    return id;
  }
};

TEST_F(ReconnectTest, RunningTasksTheHeadWantsAreAdoptedWithTheirPids) {
  std::string id = placed_job(/*started=*/false);
  jobs_->controller.on_node_registered("node_a", {{{id, 0, 0}, 501}, {{id, 0, 1}, 502}}, {});
  clock_.run_ready();
  EXPECT_EQ(job(id).attempts[0].tasks[0].state, TaskState::kRunning);
  EXPECT_EQ(job(id).attempts[0].tasks[1].pid, 502);
  EXPECT_TRUE(channel_.sent.empty());  // nothing killed, nothing relaunched
}

TEST_F(ReconnectTest, RunningTasksOfFinishedOrUnknownJobsAreKilled) {
  std::string id = placed_job(/*started=*/true);
  exit_all(id, 0, 2, 0);
  ASSERT_EQ(job(id).state, JobState::kSucceeded);
  jobs_->controller.on_node_registered("node_a", {{{id, 0, 1}, 502}, {{"job_unknown", 0, 0}, 7}}, {});
  auto kills = channel_.take<api::Kill>();
  ASSERT_EQ(kills.size(), 2u);
  EXPECT_EQ(kills[0].second.task, (api::TaskKey{id, 0, 1}));
  EXPECT_EQ(kills[1].second.task, (api::TaskKey{"job_unknown", 0, 0}));
}

TEST_F(ReconnectTest, ATaskReportedByANodeItWasNotPlacedOnIsKilledThere) {
  std::string id = placed_job(/*started=*/true);
  add_node("node_z");
  jobs_->controller.on_node_registered("node_z", {{{id, 0, 0}, 9}}, {});
  auto kills = channel_.take<api::Kill>();
  ASSERT_EQ(kills.size(), 1u);
  EXPECT_EQ(kills[0].first, "node_z");
  EXPECT_EQ(job(id).attempts[0].tasks[0].state, TaskState::kRunning);  // the real one is untouched
}

TEST_F(ReconnectTest, NeverStartedTasksAreLaunchedAgain) {
  std::string id = placed_job(/*started=*/false);
  jobs_->controller.on_node_registered("node_a", {}, {});
  auto launches = channel_.take<api::Launch>();
  ASSERT_EQ(launches.size(), 2u);
  EXPECT_EQ(launches[0].second.task, (api::TaskKey{id, 0, 0}));
  EXPECT_EQ(job(id).state, JobState::kRunning);
}

TEST_F(ReconnectTest, StartedTasksTheNodeNoLongerHasAreLost) {
  std::string id = placed_job(/*started=*/true);
  // Task 1 still runs, task 0 is gone without a trace.
  jobs_->controller.on_node_registered("node_a", {{{id, 0, 1}, 1001}}, {});
  clock_.run_ready();
  const TaskRecord& lost = job(id).attempts[0].tasks[0];
  EXPECT_EQ(lost.state, TaskState::kFailed);
  EXPECT_THAT(lost.reason, HasSubstr("reconnected without it"));
  auto kills = channel_.take<api::Kill>();
  ASSERT_EQ(kills.size(), 1u);  // the gang fails as a whole
  EXPECT_EQ(kills[0].second.task.task_index, 1);
}

TEST_F(ReconnectTest, EndedTasksWaitForTheirExitReports) {
  std::string id = placed_job(/*started=*/true);
  jobs_->controller.on_node_registered("node_a", {}, {{id, 0, 0}, {id, 0, 1}});
  clock_.run_ready();
  EXPECT_EQ(job(id).state, JobState::kRunning);  // not lost: their exits follow
  EXPECT_TRUE(channel_.sent.empty());
  exit_all(id, 0, 2, 0);
  EXPECT_EQ(job(id).state, JobState::kSucceeded);
}

TEST_F(JobLayerTest, WholeRunTimeoutCoversRetries) {
  add_node("node_a");
  api::JobSpec s = spec();
  s.timeout_s = 10;
  s.max_retries = 3;
  s.retry_delay_s = 0;
  std::string id = submit(s);
  start_all(channel_.take<api::Launch>());
  clock_.advance(6000);
  exit_all(id, 0, 1, 1);  // attempt 0 fails after 6 s; attempt 1 starts at once
  ASSERT_EQ(job(id).attempts.size(), 2u);
  start_all(channel_.take<api::Launch>());
  clock_.advance(3999);
  EXPECT_TRUE(channel_.take<api::Kill>().empty());
  clock_.advance(1);  // 10 s after the first start
  auto kills = channel_.take<api::Kill>();
  ASSERT_EQ(kills.size(), 1u);
  EXPECT_EQ(kills[0].second.task, (api::TaskKey{id, 1, 0}));
  api::TaskExit killed;
  killed.signal = 15;
  report_exit({id, 1, 0}, killed);
  clock_.run_ready();
  EXPECT_EQ(job(id).state, JobState::kFailed);
  EXPECT_THAT(job(id).message, HasSubstr("timed out after 10"));
}

TEST_F(JobLayerTest, PerAttemptTimeoutRestartsWithEachAttempt) {
  add_node("node_a");
  api::JobSpec s = spec();
  s.timeout_s = 10;
  s.timeout_per_attempt = true;
  s.max_retries = 1;
  s.retry_delay_s = 0;
  std::string id = submit(s);
  start_all(channel_.take<api::Launch>());
  clock_.advance(6000);
  exit_all(id, 0, 1, 1);
  start_all(channel_.take<api::Launch>());
  clock_.advance(9000);  // 15 s after the job started, 9 s into attempt 1
  EXPECT_TRUE(channel_.take<api::Kill>().empty());
  EXPECT_EQ(job(id).state, JobState::kRunning);
  clock_.advance(1000);
  ASSERT_EQ(channel_.take<api::Kill>().size(), 1u);
  EXPECT_TRUE(job(id).timed_out);
}

TEST_F(JobLayerTest, TimeoutTimerIsCancelledWhenTheJobFinishes) {
  add_node("node_a");
  api::JobSpec s = spec();
  s.timeout_s = 100;
  std::string id = submit(s);
  start_all(channel_.take<api::Launch>());
  clock_.advance(100);  // the writes of the start are done with
  size_t armed = clock_.pending_timers();
  EXPECT_GE(armed, 1u);
  exit_all(id, 0, 1, 0);
  clock_.advance(100);  // and those of the end
  EXPECT_EQ(clock_.pending_timers(), armed - 1);
  clock_.advance(200'000);
  EXPECT_EQ(job(id).state, JobState::kSucceeded);
  EXPECT_TRUE(channel_.sent.empty());
}

TEST_F(JobLayerTest, StopKillsEveryTaskAndEndsStoppedOnceTheyAreGone) {
  add_node("node_a", 8);
  std::string id = submit(spec(3));
  start_all(channel_.take<api::Launch>());
  ASSERT_TRUE(stop(id).ok());
  EXPECT_EQ(channel_.take<api::Kill>().size(), 3u);
  EXPECT_EQ(job(id).state, JobState::kRunning);
  for (int i = 0; i < 3; ++i) report_exit({id, 0, i}, api::TaskExit{std::nullopt, 15, "", ""});
  EXPECT_EQ(job(id).state, JobState::kStopped);
  Status again = stop(id);
  EXPECT_EQ(again.error().code, ErrorCode::kConflict);
  EXPECT_EQ(stop("job_nope").error().code, ErrorCode::kNotFound);
}

TEST_F(JobLayerTest, RecoverReloadsJobsAndTheirEvents) {
  add_node("node_a");
  std::string done = submit(spec());
  start_all(channel_.take<api::Launch>());
  exit_all(done, 0, 1, 0);
  std::string running = submit(spec());
  start_all(channel_.take<api::Launch>());
  jobs_.reset();
  NodeRegistry fresh;
  nodes_ = std::move(fresh);
  make_manager();
  ASSERT_TRUE(jobs_->recover().ok());
  EXPECT_EQ(job(done).state, JobState::kSucceeded);
  EXPECT_EQ(job(running).state, JobState::kRunning);
  EXPECT_FALSE(jobs_->table.events(done).empty());
  // The running job's node is waited for, not forgotten.
  ASSERT_NE(nodes_.find("node_a"), nullptr);
  EXPECT_EQ(nodes_.find("node_a")->state, NodeState::kDisconnected);
}

TEST_F(JobLayerTest, APendingReasonIsNotLoggedAgainAfterARestart) {
  std::string id = submit(spec());
  ASSERT_EQ(job(id).pending_kind, sched::PendingKind::kNoNodes);
  const size_t events = jobs_->table.events(id).size();
  jobs_.reset();
  make_manager();
  ASSERT_TRUE(jobs_->recover().ok());
  clock_.run_ready();
  EXPECT_EQ(job(id).pending_kind, sched::PendingKind::kNoNodes);
  EXPECT_EQ(jobs_->table.events(id).size(), events);
}

TEST_F(JobLayerTest, AStoredJobThisVersionRejectsIsKeptAsFailedNotDropped) {
  std::string id = submit(spec());
  clock_.advance(5000);  // the writer stores what it holds of the job first
  // As if an older head had accepted a field this version refuses.
  auto stored = store_.get(store::kJobsTable, id);
  ASSERT_TRUE(stored.ok() && stored.value());
  auto doc = nlohmann::json::parse(*stored.value());
  doc["spec"]["num_workers"] = 999999;
  std::optional<Status> written;
  store_.write({{store::kJobsTable, id, doc.dump()}}, [&](Status s) { written = s; });
  ASSERT_TRUE(written && written->ok());
  jobs_.reset();
  make_manager();
  ASSERT_TRUE(jobs_->recover().ok());
  clock_.run_ready();
  EXPECT_EQ(job(id).state, JobState::kFailed);
  EXPECT_THAT(job(id).message, HasSubstr("could not load the job as stored"));
  EXPECT_THAT(job(id).message, HasSubstr("num_workers"));
  EXPECT_EQ(job(id).spec.entrypoint, "python train.py");
  // Stored again in a form this version reads: the next restart loads it as it is.
  jobs_.reset();
  make_manager();
  ASSERT_TRUE(jobs_->recover().ok());
  EXPECT_EQ(job(id).state, JobState::kFailed);
  EXPECT_THAT(jobs_->table.events(id).back().message, HasSubstr("marked FAILED at restart"));
}

TEST_F(JobLayerTest, ADurableStopIsStoredBeforeItTakesEffectOrRefusedWithNothingChanged) {
  add_node("node_a");
  std::string id = submit(spec());
  start_all(channel_.take<api::Launch>());
  store_.fail_next_writes(1);
  std::optional<Status> refused;
  jobs_->controller.stop(id, "alice", [&](Status s) { refused = std::move(s); });
  clock_.run_ready();
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->error().code, ErrorCode::kResourceExhausted);
  EXPECT_EQ(job(id).state, JobState::kRunning);
  EXPECT_FALSE(job(id).stop_requested);
  EXPECT_TRUE(channel_.take<api::Kill>().empty());

  std::optional<Status> stopped;
  jobs_->controller.stop(id, "alice", [&](Status s) { stopped = std::move(s); });
  clock_.run_ready();
  ASSERT_TRUE(stopped.has_value() && stopped->ok());
  EXPECT_TRUE(job(id).stop_requested);
  EXPECT_FALSE(channel_.take<api::Kill>().empty());
  // What a restart reads already says so.
  auto stored = store_.get(store::kJobsTable, id);
  ASSERT_TRUE(stored.ok() && stored.value());
  EXPECT_TRUE(nlohmann::json::parse(*stored.value())["stop_requested"].get<bool>());
}

// The job may change while its stop's draft is on its way to the disk (a task ends),
// and a batch then writes it as it stands, without the stop, after the draft: the stop
// is answered only once the job is stored with it, or a head that died after the
// answer would come back with the job running.
TEST_F(JobLayerTest, AStopIsAnsweredOnlyOnceTheJobIsStoredWithIt) {
  add_node("node_a");
  std::string id = submit(spec(2));
  start_all(channel_.take<api::Launch>());
  clock_.advance(1000);  // all of that stored
  store_.hold_writes();
  std::optional<Status> stopped;
  std::optional<bool> stored_with_stop;
  jobs_->controller.stop(id, "alice", [&](Status s) {
    stopped = std::move(s);
    auto stored = store_.get(store::kJobsTable, id);
    stored_with_stop =
        stored.ok() && stored.value() && nlohmann::json::parse(*stored.value())["stop_requested"].get<bool>();
  });
  api::TaskExit exit;
  exit.exit_code = 0;
  report_exit({id, 0, 1}, exit);
  clock_.advance(1000);  // the batch with the task's end is written after the draft (held)
  store_.release_writes();
  clock_.advance(1000);
  ASSERT_TRUE(stopped.has_value() && stopped->ok());
  ASSERT_TRUE(stored_with_stop.has_value());
  EXPECT_TRUE(*stored_with_stop) << "answered while the stored job had no stop";
}

TEST_F(JobLayerTest, WatchersAreWokenOnChange) {
  add_node("node_a");
  std::string id = submit(spec());
  int woken = 0;
  watch_job(*jobs_, id, [&] { ++woken; });
  start_all(channel_.take<api::Launch>());
  EXPECT_EQ(woken, 1);
}

}  // namespace
}  // namespace ag::head
