// GateIndex and ArrayThrottle: gated jobs indexed by the jobs they wait on and their
// begin times (one timer, the earliest; only jobs still gated are due); an array's
// places go to waiting elements by index as places come free.
#include "head/jobs/gate_index.h"

#include <gtest/gtest.h>

#include "fakes/fake_clock.h"
#include "head/jobs/array_throttle.h"

namespace ag::head {
namespace {

using testing::FakeClock;

TEST(GateIndexTest, DependentsAreIndexedUntilUngated) {
  FakeClock clock;
  GateIndex gates(clock, clock, [](const std::vector<std::string>&) {});
  gates.gate("job_b", {"job_a"}, 0);
  gates.gate("job_c", {"job_a", "job_x"}, 0);
  EXPECT_TRUE(gates.gated("job_b"));
  EXPECT_EQ(gates.dependents("job_a"), (std::set<std::string>{"job_b", "job_c"}));
  gates.ungate("job_b", {"job_a"}, 0);
  EXPECT_FALSE(gates.gated("job_b"));
  EXPECT_EQ(gates.dependents("job_a"), std::set<std::string>{"job_c"});
  gates.ungate("job_c", {"job_a", "job_x"}, 0);
  EXPECT_TRUE(gates.dependents("job_a").empty());
  EXPECT_TRUE(gates.dependents("job_x").empty());
}

TEST(GateIndexTest, BeginTimesComeInOrderAndOnlyForJobsStillGated) {
  FakeClock clock;
  std::vector<std::vector<std::string>> due;
  GateIndex gates(clock, clock, [&](const std::vector<std::string>& ids) { due.push_back(ids); });
  const int64_t now = clock.now_ms();
  gates.gate("job_late", {}, now + 5000);
  gates.gate("job_early", {}, now + 1000);
  gates.gate("job_released", {}, now + 1000);
  gates.ungate("job_released", {}, now + 1000);  // released by a user before its time
  clock.advance(999);
  EXPECT_TRUE(due.empty());
  clock.advance(1);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0], std::vector<std::string>{"job_early"});
  clock.advance(4000);
  ASSERT_EQ(due.size(), 2u);
  EXPECT_EQ(due[1], std::vector<std::string>{"job_late"});
}

Job element(const std::string& array_id, int index, int max_running) {
  Job job;
  job.id = array_id + "_" + std::to_string(index);
  job.array_id = array_id;
  job.array_index = index;
  job.spec.array = api::ArraySpec{};
  job.spec.array->max_running = max_running;
  return job;
}

TEST(ArrayThrottleTest, APlaceThatComesFreeGoesToTheLowestWaitingIndex) {
  ArrayThrottle arrays;
  std::vector<Job> jobs;
  for (int i = 0; i < 4; ++i) jobs.push_back(element("job_arr", i, 2));
  for (const auto& job : jobs) arrays.add(job);
  arrays.queued(jobs[0]);
  arrays.queued(jobs[1]);
  std::vector<std::string> admitted;
  const auto admit_next = [&](const std::string& id) {
    admitted.push_back(id);
    for (const auto& job : jobs) {
      if (job.id == id) arrays.queued(job);
    }
  };
  arrays.waits(jobs[3], true, admit_next);
  arrays.waits(jobs[2], true, admit_next);
  sched::Gates gates;
  arrays.fill_gates(jobs[2], gates);
  EXPECT_EQ(gates.array_limit, 2);
  EXPECT_EQ(gates.array_admitted, 2);
  EXPECT_FALSE(gates.holds_array_slot);
  EXPECT_TRUE(admitted.empty());
  arrays.leave(jobs[0], admit_next);
  EXPECT_EQ(admitted, std::vector<std::string>{"job_arr_2"});
  arrays.leave(jobs[1], admit_next);
  EXPECT_EQ(admitted, (std::vector<std::string>{"job_arr_2", "job_arr_3"}));
  ASSERT_NE(arrays.find("job_arr"), nullptr);
  EXPECT_EQ(arrays.find("job_arr")->elements.size(), 4u);
  for (const auto& job : jobs) arrays.forget(job);
  EXPECT_EQ(arrays.find("job_arr"), nullptr) << "the array goes with its last element";
}

TEST(ArrayThrottleTest, AnArrayWithoutALimitHoldsNoPlaces) {
  ArrayThrottle arrays;
  Job job = element("job_arr", 0, 0);
  arrays.add(job);
  arrays.queued(job);
  sched::Gates gates;
  arrays.fill_gates(job, gates);
  EXPECT_EQ(gates.array_limit, 0);
  EXPECT_TRUE(arrays.find("job_arr")->admitted.empty());
}

}  // namespace
}  // namespace ag::head
