// JobUsage: per-job sums of the tasks' CPU and memory in 5-second buckets, bounded to
// the last 15 minutes.
#include "head/nodes/job_usage.h"

#include <gtest/gtest.h>

namespace ag::head {
namespace {

JobUsage::Report usage(const std::string& job, int task, double cpu, int64_t memory) {
  return {api::TaskUsage{{job, 0, task}, cpu, memory}};
}

TEST(JobUsageTest, TasksAreSummedPerBucketWithTheLatestValueOfEach) {
  JobUsage usage_of;
  const int64_t t0 = 1'000'000'000;  // a bucket boundary
  usage_of.record({usage("job_a", 0, 90, 100), usage("job_b", 0, 5, 1)}, t0);
  usage_of.record({usage("job_a", 1, 80, 200)}, t0 + 1000);  // another node, same bucket
  usage_of.record({usage("job_a", 0, 95, 110)}, t0 + 2000);  // task 0 again: replaces
  usage_of.record({usage("job_a", 0, 50, 120)}, t0 + 6000);  // the next bucket
  auto series = usage_of.series("job_a", t0 + 6000);
  ASSERT_EQ(series.size(), 2u);
  EXPECT_EQ(series[0].time_ms, t0);
  EXPECT_DOUBLE_EQ(series[0].cpu_percent, 175);
  EXPECT_EQ(series[0].memory_bytes, 310);
  EXPECT_EQ(series[0].tasks, 2);
  EXPECT_EQ(series[1].time_ms, t0 + 5000);
  EXPECT_EQ(series[1].tasks, 1);
  EXPECT_EQ(usage_of.series("job_b", t0 + 6000).size(), 1u);
  EXPECT_TRUE(usage_of.series("job_nope", t0).empty());
}

TEST(JobUsageTest, OnlyTheLast15MinutesAreKeptAndSilentJobsAreDropped) {
  JobUsage usage_of;
  const int64_t t0 = 1'000'000'000;
  for (int64_t t = 0; t < 20 * 60 * 1000; t += 1000) usage_of.record({usage("job_a", 0, 10, 1)}, t0 + t);
  auto series = usage_of.series("job_a", t0 + 20 * 60 * 1000);
  EXPECT_LE(series.size(), static_cast<size_t>(JobUsage::kWindowMs / JobUsage::kBucketMs));
  EXPECT_GE(series.front().time_ms, t0 + 5 * 60 * 1000 - JobUsage::kBucketMs);
  // job_a stops reporting; after the window it is gone once anything is recorded.
  usage_of.record({usage("job_b", 0, 1, 1)}, t0 + 40 * 60 * 1000);
  EXPECT_EQ(usage_of.jobs_tracked(), 1u);
  EXPECT_TRUE(usage_of.series("job_a", t0 + 40 * 60 * 1000).empty());
}

TEST(JobUsageTest, EachTaskIsCreditedWithTheGpusItHoldsAndTheJobShowsTheirMean) {
  const std::vector<api::GpuUsage> node = {{0, 90, 10 << 20, 80 << 20}, {1, 30, 20 << 20, 80 << 20},
                                           {2, 100, 40 << 20, 80 << 20}};
  JobUsage::Report rank0 = usage("job_a", 0, 100, 1), rank1 = usage("job_a", 1, 100, 1);
  JobUsage::add_gpus(rank0, {0, 1}, node);
  JobUsage::add_gpus(rank1, {7}, node);  // a GPU the node did not report on: nothing
  EXPECT_EQ(rank0.gpus, 2);
  EXPECT_EQ(rank0.gpu_memory_bytes, 30 << 20);
  EXPECT_EQ(rank1.gpus, 0);
  JobUsage usage_of;
  usage_of.record({rank0, rank1}, 1'000'000'000);
  auto series = usage_of.series("job_a", 1'000'000'000);
  ASSERT_EQ(series.size(), 1u);
  EXPECT_EQ(series[0].gpus, 2);
  EXPECT_DOUBLE_EQ(series[0].gpu_percent, 60);  // GPU 2 is another task's
  EXPECT_EQ(series[0].gpu_memory_bytes, 30 << 20);
}

}  // namespace
}  // namespace ag::head
