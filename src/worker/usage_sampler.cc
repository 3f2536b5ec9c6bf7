#include "worker/usage_sampler.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <set>

#include <fstream>
#include <sstream>

#include "worker/task_cgroup.h"

namespace ag::worker {

UsageSampler::UsageSampler() : nvml_(Nvml::get()) {}

api::NodeUsage UsageSampler::sample() {
  api::NodeUsage s;
  std::ifstream stat("/proc/stat");
  std::string cpu;
  uint64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  if (stat >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal) {
    uint64_t busy = user + nice + system + irq + softirq + steal;
    uint64_t total = busy + idle + iowait;
    if (last_total_ && total > last_total_) {
      s.cpu_percent = 100.0 * static_cast<double>(busy - last_busy_) / static_cast<double>(total - last_total_);
    }
    last_busy_ = busy;
    last_total_ = total;
  }
  std::ifstream meminfo("/proc/meminfo");
  std::string key, unit;
  int64_t kib = 0, total_kib = 0, available_kib = 0;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemTotal:") total_kib = kib;
    if (key == "MemAvailable:") available_kib = kib;
  }
  s.memory_used_bytes = (total_kib - available_kib) * 1024;
  if (nvml_) {
    unsigned int count = 0;
    if (nvml_->device_count(&count) == nvml::kSuccess) {
      for (unsigned int i = 0; i < count; ++i) {
        nvml::Device h = nullptr;
        if (nvml_->device_by_index(i, &h) != nvml::kSuccess) continue;
        api::GpuUsage g;
        g.index = static_cast<int>(i);
        nvml::Utilization u{};
        if (nvml_->utilization && nvml_->utilization(h, &u) == nvml::kSuccess) {
          g.utilization_percent = static_cast<int64_t>(u.gpu);
        }
        nvml::Memory m{};
        if (nvml_->memory && nvml_->memory(h, &m) == nvml::kSuccess) {
          g.memory_used_bytes = static_cast<int64_t>(m.used);
          g.memory_total_bytes = static_cast<int64_t>(m.total);
        }
        s.gpus.push_back(g);
      }
    }
  }
  return s;
}

std::vector<api::TaskUsage> UsageSampler::sample_tasks(const std::vector<std::pair<api::TaskKey, int64_t>>& pids,
                                                       const std::map<int64_t, std::string>& cgroups) {
  std::map<int64_t, std::pair<uint64_t, int64_t>> groups;  // group -> (ticks, rss pages)
  for (const auto& [_, pid] : pids) groups[pid] = {0, 0};
  std::vector<api::TaskUsage> out;
  if (groups.empty()) {
    last_group_ticks_.clear();
    return out;
  }
  std::map<int64_t, int64_t> leader_of;  // a process in a task's control group -> its task's leader
  for (const auto& [leader, group] : cgroups) {
    for (int pid : cgroup_pids(group)) leader_of[pid] = leader;
  }
  std::string text;
  auto count = [&](const char* pid) {
    std::ifstream in(std::string("/proc/") + pid + "/stat");
    if (!std::getline(in, text)) return;
    // After "pid (comm) ": state ppid pgrp ... utime(14) stime(15) ... rss(24).
    const size_t close = text.rfind(')');
    if (close == std::string::npos) return;
    std::istringstream fields(text.substr(close + 2));
    std::string field;
    int64_t pgrp = 0;
    uint64_t utime = 0, stime = 0;
    int64_t rss = 0;
    for (int index = 3; fields >> field; ++index) {
      if (index == 5) pgrp = std::atoll(field.c_str());
      if (index == 14) utime = std::strtoull(field.c_str(), nullptr, 10);
      if (index == 15) stime = std::strtoull(field.c_str(), nullptr, 10);
      if (index == 24) {
        rss = std::atoll(field.c_str());
        break;
      }
    }
    if (auto in_group = leader_of.find(std::atoll(pid)); in_group != leader_of.end()) pgrp = in_group->second;
    auto group = groups.find(pgrp);
    if (group == groups.end()) return;
    group->second.first += utime + stime;
    group->second.second += rss;
  };
  // Where every task has a control group, its processes are those of the group: only
  // they are read, not every process of the machine (hundreds of agents on one machine
  // would each read thousands every second).
  const bool all_grouped = std::all_of(pids.begin(), pids.end(), [&](const auto& p) { return cgroups.count(p.second); });
  if (all_grouped) {
    for (const auto& [pid, _] : leader_of) count(std::to_string(pid).c_str());
  } else if (DIR* proc = ::opendir("/proc")) {
    while (const dirent* entry = ::readdir(proc)) {
      if (entry->d_name[0] >= '0' && entry->d_name[0] <= '9') count(entry->d_name);
    }
    ::closedir(proc);
  }
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::steady_clock::now().time_since_epoch())
                             .count();
  const double ticks_per_s = static_cast<double>(::sysconf(_SC_CLK_TCK));
  const int64_t page = ::sysconf(_SC_PAGESIZE);
  std::map<int64_t, GroupTicks> seen;
  for (const auto& [task, pid] : pids) {
    const auto& [ticks, rss] = groups[pid];
    api::TaskUsage usage{task, 0, rss * page};
    auto last = last_group_ticks_.find(pid);
    if (last != last_group_ticks_.end() && now_ms > last->second.at_ms && ticks >= last->second.ticks) {
      const double seconds = static_cast<double>(now_ms - last->second.at_ms) / 1000.0;
      usage.cpu_percent = 100.0 * static_cast<double>(ticks - last->second.ticks) / ticks_per_s / seconds;
    }
    seen[pid] = {ticks, now_ms};
    out.push_back(std::move(usage));
  }
  last_group_ticks_ = std::move(seen);
  return out;
}

}  // namespace ag::worker
