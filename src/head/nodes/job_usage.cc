#include "head/nodes/job_usage.h"

namespace ag::head {

void JobUsage::add_gpus(Report& report, const std::vector<int>& gpu_ids, const std::vector<api::GpuUsage>& node_gpus) {
  for (int id : gpu_ids) {
    for (const auto& gpu : node_gpus) {
      if (gpu.index != id) continue;
      ++report.gpus;
      report.gpu_percent_sum += static_cast<double>(gpu.utilization_percent);
      report.gpu_percent_max = std::max(report.gpu_percent_max, static_cast<double>(gpu.utilization_percent));
      report.gpu_memory_bytes += gpu.memory_used_bytes;
    }
  }
}

void JobUsage::record(const std::vector<Report>& reports, int64_t now_ms) {
  const int64_t start = now_ms - now_ms % kBucketMs;
  for (const auto& report : reports) {
    const api::TaskUsage& t = report.usage;
    Series& series = jobs_[t.task.job_id];
    if (series.buckets.empty() || series.buckets.back().start_ms < start) {
      series.buckets.push_back(Bucket{start, {}});
      while (series.buckets.size() > static_cast<size_t>(kWindowMs / kBucketMs)) series.buckets.pop_front();
    }
    series.buckets.back().by_task[{t.task.attempt, t.task.task_index}] = report;
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
    double gpu_percent_sum = 0;
    for (const auto& [_, report] : bucket.by_task) {
      sample.cpu_percent += report.usage.cpu_percent;
      sample.memory_bytes += report.usage.memory_bytes;
      ++sample.tasks;
      sample.gpus += report.gpus;
      gpu_percent_sum += report.gpu_percent_sum;
      sample.gpu_percent_max = std::max(sample.gpu_percent_max, report.gpu_percent_max);
      sample.gpu_memory_bytes += report.gpu_memory_bytes;
    }
    if (sample.gpus > 0) sample.gpu_percent = gpu_percent_sum / sample.gpus;
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
