#include "head/job_usage.h"

namespace ag::head {

void JobUsage::record(const std::vector<api::TaskUsage>& tasks, int64_t now_ms) {
  const int64_t start = now_ms - now_ms % kBucketMs;
  for (const auto& t : tasks) {
    Series& series = jobs_[t.task.job_id];
    if (series.buckets.empty() || series.buckets.back().start_ms < start) {
      series.buckets.push_back(Bucket{start, {}});
      while (series.buckets.size() > static_cast<size_t>(kWindowMs / kBucketMs)) series.buckets.pop_front();
    }
    series.buckets.back().by_task[{t.task.attempt, t.task.task_index}] = {t.cpu_percent, t.memory_bytes};
    series.last_ms = now_ms;
  }
  if (now_ms - last_prune_ms_ >= 60000) prune(now_ms);
}

std::vector<JobUsage::Sample> JobUsage::series(const std::string& job_id, int64_t now_ms) const {
  std::vector<Sample> out;
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return out;
  for (const Bucket& bucket : it->second.buckets) {
    if (bucket.start_ms < now_ms - kWindowMs) continue;
    Sample sample;
    sample.time_ms = bucket.start_ms;
    for (const auto& [_, value] : bucket.by_task) {
      sample.cpu_percent += value.first;
      sample.memory_bytes += value.second;
      ++sample.tasks;
    }
    out.push_back(sample);
  }
  return out;
}

void JobUsage::prune(int64_t now_ms) {
  last_prune_ms_ = now_ms;
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    it = now_ms - it->second.last_ms > kWindowMs ? jobs_.erase(it) : std::next(it);
  }
}

}  // namespace ag::head
