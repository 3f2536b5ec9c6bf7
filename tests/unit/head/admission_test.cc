// Admission alone (check_submit over a job table, arrays, a policy and a node registry
// filled by hand): each reason a submit is refused, in order, with the message a user
// sees; a refused submit changes nothing; an accepted one has its priority settled.
#include "head/jobs/admission.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

#include "head/jobs/scheduling_view.h"
#include "head/store/memory_store.h"

namespace ag::head {
namespace {

class AdmissionTest : public ::testing::Test {
 protected:
  AdmissionTest() : policy_(store_) {
    EXPECT_TRUE(policy_.recover().ok());
    Node node;
    node.node_id = "node_a";
    node.total.cpu_millis = 8000;
    node.total.memory_bytes = int64_t{32} << 30;
    node.state = NodeState::kAlive;
    nodes_.upsert(node);
  }

  api::JobSpec spec(double cpus = 1) {
    api::JobSpec s;
    s.entrypoint = "python train.py";
    s.num_workers = 2;
    s.num_cpus = cpus;
    return s;
  }

  Job& add_job(const std::string& id, JobState state) {
    Job job;
    job.id = id;
    job.owner = "alice";
    job.state = state;
    job.spec = spec();
    job.spec.priority_set = true;
    return table_.add(job, {1, "submitted"});
  }

  // The error of submitting `specs` as alice, or "" when accepted.
  std::string refusal(std::vector<api::JobSpec> specs, bool admin = false) {
    last_ = std::move(specs);
    auto refused = check_submit(last_, "alice", admin, view());
    return refused ? refused->message : "";
  }

  AdmissionView view() {
    return {table_, arrays_, policy_, nodes_, [this](const std::string& id) { return removing_.count(id) > 0; }};
  }

  store::MemoryStore store_;
  JobTable table_;
  ArrayThrottle arrays_;
  PolicyStore policy_;
  NodeRegistry nodes_;
  std::set<std::string> removing_;
  std::vector<api::JobSpec> last_;  // as check_submit left them
};

TEST_F(AdmissionTest, AnAcceptedSubmitHasItsPrioritySettled) {
  EXPECT_EQ(refusal({spec()}), "");
  EXPECT_TRUE(last_[0].priority_set);
}

TEST_F(AdmissionTest, ARequestNoNodeCouldEverHoldIsRefusedUnlessAskedToQueueIt) {
  const std::string why = refusal({spec(64)});
  EXPECT_NE(why.find("no node of this cluster could ever run this job"), std::string::npos) << why;
  EXPECT_NE(why.find("--allow-unschedulable"), std::string::npos) << why;
  api::JobSpec queued = spec(64);
  queued.allow_unschedulable = true;
  EXPECT_EQ(refusal({queued}), "");
  // A draining node still counts: it takes tasks again once resumed.
  nodes_.set_drained({"node_a"});
  EXPECT_EQ(refusal({spec()}), "");
}

// Most submits are found to fit at the first nodes that can hold a task each; the rest
// weigh the cluster whole. Both must refuse exactly what the whole weighing refuses.
TEST_F(AdmissionTest, TheQuickLookAtTheNodesRefusesWhatWeighingThemAllRefuses) {
  std::mt19937 random(31);
  for (int round = 0; round < 300; ++round) {
    nodes_ = NodeRegistry();
    const int count = 1 + static_cast<int>(random() % 6);
    for (int i = 0; i < count; ++i) {
      Node node;
      node.node_id = "node_" + std::to_string(i);
      node.total.cpu_millis = 1000 * (1 + static_cast<int64_t>(random() % 8));
      node.total.memory_bytes = int64_t{4} << 30;
      node.total.gpus = static_cast<int64_t>(random() % 3);
      for (int g = 0; g < node.total.gpus - static_cast<int>(random() % 2); ++g) node.gpu_ids.push_back(g);
      if (random() % 2) node.labels["zone"] = random() % 2 ? "a" : "b";
      node.state = random() % 5 == 0 ? NodeState::kDead : NodeState::kAlive;
      node.draining = random() % 4 == 0;
      nodes_.upsert(node);
    }
    api::JobSpec job = spec(static_cast<double>(1 + random() % 8));
    job.num_workers = 1 + static_cast<int>(random() % 4);
    job.num_gpus = static_cast<int64_t>(random() % 3);
    if (random() % 3 == 0) job.constraints["zone"] = "a";
    job.exclusive = random() % 4 == 0;
    job.placement = random() % 2 ? api::Placement::kSpread : api::Placement::kPack;
    std::vector<sched::NodeView> all;
    for (auto& [_, view] : node_capacity(nodes_, true)) all.push_back(view);
    sched::PendingJob pending = pending_job("", job, policy_);
    const bool never = sched::never_fits(all, pending).has_value();
    EXPECT_EQ(!refusal({job}).empty(), never) << "round " << round;
  }
}

TEST_F(AdmissionTest, ASubmissionIdReusedWithAnotherSpecIsAConflict) {
  Job& earlier = add_job("job_earlier", JobState::kRunning);
  earlier.spec.submission_id = "run-1";
  table_.reserve_submission("alice", "run-1", "job_earlier");
  api::JobSpec same = spec();
  same.submission_id = "run-1";
  EXPECT_EQ(refusal({same}), "") << "a retry of the same submit gets the earlier job";
  api::JobSpec other = same;
  other.num_workers = 4;
  auto refused = check_submit(last_ = {other}, "alice", false, view());
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->code, ErrorCode::kConflict);
  EXPECT_NE(refused->message.find("submission_id \"run-1\" was already used for job job_earlier"), std::string::npos);
  EXPECT_EQ(check_submit(last_ = {other}, "bob", false, view()), std::nullopt) << "ids are per owner";
}

TEST_F(AdmissionTest, DependenciesMustExistAndBeAbleToBeMet) {
  api::JobSpec after = spec();
  after.after = {"job_nope"};
  EXPECT_EQ(refusal({after}),
            "--after names job job_nope, which does not exist (or was deleted); `ag list-jobs` shows the jobs");
  add_job("job_failed", JobState::kFailed);
  after.after = {"job_failed"};
  EXPECT_NE(refusal({after}), "") << "it can never succeed now";
  after.after_any = {"job_failed"};
  after.after.clear();
  EXPECT_EQ(refusal({after}), "");
  removing_.insert("job_failed");
  EXPECT_NE(refusal({after}).find("does not exist (or was deleted)"), std::string::npos);
}

TEST_F(AdmissionTest, QueuesAndPriorityCapsAreCheckedAgainstThePolicy) {
  api::JobSpec in_queue = spec();
  in_queue.queue = "a100";
  EXPECT_NE(refusal({in_queue}).find("unknown queue 'a100'"), std::string::npos);
  sched::Limits cap;
  cap.max_priority = 5;
  auto change = policy_.set_quota(false, "alice", cap);
  store_.write(change.batch, [](const Status&) {});
  change.apply();
  api::JobSpec urgent = spec();
  urgent.priority = 9;
  urgent.priority_set = true;
  auto refused = check_submit(last_ = {urgent}, "alice", false, view());
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->code, ErrorCode::kPermissionDenied);
  EXPECT_NE(refused->message.find("priority 9 is over the highest"), std::string::npos);
}

TEST_F(AdmissionTest, OfSeveralSpecsTheRefusedOneIsNamedAndNoneIsSubmitted) {
  api::JobSpec big = spec(64);
  const std::string why = refusal({spec(), big});
  EXPECT_EQ(why.rfind("jobs[1]: no node of this cluster", 0), 0u) << why;
  EXPECT_NE(why.find("(no job was submitted)"), std::string::npos) << why;

  api::JobSpec array = spec();
  array.array = api::ArraySpec{};
  for (int i = 0; i < 6000; ++i) array.array->indices.push_back(i);
  EXPECT_EQ(refusal({array, array}),
            "this submit would make 12000 jobs; one submit makes at most 10000 (no job was submitted)");
}

}  // namespace
}  // namespace ag::head
