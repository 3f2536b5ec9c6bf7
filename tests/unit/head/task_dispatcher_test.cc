// TaskDispatcher over a fake clock, channel and memory store: a placement's launches go
// out only once it is stored (after the next batch when that write fails); a node
// that re-registers meanwhile is not sent them twice; a launch to a node that is gone
// is a start error; master ports avoid what the node reports busy, and still come
// once the range is used up.
#include "head/jobs/task_dispatcher.h"

#include <gtest/gtest.h>

#include "fakes/fake_clock.h"
#include "fakes/fake_worker_channel.h"
#include "head/jobs/master_ports.h"
#include "head/store/memory_store.h"

namespace ag::head {
namespace {

using testing::FakeClock;
using testing::FakeWorkerChannel;

class TaskDispatcherTest : public ::testing::Test {
 protected:
  TaskDispatcherTest()
      : writer_(clock_, clock_, store_,
                JobWriter::Source{[this](const std::string& id) -> const Job* { return find(id); },
                                  [](const std::string&) -> const std::vector<JobEvent>* { return nullptr; },
                                  [](const std::string&) {}}),
        dispatcher_(TaskDispatcher::Deps{clock_, channel_, nodes_, writer_,
                                         [this](const std::string& id) { return find(id); },
                                         [this](const api::TaskKey& task, const api::TaskExit& exit) {
                                           failed_.emplace_back(task, exit.start_error);
                                         }},
                    29500, 29503, 0) {
    job_.id = "job_a";
    job_.spec.entrypoint = "python train.py";
    job_.spec.num_workers = 2;
    AttemptRecord attempt;
    attempt.number = 0;
    for (int i = 0; i < 2; ++i) {
      TaskRecord task;
      task.index = i;
      task.node_id = i == 0 ? "node_a" : "node_b";
      task.state = TaskState::kStarting;
      attempt.tasks.push_back(task);
    }
    job_.attempts.push_back(attempt);
  }

  const Job* find(const std::string& id) const { return id == job_.id ? &job_ : nullptr; }
  std::vector<TaskRef> refs() const {
    return {{api::TaskKey{"job_a", 0, 0}, "node_a"}, {api::TaskKey{"job_a", 0, 1}, "node_b"}};
  }

  FakeClock clock_;
  store::MemoryStore store_;
  FakeWorkerChannel channel_;
  NodeRegistry nodes_;
  Job job_;
  std::vector<std::pair<api::TaskKey, std::string>> failed_;
  JobWriter writer_;
  TaskDispatcher dispatcher_;
};

TEST_F(TaskDispatcherTest, LaunchesGoOutOnceThePlacementIsStored) {
  dispatcher_.launch_when_stored(job_, refs());
  EXPECT_TRUE(channel_.take<api::Launch>().empty()) << "not before the write is durable";
  dispatcher_.relaunch(job_, refs()[0]);  // node_a re-registers meanwhile: not twice
  EXPECT_TRUE(channel_.take<api::Launch>().empty());
  clock_.run_ready();
  auto launched = channel_.take<api::Launch>();
  ASSERT_EQ(launched.size(), 2u);
  EXPECT_EQ(launched[0].first, "node_a");
  EXPECT_EQ(launched[1].second.task, (api::TaskKey{"job_a", 0, 1}));
  EXPECT_TRUE(store_.get(store::kJobsTable, "job_a").value());
  // Stored now: a relaunch goes at once.
  dispatcher_.relaunch(job_, refs()[0]);
  EXPECT_EQ(channel_.take<api::Launch>().size(), 1u);
}

TEST_F(TaskDispatcherTest, AFailedWriteHoldsTheLaunchesUntilTheNextBatch) {
  store_.fail_next_writes(2);  // the placement's write, and the batch after it
  dispatcher_.launch_when_stored(job_, refs());
  clock_.run_ready();
  EXPECT_TRUE(channel_.take<api::Launch>().empty());
  clock_.advance(1000);  // the batch tried again, which the launch waits for
  EXPECT_EQ(channel_.take<api::Launch>().size(), 2u);
}

TEST_F(TaskDispatcherTest, ATaskStoppedBeforeItsLaunchIsNotLaunched) {
  dispatcher_.launch_when_stored(job_, refs());
  job_.attempts[0].ending = true;
  clock_.run_ready();
  EXPECT_TRUE(channel_.take<api::Launch>().empty());
}

TEST_F(TaskDispatcherTest, ALaunchToANodeThatIsGoneIsAStartError) {
  channel_.unreachable.insert("node_b");
  dispatcher_.launch_when_stored(job_, refs());
  clock_.run_ready();
  EXPECT_EQ(channel_.take<api::Launch>().size(), 1u);
  ASSERT_EQ(failed_.size(), 1u);
  EXPECT_EQ(failed_[0].first, (api::TaskKey{"job_a", 0, 1}));
  EXPECT_EQ(failed_[0].second, "its node is not connected");
}

TEST_F(TaskDispatcherTest, MasterPortsAvoidBusyOnesAndAreFreedWithTheirAttempt) {
  Node node;
  node.node_id = "node_a";
  node.state = NodeState::kAlive;
  node.busy_ports = {29500};
  nodes_.upsert(node);
  std::set<int> given;
  for (int i = 0; i < 3; ++i) given.insert(dispatcher_.allocate_master_port("node_a"));
  EXPECT_EQ(given, (std::set<int>{29501, 29502, 29503}));
  dispatcher_.release_master_port("node_a", 29502);
  EXPECT_EQ(dispatcher_.allocate_master_port("node_a"), 29502) << "the one free port";
  dispatcher_.kill({api::TaskKey{"job_a", 0, 0}, "node_a"}, 5000);
  auto kills = channel_.take<api::Kill>();
  ASSERT_EQ(kills.size(), 1u);
  EXPECT_EQ(kills[0].second.grace_ms, 5000);
}

// Ports go round the range; once every one is some live attempt's, each node still gets
// one of its own until it holds them all, and a port freed anywhere is taken first.
TEST(MasterPortsTest, AFullRangeStillGivesEachNodeAPortOfItsOwn) {
  MasterPorts ports(100, 102);
  EXPECT_EQ(ports.allocate("node_a", {}), 100);
  EXPECT_EQ(ports.allocate("node_a", {}), 101);
  EXPECT_EQ(ports.allocate("node_a", {}), 102);
  EXPECT_EQ(ports.allocate("node_b", {}), 100) << "shared with another node";
  EXPECT_EQ(ports.allocate("node_b", {101}), 102) << "not one the node reports busy";
  ports.release("node_a", 101);
  EXPECT_EQ(ports.allocate("node_c", {}), 101) << "the one port no live attempt uses";
  EXPECT_EQ(ports.allocate("node_b", {}), 101);
  EXPECT_EQ(ports.allocate("node_b", {}), 100) << "every port held here too: the first, shared";
  ports.release("node_a", 100);
  ports.release("node_b", 100);
  EXPECT_EQ(ports.allocate("node_c", {}), 100) << "free anywhere again once both have let it go";
}

}  // namespace
}  // namespace ag::head
