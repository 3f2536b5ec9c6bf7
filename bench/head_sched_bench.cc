// The head's own scheduling, end to end in one process: a JobLayer (the head's job
// table, over an in-memory store, with a fake clock and worker channel) holding 100,000
// queued jobs from 100 users, each with a GPU quota; then 1,000 or 10,000 8-GPU nodes
// join at once and the head's passes fill the cluster. Where sched_bench times the
// scheduler's pass, this times everything the head does per placement: its snapshot
// of the nodes and what running tasks hold, the walk of the queue with quotas and fair
// share, the scheduler, then applying each placement (job state, events, the store
// write, the launch message).
//
//   build/bin/head_sched_bench [--nodes 1000,10000] [--jobs 100000] [--users 100]
//
// Prints one Markdown table row per cluster size (bench/RESULTS.md).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "bench_util.h"
#include "fakes/fake_clock.h"
#include "fakes/fake_worker_channel.h"
#include "head/jobs/job_layer.h"
#include "head/logs/log_store.h"
#include "head/nodes/node_registry.h"
#include "head/store/memory_store.h"

namespace {

using ag::bench::Clock;
using ag::bench::ms_since;
using ag::bench::parse_list;
using namespace ag;


struct Row {
  size_t placed = 0;
  double fill_ms = 0;
  double submit_s = 0;
  size_t launches = 0;
};

Row run(int num_nodes, int num_jobs, int num_users) {
  const std::filesystem::path logs_dir =
      std::filesystem::temp_directory_path() / ("ag-head-sched-bench-" + std::to_string(::getpid()));
  Row row;
  {
    testing::FakeClock clock;
    store::MemoryStore store;
    head::NodeRegistry nodes;
    testing::FakeWorkerChannel channel;
    head::LogStore logs(logs_dir.string());
    head::JobLayer jobs({clock, store, nodes, channel, logs, clock}, head::JobConfig{});
    for (int u = 0; u < num_users; ++u) {
      sched::Limits limits;
      limits.gpus = int64_t{num_nodes} * 8 * 3 / num_users;  // three times an even split
      jobs.changes.set_quota(false, "user" + std::to_string(u), limits, [](const Status&) {});
    }
    clock.run_ready();

    // The queue, before any node: 1,000 jobs per submission so that setting it up does
    // not take a pass per job.
    std::mt19937 random(42);
    const int gpus_choice[] = {1, 1, 2, 4, 8, 8};
    const auto submit_start = Clock::now();
    for (int first = 0; first < num_jobs; first += 1000) {
      std::vector<api::JobSpec> batch;
      const std::string owner = "user" + std::to_string(first / 1000 % num_users);
      for (int j = first; j < std::min(num_jobs, first + 1000); ++j) {
        api::JobSpec spec;
        spec.entrypoint = "python train.py";
        spec.num_workers = (random() % 10 == 0) ? 1 + static_cast<int>(random() % 8) : 1;
        const int64_t gpus = gpus_choice[random() % 6];
        spec.num_gpus = gpus;
        spec.num_cpus = static_cast<double>(gpus * 8);
        spec.memory_bytes = gpus * (int64_t{32} << 30);
        if (random() % 20 == 0) {
          spec.priority = 100;
          spec.priority_set = true;
        }
        spec.allow_unschedulable = true;
        batch.push_back(std::move(spec));
      }
      bool ok = false;
      jobs.controller.submit_all(std::move(batch), [&](const Result<std::vector<std::string>>& ids) { ok = ids.ok(); },
                      head::JobController::Submitter{owner});
      clock.run_ready();
      if (!ok) {
        std::fprintf(stderr, "submitting jobs %d.. failed\n", first);
        std::exit(1);
      }
    }
    row.submit_s = ms_since(submit_start) / 1000.0;

    // The nodes join at once; the passes that follow (each posted by the one before
    // while its window fills and moves) place what fits.
    const auto start = Clock::now();
    for (int i = 0; i < num_nodes; ++i) {
      head::Node node;
      char id[32];
      std::snprintf(id, sizeof id, "node_%06d", i);
      node.node_id = id;
      node.address = "10.0." + std::to_string(i / 250) + "." + std::to_string(i % 250 + 1);
      node.total = {128'000, int64_t{1024} << 30, 8};
      for (int g = 0; g < 8; ++g) node.gpu_ids.push_back(g);
      node.state = head::NodeState::kAlive;
      node.last_heartbeat_steady_ms = clock.steady_ms();
      nodes.upsert(std::move(node));
    }
    jobs.controller.on_node_registered("node_000000", {}, {});
    clock.run_ready();
    row.fill_ms = ms_since(start);
    row.launches = channel.take<api::Launch>().size();
    const std::map<head::JobState, int> states = jobs.table.count_by_state();
    if (auto running = states.find(head::JobState::kRunning); running != states.end()) row.placed = running->second;
  }
  std::filesystem::remove_all(logs_dir);
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> node_counts{1000, 10000};
  int num_jobs = 100000, num_users = 100;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--nodes")) node_counts = parse_list(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--jobs")) num_jobs = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--users")) num_users = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "unknown option %s\n", argv[i]);
      return 2;
    }
  }
  std::printf("| nodes | queued jobs (users) | jobs placed (tasks launched) | time to fill | placements/s | queue set up in |\n");
  std::printf("| --- | --- | --- | --- | --- | --- |\n");
  for (int nodes : node_counts) {
    const Row row = run(nodes, num_jobs, num_users);
    std::printf("| %d | %d (%d) | %zu (%zu) | %.2f s | %.0f | %.1f s |\n", nodes, num_jobs, num_users, row.placed,
                row.launches, row.fill_ms / 1000.0, static_cast<double>(row.placed) / (row.fill_ms / 1000.0),
                row.submit_s);
    std::fflush(stdout);
  }
  return 0;
}
