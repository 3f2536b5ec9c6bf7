// What each running job's tasks use, over the last 15 minutes, for the job page's
// charts: the workers report every running task's CPU and memory with each heartbeat
// (api::NodeUsage::tasks); this sums them per job in 5-second buckets.
//
//   heartbeat {usage.tasks[]} --WorkerGateway--> record() --> series() <-- GET /api/jobs/{id}/usage
//
// Bounded: a bucket holds one value per task (the latest), a job keeps 180 buckets, and
// a job nobody has reported on for 15 minutes is dropped. Io thread only.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "api/protocol.h"

namespace ag::head {

class JobUsage {
 public:
  static constexpr int64_t kBucketMs = 5000;
  static constexpr int64_t kWindowMs = 15 * 60 * 1000;

  // One task's report: its processes' use, and that of the GPUs it holds (the node
  // measures each GPU; the head knows which task holds which).
  struct Report {
    api::TaskUsage usage;
    int gpus = 0;                // GPUs the task holds that the node reported on
    double gpu_percent_sum = 0;  // their utilization, summed
    double gpu_percent_max = 0;  // the busiest one's
    int64_t gpu_memory_bytes = 0;
  };
  // The GPU part of a report: the node's figures for the GPU indexes `gpu_ids`.
  static void add_gpus(Report& report, const std::vector<int>& gpu_ids, const std::vector<api::GpuUsage>& node_gpus);

  // One node's reports, at `now_ms`, about tasks the caller checked were placed on it.
  void record(const std::vector<Report>& reports, int64_t now_ms);

  struct Sample {
    int64_t time_ms = 0;      // the bucket's start
    double cpu_percent = 0;   // summed over the job's tasks (100 = one core)
    int64_t memory_bytes = 0;  // summed over the job's tasks
    int tasks = 0;            // how many tasks reported in the bucket
    int gpus = 0;             // GPUs measured among them
    double gpu_percent = 0;   // their mean utilization (0 without GPUs)
    double gpu_percent_max = 0;  // the busiest one's
    int64_t gpu_memory_bytes = 0;
  };
  // Oldest first; empty for a job with no reports in the window.
  std::vector<Sample> series(const std::string& job_id, int64_t now_ms) const;

  void forget(const std::string& job_id) { jobs_.erase(job_id); }
  size_t jobs_tracked() const { return jobs_.size(); }

 private:
  struct Bucket {
    int64_t start_ms = 0;
    std::map<std::pair<int, int>, Report> by_task;  // (attempt, task) -> its latest report
  };
  struct Series {
    std::deque<Bucket> buckets;
    int64_t last_ms = 0;
  };
  void prune(int64_t now_ms);

  std::map<std::string, Series> jobs_;
  int64_t last_prune_ms_ = 0;
};

}  // namespace ag::head
