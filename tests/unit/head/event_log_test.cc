// EventLog and NodeEvents: one order with cursors that survive a restart, filters,
// bounded memory, listeners.
#include "head/events/event_log.h"

#include <gtest/gtest.h>

#include "fakes/fake_clock.h"
#include "head/events/node_events.h"
#include "head/store/memory_store.h"

namespace ag::head {
namespace {

ClusterEvent job_event(const std::string& job, const std::string& type, const std::string& message = "m") {
  ClusterEvent e;
  e.type = type;
  e.job_id = job;
  e.owner = "alice";
  e.message = message;
  return e;
}

TEST(EventLogTest, SeqGrowsEvenWithinOneMillisecond) {
  testing::FakeClock clock;
  EventLog log(clock);
  const int64_t a = log.append(job_event("j1", "job.submitted")).seq;
  const int64_t b = log.append(job_event("j1", "job.update")).seq;
  EXPECT_GT(b, a);
  clock.advance(5);
  const int64_t c = log.append(job_event("j1", "job.failed")).seq;
  EXPECT_GE(c, clock.now_ms() * 1000);
  EXPECT_EQ(log.last_seq(), c);
}

TEST(EventLogTest, AfterACursorGivesWhatCameLaterInOrderAndPagesByLimit) {
  testing::FakeClock clock;
  EventLog log(clock);
  std::vector<int64_t> seqs;
  for (int i = 0; i < 5; ++i) seqs.push_back(log.append(job_event("j" + std::to_string(i), "job.update")).seq);
  auto page = log.after(seqs[1], {}, 2);
  ASSERT_EQ(page.events.size(), 2u);
  EXPECT_EQ(page.events[0].job_id, "j2");
  EXPECT_EQ(page.events[1].job_id, "j3");
  EXPECT_EQ(page.cursor, seqs[3]);
  page = log.after(page.cursor, {}, 10);
  ASSERT_EQ(page.events.size(), 1u);
  EXPECT_EQ(page.events[0].job_id, "j4");
  EXPECT_EQ(page.cursor, log.last_seq());
  EXPECT_TRUE(log.after(page.cursor, {}, 10).events.empty());
  EXPECT_FALSE(page.truncated);
}

TEST(EventLogTest, AFilteredPageMovesTheCursorPastWhatItSkipped) {
  testing::FakeClock clock;
  EventLog log(clock);
  log.append(job_event("a", "job.failed"));
  log.append(job_event("b", "job.update"));
  log.append(job_event("c", "job.update"));
  EventFilter failed;
  failed.types = {"job.failed"};
  const auto page = log.after(0, failed, 10);
  ASSERT_EQ(page.events.size(), 1u);
  EXPECT_EQ(page.cursor, log.last_seq());
}

TEST(EventLogTest, FiltersByJobArrayElementsNodeTypeAndTime) {
  testing::FakeClock clock;
  EventLog log(clock);
  log.append(job_event("arr1_0", "job.failed"));
  log.append(job_event("arr10", "job.failed"));
  log.append(job_event("j2", "job.update", "attempt 0 placed on node_ab (127.0.0.2)"));
  log.append(job_event("j3", "job.update", "attempt 0 placed on node_abc (127.0.0.3)"));
  ClusterEvent dead;
  dead.type = "node.dead";
  dead.node_id = "node_ab";
  clock.advance(1000);
  log.append(dead);

  EventFilter of_array;
  of_array.job_id = "arr1";
  auto page = log.after(0, of_array, 10);
  ASSERT_EQ(page.events.size(), 1u);
  EXPECT_EQ(page.events[0].job_id, "arr1_0");

  EventFilter of_node;
  of_node.node_id = "node_ab";
  page = log.after(0, of_node, 10);
  ASSERT_EQ(page.events.size(), 2u);  // the placement naming it, and its death; not node_abc
  EXPECT_EQ(page.events[0].job_id, "j2");
  EXPECT_EQ(page.events[1].type, "node.dead");

  EventFilter recent;
  recent.since_ms = clock.now_ms();
  page = log.after(0, recent, 10);
  ASSERT_EQ(page.events.size(), 1u);
  EXPECT_EQ(page.events[0].type, "node.dead");
}

TEST(EventLogTest, KeepsTheNewestAndSaysWhenACursorIsOlder) {
  testing::FakeClock clock;
  EventLog log(clock, 3);
  const int64_t first = log.append(job_event("j0", "job.update")).seq;
  for (int i = 1; i < 5; ++i) log.append(job_event("j" + std::to_string(i), "job.update"));
  EXPECT_EQ(log.size(), 3u);
  const auto page = log.after(first, {}, 10);
  EXPECT_TRUE(page.truncated);
  ASSERT_EQ(page.events.size(), 3u);
  EXPECT_EQ(page.events[0].job_id, "j2");
  const auto newest = log.newest({}, 2);
  ASSERT_EQ(newest.events.size(), 2u);
  EXPECT_EQ(newest.events[0].job_id, "j3");
  EXPECT_EQ(newest.events[1].job_id, "j4");
}

TEST(EventLogTest, RecoverMergesSourcesAndNumbersAfterTheLargest) {
  testing::FakeClock clock;
  EventLog log(clock);
  ClusterEvent future = job_event("j1", "job.update");
  future.seq = (clock.now_ms() + 60000) * 1000;  // a head whose clock ran ahead
  ClusterEvent old = job_event("j0", "job.update");
  old.seq = 5;
  ClusterEvent unnumbered = job_event("j9", "job.update");  // stored before the stream existed
  log.recover({future, unnumbered});
  log.recover({old});
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log.after(0, {}, 10).events[0].job_id, "j0");
  EXPECT_GT(log.append(job_event("j2", "job.update")).seq, future.seq);
}

TEST(EventLogTest, ListenersHearEachAppendAndMayLeaveFromInside) {
  testing::FakeClock clock;
  EventLog log(clock);
  std::vector<std::string> heard;
  uint64_t id = 0;
  id = log.listen([&](const ClusterEvent& e) {
    heard.push_back(e.job_id);
    log.unlisten(id);
  });
  log.append(job_event("j1", "job.update"));
  log.append(job_event("j2", "job.update"));
  EXPECT_EQ(heard, std::vector<std::string>{"j1"});
}

TEST(EventLogTest, AnUnstoredEventAndEverythingAfterItWaitUntilItIsStored) {
  testing::FakeClock clock;
  EventLog log(clock);
  std::vector<std::string> heard;
  log.listen([&](const ClusterEvent& e) { heard.push_back(e.job_id); });
  const int64_t shown = log.append(job_event("j0", "job.update")).seq;
  const int64_t ended = log.append_unstored(job_event("j1", "job.succeeded")).seq;
  log.append(job_event("j2", "job.submitted"));  // stored, but after j1's end
  const int64_t last = log.append_unstored(job_event("j3", "job.failed")).seq;
  bool all_shown = false;
  EXPECT_NE(log.when_shown([&] { all_shown = true; }), 0u);
  bool forgotten_ran = false;
  log.forget_when_shown(log.when_shown([&] { forgotten_ran = true; }));

  // Readers see up to the first unstored event, and a cursor stops before it.
  EXPECT_EQ(heard, std::vector<std::string>{"j0"});
  EXPECT_FALSE(log.all_shown());
  EXPECT_EQ(log.last_seq(), ended - 1);
  EXPECT_EQ(log.appended_seq(), last);
  auto page = log.after(0, {}, 10);
  ASSERT_EQ(page.events.size(), 1u);
  EXPECT_LT(page.cursor, ended);
  EventFilter succeeded;
  succeeded.types = {"job.succeeded"};
  EXPECT_TRUE(log.newest(succeeded, 10).events.empty());
  EXPECT_LT(log.newest({}, 10).cursor, ended);

  // Stored up to j1's end: it and the stored event after it are shown, in order.
  log.stored_upto(ended);
  EXPECT_EQ(heard, (std::vector<std::string>{"j0", "j1", "j2"}));
  EXPECT_FALSE(all_shown);
  page = log.after(page.cursor, {}, 10);
  ASSERT_EQ(page.events.size(), 2u);
  EXPECT_EQ(page.events[0].job_id, "j1");
  EXPECT_EQ(page.cursor, last - 1);

  log.stored_upto(last);
  EXPECT_EQ(heard, (std::vector<std::string>{"j0", "j1", "j2", "j3"}));
  EXPECT_TRUE(all_shown);
  EXPECT_FALSE(forgotten_ran);
  EXPECT_TRUE(log.all_shown());
  EXPECT_EQ(log.last_seq(), last);
  EXPECT_EQ(log.after(page.cursor, {}, 10).events.size(), 1u);
  EXPECT_GT(shown, 0);
  bool at_once = false;
  EXPECT_EQ(log.when_shown([&] { at_once = true; }), 0u);
  EXPECT_TRUE(at_once);
}

TEST(EventLogTest, KnowsItsTypes) {
  EXPECT_TRUE(known_event_type("job.failed"));
  EXPECT_TRUE(known_event_type("node.unhealthy"));
  EXPECT_FALSE(known_event_type("job.exploded"));
}

TEST(NodeEventsTest, StoredEventsComeBackInOrderAndOnlyTheNewestAreKept) {
  testing::FakeClock clock;
  store::MemoryStore store;
  {
    EventLog log(clock);
    NodeEvents events(store, log, 2);
    ASSERT_TRUE(events.recover());
    events.record("node_a", "node.registered", "registered");
    events.record("node_a", "node.disconnected", "gone");
    events.record("node_a", "node.dead", "dead");
    store.flush();
  }
  auto stored = store.scan(kNodeEventsTable);
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored.value().size(), 2u);
  EventLog log(clock);
  NodeEvents events(store, log, 2);
  ASSERT_TRUE(events.recover());
  const auto page = log.after(0, {}, 10);
  ASSERT_EQ(page.events.size(), 2u);
  EXPECT_EQ(page.events[0].type, "node.disconnected");
  EXPECT_EQ(page.events[1].type, "node.dead");
  EXPECT_EQ(page.events[1].node_id, "node_a");
}

}  // namespace
}  // namespace ag::head
