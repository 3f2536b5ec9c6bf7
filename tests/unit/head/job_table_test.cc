// JobTable alone: what it loads from the store (a record this version cannot read kept
// as FAILED, one not even its id can be read of skipped), the submission ids it keeps
// per owner, and the queries over all jobs: newest first, counts, what live tasks hold
// (on each node, by owner and queue) and who uses a package.
#include "head/jobs/job_table.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "head/jobs/job_codec.h"
#include "head/jobs/job_writer.h"
#include "head/store/memory_store.h"

namespace ag::head {
namespace {

Job pending(const std::string& id, uint64_t seq, const std::string& owner = "alice") {
  Job job;
  job.id = id;
  job.owner = owner;
  job.queue_seq = seq;
  job.spec.entrypoint = "python train.py";
  job.spec.num_workers = 2;
  job.spec.num_cpus = 1;
  return job;
}

// `job` running both its tasks, one on each of node_a and node_b.
Job& run(JobTable& table, Job& job) {
  job.state = JobState::kRunning;
  AttemptRecord attempt;
  attempt.tasks.push_back(TaskRecord{0, "node_a", "10.0.0.1", {}, TaskState::kRunning});
  attempt.tasks.push_back(TaskRecord{1, "node_b", "10.0.0.2", {}, TaskState::kRunning});
  job.attempts.push_back(attempt);
  table.activate(job);
  table.recount(job);  // as the job controller does with every change
  return job;
}

void store_all(store::MemoryStore& store, std::vector<store::Mutation> batch) {
  bool ok = false;
  store.write(std::move(batch), [&](const Status& s) { ok = s.ok(); });
  ASSERT_TRUE(ok);
}

TEST(JobTableTest, LoadsJobsAndEventsAndKeepsARecordItCannotReadAsFailed) {
  store::MemoryStore store;
  Job done = pending("job_done", 7);
  done.spec.submission_id = "nightly-1";
  done.state = JobState::kSucceeded;
  store_all(store, JobWriter::records(done, {{100, "submitted"}, {200, "succeeded"}}));
  // A record this version refuses, and one without even an id.
  nlohmann::json bad = job_to_json(pending("job_0123456789ab", 3));
  bad["queue_seq"] = "third";
  store_all(store, {{store::kJobsTable, "job_0123456789ab", bad.dump()}, {store::kJobsTable, "job_junk", "{not json"}});

  JobTable table;
  auto salvaged = table.load(store, 5000);
  ASSERT_TRUE(salvaged.ok());
  EXPECT_EQ(salvaged.value(), std::vector<std::string>{"job_0123456789ab"});
  ASSERT_NE(table.find("job_0123456789ab"), nullptr);
  EXPECT_EQ(table.find("job_0123456789ab")->state, JobState::kFailed);
  EXPECT_EQ(table.find("job_junk"), nullptr);
  ASSERT_EQ(table.events("job_done").size(), 2u);
  EXPECT_EQ(table.events("job_done")[1].message, "succeeded");
  EXPECT_TRUE(table.events("job_nope").empty());
  // The submission id is the job's alias again, and new jobs come after the newest.
  ASSERT_NE(table.find_submission("alice", "nightly-1"), nullptr);
  EXPECT_EQ(table.find_submission("alice", "nightly-1")->id, "job_done");
  EXPECT_EQ(table.next_seq(), 8u);
}

// Thousands of records: each job and event lands as stored, damaged records anywhere
// among them are kept or skipped as one alone is, and the salvaged ids come in the
// store's order.
TEST(JobTableTest, LoadsThousandsOfRecordsAsItLoadsOne) {
  store::MemoryStore store;
  std::vector<store::Mutation> batch;
  std::vector<std::string> refused;
  for (int i = 0; i < 3000; ++i) {
    char id[32];
    std::snprintf(id, sizeof id, "job_%012d", i);
    Job job = pending(id, static_cast<uint64_t>(i + 1), i % 2 ? "alice" : "bob");
    if (i % 997 == 500) {  // refused by this version: kept as FAILED
      nlohmann::json bad = job_to_json(job);
      bad["queue_seq"] = "late";
      batch.push_back({store::kJobsTable, id, bad.dump()});
      refused.push_back(id);
      continue;
    }
    if (i % 1009 == 700) {  // not even an id: skipped
      batch.push_back({store::kJobsTable, id, "{not json"});
      continue;
    }
    const std::vector<store::Mutation> records =
        JobWriter::records(job, {{i, "submitted"}, {i + 1, "event " + std::to_string(i)}});
    batch.insert(batch.end(), records.begin(), records.end());
  }
  store_all(store, std::move(batch));

  JobTable table;
  auto salvaged = table.load(store, 5000);
  ASSERT_TRUE(salvaged.ok());
  EXPECT_EQ(salvaged.value(), refused);
  EXPECT_EQ(table.all().size(), 3000u - 3u);  // three records without an id
  for (int i = 0; i < 3000; ++i) {
    char id[32];
    std::snprintf(id, sizeof id, "job_%012d", i);
    const Job* job = table.find(id);
    if (i % 1009 == 700) {
      EXPECT_EQ(job, nullptr) << id;
      continue;
    }
    ASSERT_NE(job, nullptr) << id;
    if (i % 997 == 500) {
      EXPECT_EQ(job->state, JobState::kFailed) << id;
      continue;
    }
    EXPECT_EQ(job->queue_seq, static_cast<uint64_t>(i + 1));
    EXPECT_EQ(job->owner, i % 2 ? "alice" : "bob");
    ASSERT_EQ(table.events(id).size(), 2u) << id;
    EXPECT_EQ(table.events(id)[1].message, "event " + std::to_string(i));
  }
  EXPECT_EQ(table.next_seq(), 3001u);
  EXPECT_EQ(table.list().front()->id, "job_000000002999");
}

TEST(JobTableTest, ASubmissionIdIsPerOwnerKeptBeforeTheJobIsStoredAndReleasedOnFailure) {
  JobTable table;
  table.reserve_submission("alice", "run-1", "job_a");
  EXPECT_EQ(table.submission("alice", "run-1"), "job_a");
  EXPECT_EQ(table.find_submission("alice", "run-1"), nullptr) << "not stored yet";
  EXPECT_EQ(table.submission("bob", "run-1"), "") << "another owner's id finds nothing";
  table.release_submission("alice", "run-1");
  EXPECT_EQ(table.submission("alice", "run-1"), "");

  Job job = pending("job_a", table.next_seq());
  job.spec.submission_id = "run-1";
  table.reserve_submission("alice", "run-1", "job_a");
  table.add(job, {1, "submitted"});
  EXPECT_EQ(table.find_submission("alice", "run-1"), table.find("job_a"));
  table.remove("job_a");
  EXPECT_EQ(table.find("job_a"), nullptr);
  EXPECT_EQ(table.submission("alice", "run-1"), "") << "a deleted job's id can be used again";
  EXPECT_TRUE(table.events("job_a").empty());
}

TEST(JobTableTest, ListsNewestFirstAndCountsWhatLiveTasksHold) {
  JobTable table;
  table.add(pending("job_1", 1, "alice"), {1, "submitted"});
  Job& second = table.add(pending("job_2", 2, "bob"), {2, "submitted"});
  second.spec.queue = "a100";
  Job& third = table.add(pending("job_3", 3, "alice"), {3, "submitted"});
  run(table, second);
  run(table, third);
  third.current_attempt()->tasks[1].state = TaskState::kSucceeded;  // one task of it ended

  std::vector<std::string> ids;
  for (const Job* job : table.list()) ids.push_back(job->id);
  EXPECT_EQ(ids, (std::vector<std::string>{"job_3", "job_2", "job_1"}));
  EXPECT_EQ(table.count_by_state(), (std::map<JobState, int>{{JobState::kPending, 1}, {JobState::kRunning, 2}}));

  const auto held = table.allocations();
  EXPECT_EQ(held.at("node_a").cpu_millis, 2000);
  EXPECT_EQ(held.at("node_b").cpu_millis, 1000) << "an ended task holds nothing";
  const auto by_owner = table.use_by_owner();
  EXPECT_EQ(by_owner.at("alice").held.cpu_millis, 1000);
  EXPECT_EQ(by_owner.at("bob").held.cpu_millis, 2000);
  EXPECT_EQ(by_owner.at("bob").running_jobs, 1);
  const auto by_queue = table.use_by_queue();
  ASSERT_EQ(by_queue.size(), 1u);
  EXPECT_EQ(by_queue.at({"a100", "bob"}).held.cpu_millis, 2000);
  EXPECT_EQ(table.live_in_queue("a100"), 1);

  table.deactivate("job_2");
  EXPECT_FALSE(table.use_by_owner().count("bob"));
}

TEST(JobTableTest, CountsAndTheNewestFirstListFollowEveryChangeAndRemoval) {
  JobTable table;
  Job& first = table.add(pending("job_1", 1), {1, "submitted"});
  Job& second = table.add(pending("job_2", 2), {2, "submitted"});
  EXPECT_EQ(table.count_by_state(), (std::map<JobState, int>{{JobState::kPending, 2}}));
  run(table, first);
  table.recount(first);  // counted once however often it is told
  EXPECT_EQ(table.count_by_state(), (std::map<JobState, int>{{JobState::kPending, 1}, {JobState::kRunning, 1}}));
  first.state = JobState::kSucceeded;
  table.recount(first);
  second.state = JobState::kFailed;
  table.recount(second);
  EXPECT_EQ(table.count_by_state(), (std::map<JobState, int>{{JobState::kSucceeded, 1}, {JobState::kFailed, 1}}));
  table.remove("job_1");
  EXPECT_EQ(table.count_by_state(), (std::map<JobState, int>{{JobState::kFailed, 1}}));
  table.add(pending("job_1", 3), {3, "submitted again"});
  EXPECT_EQ(table.count_by_state(), (std::map<JobState, int>{{JobState::kPending, 1}, {JobState::kFailed, 1}}));
  std::vector<std::string> ids;
  for (const Job* job : table.list()) ids.push_back(job->id);
  EXPECT_EQ(ids, (std::vector<std::string>{"job_1", "job_2"})) << "newest first, the removed one gone";
}

TEST(JobTableTest, APackageIsLiveWhileAJobNotFinishedUsesItInOneScan) {
  JobTable table;
  Job& first = table.add(pending("job_1", 1), {1, "submitted"});
  first.spec.runtime_env.working_dir = "sha256:" + std::string(64, 'a');
  const std::string hash = first.spec.runtime_env.working_dir_hash();
  EXPECT_EQ(table.package_use(hash), JobTable::PackageUse::kLiveJobs);
  first.state = JobState::kFailed;
  EXPECT_EQ(table.package_use(hash), JobTable::PackageUse::kFinishedJobs);
  EXPECT_EQ(table.package_use(std::string(64, 'b')), JobTable::PackageUse::kUnused);
}

}  // namespace
}  // namespace ag::head
