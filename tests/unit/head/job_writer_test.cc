// JobWriter over a fake clock and a memory store: a burst of changes is one write of
// each job as it stands, with its new events; after_durable waits for it, and through a
// failed write, which is tried again; a deletion lands after earlier writes and drops
// the job once durable, or keeps it when it fails; write_now writes one job at once; an
// unhurried change waits for the next write; the stream shows a job's events once stored.
#include "head/jobs/job_writer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "fakes/fake_clock.h"
#include "head/events/event_log.h"
#include "head/jobs/job_codec.h"
#include "head/store/memory_store.h"

namespace ag::head {
namespace {

using testing::FakeClock;

class JobWriterTest : public ::testing::Test {
 protected:
  JobWriterTest() {
    writer_ = std::make_unique<JobWriter>(
        clock_, clock_, store_,
        JobWriter::Source{[this](const std::string& id) -> const Job* {
                            auto it = jobs_.find(id);
                            return it == jobs_.end() ? nullptr : &it->second;
                          },
                          [this](const std::string& id) -> const std::vector<JobEvent>* {
                            auto it = events_.find(id);
                            return it == events_.end() ? nullptr : &it->second;
                          },
                          [this](const std::string& id) {
                            jobs_.erase(id);
                            deleted_.push_back(id);
                          },
                          [this] { return log_.appended_seq(); }, [this](int64_t seq) { log_.stored_upto(seq); }});
  }

  // A change with its event in the cluster's stream, shown there once stored.
  void add_streamed(const std::string& id, const std::string& type) {
    Job& job = jobs_[id];
    job.id = id;
    ClusterEvent event;
    event.type = type;
    event.job_id = id;
    const ClusterEvent& added = log_.append_unstored(std::move(event));
    auto& events = events_[id];
    events.push_back(JobEvent{added.time_ms, type, added.seq, type});
    writer_->changed(id, events.size() - 1);
  }

  std::vector<std::string> shown() const {
    std::vector<std::string> out;
    for (const auto& e : log_.after(0, {}, 100).events) out.push_back(e.job_id + " " + e.type);
    return out;
  }

  void add(const std::string& id, const std::string& message) {
    Job& job = jobs_[id];
    job.id = id;
    job.message = message;
    auto& events = events_[id];
    events.push_back(JobEvent{clock_.now_ms(), message});
    writer_->changed(id, events.size() - 1);
  }

  std::optional<std::string> stored(const std::string& table, const std::string& key) {
    auto got = store_.get(table, key);
    return got.ok() ? got.value() : std::nullopt;
  }

  FakeClock clock_;
  EventLog log_{clock_};
  store::MemoryStore store_;
  std::map<std::string, Job> jobs_;
  std::map<std::string, std::vector<JobEvent>> events_;
  std::vector<std::string> deleted_;
  std::unique_ptr<JobWriter> writer_;
};

TEST_F(JobWriterTest, ABurstOfChangesIsOneWriteOfEachJobAsItStands) {
  add("job_a", "first");
  add("job_a", "second");
  add("job_b", "other");
  bool durable = false;
  writer_->after_durable([&] { durable = true; });
  EXPECT_EQ(store_.writes(), 0);
  clock_.advance(100);
  EXPECT_EQ(store_.writes(), 1);
  EXPECT_TRUE(durable);
  auto job = nlohmann::json::parse(*stored(store::kJobsTable, "job_a"));
  EXPECT_EQ(job["message"], "second");
  EXPECT_TRUE(stored(store::kEventsTable, event_key("job_a", 0)));
  EXPECT_TRUE(stored(store::kEventsTable, event_key("job_a", 1)));
  EXPECT_TRUE(stored(store::kJobsTable, "job_b"));
}

TEST_F(JobWriterTest, AFailedWriteIsTriedAgainAndWhoeverWaitsWaitsForIt) {
  store_.fail_next_writes(1);
  add("job_a", "first");
  bool durable = false;
  writer_->after_durable([&] { durable = true; });
  clock_.advance(100);
  EXPECT_EQ(store_.writes(), 1);
  EXPECT_FALSE(durable);
  EXPECT_FALSE(stored(store::kJobsTable, "job_a"));
  clock_.advance(1000);
  EXPECT_EQ(store_.writes(), 2);
  EXPECT_TRUE(durable);
  EXPECT_TRUE(stored(store::kJobsTable, "job_a"));
  EXPECT_TRUE(stored(store::kEventsTable, event_key("job_a", 0)));
}

TEST_F(JobWriterTest, AJobsEventsAreShownInTheStreamOnlyOnceStored) {
  add_streamed("job_a", "job.succeeded");
  add_streamed("job_b", "job.failed");
  EXPECT_TRUE(shown().empty());
  // A write that fails shows nothing; the one that lands shows both, in order.
  store_.fail_next_writes(1);
  clock_.advance(100);
  EXPECT_EQ(store_.writes(), 1);
  EXPECT_TRUE(shown().empty());
  store_.hold_writes();
  clock_.advance(1000);
  EXPECT_TRUE(shown().empty()) << "the write is not answered yet";
  add_streamed("job_c", "job.stopped");  // a change while the write is in flight
  store_.release_writes();
  store_.hold_writes();  // job_c's own write
  clock_.advance(0);
  EXPECT_EQ(shown(), (std::vector<std::string>{"job_a job.succeeded", "job_b job.failed"}));
  EXPECT_TRUE(stored(store::kEventsTable, event_key("job_b", 0)));
  EXPECT_FALSE(stored(store::kEventsTable, event_key("job_c", 0)));
  store_.release_writes();
  clock_.advance(100);
  EXPECT_EQ(shown().size(), 3u);
  EXPECT_TRUE(log_.all_shown());
}

TEST_F(JobWriterTest, AWriterGoneWithAWriteInFlightShowsNothingItDidNotStore) {
  add_streamed("job_a", "job.succeeded");
  store_.hold_writes();
  clock_.advance(100);  // the write is in flight
  writer_.reset();      // as the head stops: the stream's listeners may be gone already
  EXPECT_FALSE(log_.all_shown());
  EXPECT_TRUE(shown().empty());
}

TEST_F(JobWriterTest, TheEventsOfAJobGoneBeforeItsWriteAreNotWaitedFor) {
  add_streamed("job_a", "job.succeeded");
  writer_->forget("job_a");
  jobs_.erase("job_a");
  events_.erase("job_a");
  EXPECT_FALSE(log_.all_shown());
  clock_.advance(100);  // the write due has nothing to store
  EXPECT_EQ(store_.writes(), 0);
  EXPECT_TRUE(log_.all_shown());
}

TEST_F(JobWriterTest, ADeletionDropsTheJobOnceDurableOrKeepsItWhenItFails) {
  add("job_a", "first");
  add("job_b", "other");
  clock_.advance(100);
  std::optional<Status> outcome;
  store_.fail_next_writes(1);
  writer_->remove("job_a", [&](const Status& s) { outcome = s; });
  EXPECT_TRUE(writer_->removing("job_a"));
  clock_.run_ready();
  ASSERT_TRUE(outcome);
  EXPECT_FALSE(outcome->ok());
  EXPECT_TRUE(jobs_.count("job_a")) << "kept when its deletion was not stored";
  EXPECT_TRUE(stored(store::kJobsTable, "job_a"));

  outcome.reset();
  writer_->remove("job_a", [&](const Status& s) { outcome = s; });
  clock_.advance(2000);
  ASSERT_TRUE(outcome);
  EXPECT_TRUE(outcome->ok());
  EXPECT_EQ(deleted_, std::vector<std::string>{"job_a"});
  EXPECT_FALSE(stored(store::kJobsTable, "job_a"));
  EXPECT_FALSE(stored(store::kEventsTable, event_key("job_a", 0)));
  EXPECT_TRUE(stored(store::kJobsTable, "job_b"));
}

TEST_F(JobWriterTest, WriteNowAndWriteThenGoAtOnce) {
  jobs_["job_a"].id = "job_a";
  std::optional<bool> now;
  writer_->write_now(jobs_["job_a"], [&](bool ok) { now = ok; });
  bool then = false;
  std::optional<Status> done;
  writer_->write_then({{store::kMetaTable, "k", "v"}}, [&] { then = true; }, [&](Status s) { done = s; });
  clock_.run_ready();
  EXPECT_EQ(now, true);
  EXPECT_TRUE(then);
  ASSERT_TRUE(done);
  EXPECT_TRUE(done->ok());
  EXPECT_TRUE(stored(store::kJobsTable, "job_a"));
  EXPECT_EQ(stored(store::kMetaTable, "k"), "v");
}

TEST_F(JobWriterTest, WhatIsLeftIsWrittenWhenTheWriterGoes) {
  add("job_a", "first");
  writer_.reset();
  EXPECT_TRUE(stored(store::kJobsTable, "job_a"));
}

TEST_F(JobWriterTest, AnUnhurriedChangeWaitsAnIntervalUnlessAnotherBringsItSooner) {
  jobs_["job_a"].id = "job_a";
  events_["job_a"] = {JobEvent{0, "submitted"}};
  writer_->changed_unhurried("job_a", 0);
  clock_.run_ready();
  EXPECT_EQ(store_.writes(), 0) << "not at once";
  clock_.advance(20);
  EXPECT_EQ(store_.writes(), 1) << "within the interval";
  EXPECT_TRUE(stored(store::kJobsTable, "job_a"));

  clock_.advance(1000);
  writer_->changed_unhurried("job_a", 1);
  add("job_b", "placed");  // a change that is not: both go now, in one write
  clock_.run_ready();
  EXPECT_EQ(store_.writes(), 2);
  EXPECT_TRUE(stored(store::kJobsTable, "job_b"));

  clock_.advance(1000);
  writer_->changed_unhurried("job_a", 1);
  bool durable = false;
  writer_->after_durable([&] { durable = true; });
  clock_.run_ready();
  EXPECT_TRUE(durable) << "whoever waits does not wait for the interval";
  EXPECT_EQ(store_.writes(), 3);
}

}  // namespace
}  // namespace ag::head
