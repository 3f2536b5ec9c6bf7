// The sharing policy at scale: one scheduling pass as the head runs it (the queue's
// order by priority and fair share, the quota check before the 64-job window, then the
// gang scheduler) over 1,000 and 10,000 simulated 8-GPU nodes with 100,000 queued jobs
// from 100 users, each with a quota; and placements per second while the cluster fills.
// A pass over the first 10,000 jobs (no window) is the baseline for what the window
// saves; the same cluster with the policy off (one FIFO queue, no quotas, no fair
// share) is the baseline for what the policy costs. Last, on the full cluster, a pass
// whose first job is an urgent 2x8-GPU gang of a queue that preempts, against the same
// pass without preemption.
//
//   build/bin/sched_bench [--nodes 1000,10000] [--jobs 100000] [--users 100] [--passes 30] [--fill-only 1]
//
// --fill-only 1 stops after filling (placements/s), for profiling that phase alone.
//
// Prints one Markdown table row per measure (bench/RESULTS.md).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "bench_util.h"
#include "head/scheduler/fair_share.h"
#include "head/scheduler/preemption.h"
#include "head/scheduler/quotas.h"
#include "head/scheduler/scheduler.h"

namespace {

using ag::Resources;
using namespace ag::sched;
using ag::bench::Clock;
using ag::bench::ms_since;
using ag::bench::parse_list;

constexpr size_t kWindow = 64;  // as SchedulingLoop::kMaxJobsPerPass

struct Cluster {
  std::vector<NodeView> nodes;
  std::map<std::string, PendingJob> jobs;
  PendingQueue queue;
  std::map<std::string, PendingQueue::Entry> entries;
  QuotaPolicy quotas;
  std::map<std::string, Use> use;
  std::map<std::string, double> usage;
  std::map<std::string, size_t> node_index;
  std::vector<RunningJob> running;  // what the passes placed
};

// `policy` off: one owner, one priority, no quotas: the queue is plain FIFO.
Cluster make_cluster(int num_nodes, int num_jobs, int num_users, bool policy, std::mt19937& random) {
  Cluster c;
  for (int i = 0; i < num_nodes; ++i) {
    NodeView node;
    char id[32];
    std::snprintf(id, sizeof id, "node_%06d", i);
    node.node_id = id;
    node.total = {128'000, int64_t{1024} << 30, 8};
    node.free = node.total;
    for (int g = 0; g < 8; ++g) node.free_gpu_ids.push_back(g);
    c.node_index[node.node_id] = c.nodes.size();
    c.nodes.push_back(std::move(node));
  }
  for (int u = 0; u < num_users; ++u) {
    const std::string user = "user" + std::to_string(u);
    Limits limits;
    limits.gpus = int64_t{num_nodes} * 8 * 3 / num_users;  // three times an even split
    if (policy) c.quotas.users[user] = limits;
    c.usage[user] = policy ? static_cast<double>(random() % 100000) : 0;
  }
  const int gpus_choice[] = {1, 1, 2, 4, 8, 8};
  for (int j = 0; j < num_jobs; ++j) {
    PendingJob job;
    job.job_id = "job_" + std::to_string(j);
    job.owner = policy ? "user" + std::to_string(random() % num_users) : "";
    job.num_tasks = (random() % 10 == 0) ? 1 + static_cast<int>(random() % 8) : 1;
    const int64_t gpus = gpus_choice[random() % 6];
    job.per_task = {gpus * 8000, gpus * (int64_t{32} << 30), gpus};
    const int priority = (random() % 20 == 0 && policy) ? 100 : 0;
    job.priority = priority;
    PendingQueue::Entry entry{job.owner, priority, static_cast<uint64_t>(j), job.job_id,
                              {job.per_task.cpu_millis * job.num_tasks, job.per_task.memory_bytes * job.num_tasks,
                               job.per_task.gpus * job.num_tasks}};
    c.queue.add(entry);
    c.entries[job.job_id] = entry;
    c.jobs[job.job_id] = std::move(job);
  }
  return c;
}

// One pass as the head runs it: walk in queue order, skip jobs over quota, schedule the
// first `window`. Applies the placements to the cluster. Returns how many it placed.
size_t pass(Cluster& c, size_t window) {
  const QuotaLedger ledger(c.quotas, c.use);
  std::vector<PendingJob> queue;
  std::map<std::string, int> over_quota_seen;
  using Visit = PendingQueue::Visit;
  c.queue.walk_owners([&](const std::string& owner) { return c.usage[owner]; },
                      [&](const std::string& owner, const std::string& id) {
                        const PendingJob& job = c.jobs.at(id);
                        if (ledger.over_quota(job)) {
                          // As the head: after 8 of an owner's jobs over quota, the rest
                          // are left out when even their least need is over.
                          if (++over_quota_seen[owner] < 8) return Visit::kNext;
                          PendingJob least;
                          least.owner = owner;
                          least.per_task = c.queue.least_need(owner);
                          return ledger.over_quota(least) ? Visit::kSkipOwner : Visit::kNext;
                        }
                        queue.push_back(job);
                        return queue.size() < window ? Visit::kNext : Visit::kStop;
                      });
  const Plan plan = schedule(c.nodes, queue, c.quotas, c.use);
  for (const auto& placement : plan.placements) {
    const PendingJob& job = c.jobs.at(placement.job_id);
    RunningJob running{job.job_id, job.priority, true, false, static_cast<int64_t>(c.running.size()), {}};
    for (const auto& task : placement.tasks) {
      NodeView& node = c.nodes[c.node_index.at(task.node_id)];
      node.free -= job.per_task;
      std::erase_if(node.free_gpu_ids, [&](int g) { return std::count(task.gpu_ids.begin(), task.gpu_ids.end(), g) > 0; });
      running.tasks.push_back({task.node_id, job.per_task, task.gpu_ids});
    }
    c.running.push_back(std::move(running));
    Use& use = c.use[job.owner];
    use.held += Resources{job.per_task.cpu_millis * job.num_tasks, job.per_task.memory_bytes * job.num_tasks,
                          job.per_task.gpus * job.num_tasks};
    ++use.running_jobs;
    c.queue.remove(c.entries.at(job.job_id));
  }
  return plan.placements.size();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}


}  // namespace

int main(int argc, char** argv) {
  std::vector<int> node_counts{1000, 10000};
  int num_jobs = 100000, num_users = 100, passes = 30;
  bool fill_only = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--nodes")) node_counts = parse_list(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--jobs")) num_jobs = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--users")) num_users = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--passes")) passes = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--fill-only")) fill_only = std::atoi(argv[i + 1]) != 0;
    else {
      std::fprintf(stderr, "unknown option %s\n", argv[i]);
      return 2;
    }
  }
  std::printf("| nodes | policy | queued jobs (users) | pass, as the head runs it (window of 64): median | placements/s while filling | pass over the first 10,000 jobs (no window): median | full cluster, pass led by a preempting 2x8-GPU gang / without preemption: median |\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- |\n");
  for (int nodes : node_counts) {
   for (bool policy : {false, true}) {
    std::mt19937 random(42);
    // Filling: passes until the cluster or the quotas are full.
    Cluster filling = make_cluster(nodes, num_jobs, num_users, policy, random);
    size_t placed = 0;
    const auto start = Clock::now();
    std::vector<double> pass_ms;
    for (;;) {
      const auto one = Clock::now();
      const size_t n = pass(filling, kWindow);
      pass_ms.push_back(ms_since(one));
      placed += n;
      if (n == 0) break;
    }
    const double fill_s = ms_since(start) / 1000.0;
    if (fill_only) {
      std::printf("| %d | %s | %d (%d) | %.2f ms filling | %.0f (%zu placed in %.2f s, %zu passes) | | |\n", nodes,
                  policy ? "on" : "off", num_jobs, policy ? num_users : 1, median(pass_ms),
                  static_cast<double>(placed) / fill_s, placed, fill_s, pass_ms.size());
      continue;
    }
    // A pass on the full cluster: what every task end costs while nothing fits.
    std::vector<double> full_ms;
    for (int i = 0; i < passes; ++i) {
      const auto one = Clock::now();
      pass(filling, kWindow);
      full_ms.push_back(ms_since(one));
    }
    std::vector<double> wide_ms;
    for (int i = 0; i < std::max(3, passes / 10); ++i) {
      const auto one = Clock::now();
      pass(filling, 10000);
      wide_ms.push_back(ms_since(one));
    }
    // Preemption: an urgent gang first, then the window as usual.
    std::vector<PendingJob> queue;
    PendingJob urgent;
    urgent.job_id = "urgent";
    urgent.num_tasks = 2;
    urgent.per_task = {64'000, int64_t{256} << 30, 8};
    urgent.priority = 1000;
    urgent.may_preempt = true;
    queue.push_back(urgent);
    filling.queue.walk([&](const std::string& owner) { return filling.usage[owner]; }, [&](const std::string& id) {
      queue.push_back(filling.jobs.at(id));
      return queue.size() < kWindow;
    });
    PassInput input{filling.quotas, filling.use, {}, filling.running, static_cast<int64_t>(filling.running.size())};
    std::vector<double> preempt_ms, plain_ms;
    size_t victims = 0;
    for (int i = 0; i < passes; ++i) {
      auto one = Clock::now();
      const Plan plan = schedule(filling.nodes, queue, input);
      preempt_ms.push_back(ms_since(one));
      victims = plan.preemptions.empty() ? 0 : plan.preemptions[0].victims.size();
      queue[0].may_preempt = false;
      one = Clock::now();
      schedule(filling.nodes, queue, input);
      plain_ms.push_back(ms_since(one));
      queue[0].may_preempt = true;
    }
    std::printf("| %d | %s | %d (%d) | %.2f ms filling, %.2f ms full | %.0f (%zu placed in %.2f s, %zu passes) | %.1f ms | %.2f ms (%zu victims among %zu running) / %.2f ms |\n",
                nodes, policy ? "on" : "off", num_jobs, policy ? num_users : 1, median(pass_ms), median(full_ms),
                static_cast<double>(placed) / fill_s, placed, fill_s, pass_ms.size(), median(wide_ms),
                median(preempt_ms), victims, filling.running.size(), median(plain_ms));
    std::fflush(stdout);
   }
  }
  return 0;
}
