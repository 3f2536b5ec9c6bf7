// The head's own scheduling, end to end in one process: a JobLayer (the head's job
// table, over an in-memory store, with a fake clock and worker channel) holding 100,000
// queued jobs from 100 users, each with a GPU quota; then 1,000 or 10,000 8-GPU nodes
// join at once and the head's passes fill the cluster. Where sched_bench times the
// scheduler's pass, this times everything the head does per placement: its snapshot
// of the nodes and what running tasks hold, the walk of the queue with quotas and fair
// share, the scheduler, then applying each placement (job state, events, the store
// write, the launch message).
//
// Then the head restarts over the same store (the running jobs recovered, their nodes
// awaited) and every node registers again at once, reporting the tasks it runs: the
// storm is timed until the head has settled (every node ALIVE, its tasks adopted, no
// pass left to run). A pass may run after every registration, as it may in the head
// when registrations and posted passes take turns on the io thread.
//
//   build/bin/head_sched_bench [--nodes 1000,10000] [--jobs 100000] [--users 100] [--storm 1]
//       [--quota-halves 6] [--labelled 0]
//
// (--storm 0: the fill alone.)
//
// Last, submits into a cluster with nothing queued: one job per submit (each placed at
// its submit and stored placed, JobController::place_at_once), and the same while an
// unplaceable job sits in the queue (each job queued, then placed by a pass); and one
// submit of 1,000 jobs. The head's CPU per job, for each.
//
// Prints one Markdown table row per cluster size for each (bench/RESULTS.md).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include "api/protocol.h"
#include "bench_util.h"
#include "fakes/fake_clock.h"
#include "head/jobs/job_layer.h"
#include "head/logs/log_store.h"
#include "head/nodes/node_registry.h"
#include "head/store/memory_store.h"

namespace {

using ag::bench::Clock;
using ag::bench::ms_since;
using ag::bench::parse_list;
using namespace ag;

// CPU time of this thread (all the head's work here runs on it): on a machine shared
// with other work, placements per CPU-second vary less than per wall-second.
double thread_cpu_ms() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1000.0 + static_cast<double>(t.tv_nsec) / 1e6;
}

// The head's channel to its workers, up to the socket: each message encoded as the
// head sends it, then dropped (a real channel writes it and lets it go; keeping every
// launch would charge the fill for memory the head does not hold).
class EncodingChannel final : public head::WorkerChannel {
 public:
  bool send(const std::string&, api::HeadMessage message) override {
    bytes += api::encode(message).size();
    launches += std::holds_alternative<api::Launch>(message);
    kills += std::holds_alternative<api::Kill>(message);
    return true;
  }
  size_t bytes = 0;
  size_t launches = 0;
  size_t kills = 0;
};

struct Row {
  size_t placed = 0;
  double fill_ms = 0;
  double fill_cpu_ms = 0;
  double submit_s = 0;
  size_t launches = 0;
  // The registration storm after a restart.
  double recover_ms = 0;
  double storm_ms = 0;
  size_t alive = 0;
  size_t adopted = 0;  // tasks RUNNING after the storm (all were reported running)
  size_t kills = 0;    // tasks the head told a node to kill (none expected)
  size_t running_jobs = 0;
};

// `labelled`: every labelled-th node carries the label pool=a (0: none does).
head::Node make_node(int i, int64_t steady_ms, int labelled = 0) {
  head::Node node;
  if (labelled > 0 && i % labelled == 0) node.labels["pool"] = "a";
  char id[32];
  std::snprintf(id, sizeof id, "node_%06d", i);
  node.node_id = id;
  node.address = "10.0." + std::to_string(i / 250) + "." + std::to_string(i % 250 + 1);
  node.total = {128'000, int64_t{1024} << 30, 8};
  for (int g = 0; g < 8; ++g) node.gpu_ids.push_back(g);
  node.state = head::NodeState::kAlive;
  node.last_heartbeat_steady_ms = steady_ms;
  return node;
}

// What each node runs: every live task of the active jobs, as its worker reports it.
std::map<std::string, std::vector<api::RunningTask>> running_by_node(const head::JobTable& table) {
  std::map<std::string, std::vector<api::RunningTask>> out;
  int64_t pid = 1000;
  for (const auto& [id, job] : table.active()) {
    const head::AttemptRecord* attempt = job->current_attempt();
    if (!attempt) continue;
    for (const auto& task : attempt->tasks) {
      if (!task.terminal()) out[task.node_id].push_back({{id, attempt->number, task.index}, ++pid});
    }
  }
  return out;
}

void storm(int num_nodes, int labelled, testing::FakeClock& clock, store::MemoryStore& store, head::LogStore& logs,
           const std::map<std::string, std::vector<api::RunningTask>>& running, Row& row) {
  head::NodeRegistry nodes;
  EncodingChannel channel;
  const auto recover_start = Clock::now();
  head::JobLayer jobs({clock, store, nodes, channel, logs, clock}, head::JobConfig{});
  if (Status s = jobs.recover(); !s) {
    std::fprintf(stderr, "recovering failed: %s\n", s.error().message.c_str());
    std::exit(1);
  }
  clock.run_ready();
  row.recover_ms = ms_since(recover_start);
  row.running_jobs = jobs.table.active().size();
  static const std::vector<api::RunningTask> kNone;
  const auto start = Clock::now();
  for (int i = 0; i < num_nodes; ++i) {
    head::Node node = make_node(i, clock.steady_ms(), labelled);
    const std::string id = node.node_id;
    nodes.upsert(std::move(node));
    auto reported = running.find(id);
    jobs.controller.on_node_registered(id, reported == running.end() ? kNone : reported->second, {});
    clock.run_ready();
  }
  row.storm_ms = ms_since(start);
  for (const auto& [_, node] : nodes.nodes()) row.alive += node.state == head::NodeState::kAlive;
  for (const auto& [_, job] : jobs.table.active()) {
    for (const auto& task : job->current_attempt()->tasks) row.adopted += task.state == head::TaskState::kRunning;
  }
  row.kills = channel.kills;
}

// `quota_halves`: each user's GPU quota in halves of an even split of the cluster (6:
// three times an even split, so the fill fills it; 1: half of one, so the fill stops at
// the quotas with half the GPUs free, and the storm's nodes come back with room that the
// queued jobs, every one over its owner's quota, cannot use).
// `labelled`: every job asks for nodes labelled pool=a, which one node in `labelled`
// carries (0: no labels, no constraints): the storm's other nodes come back empty, with
// room no queued job may use.
Row run(int num_nodes, int num_jobs, int num_users, bool with_storm, int quota_halves, int labelled) {
  const std::filesystem::path logs_dir =
      std::filesystem::temp_directory_path() / ("ag-head-sched-bench-" + std::to_string(::getpid()));
  Row row;
  {
    testing::FakeClock clock;
    store::MemoryStore store;
    head::LogStore logs(logs_dir.string());
    std::map<std::string, std::vector<api::RunningTask>> running;
    {
      head::NodeRegistry nodes;
      EncodingChannel channel;
      head::JobLayer jobs({clock, store, nodes, channel, logs, clock}, head::JobConfig{});
      for (int u = 0; u < num_users; ++u) {
        sched::Limits limits;
        limits.gpus = int64_t{num_nodes} * 8 * quota_halves / (2 * num_users);
        jobs.changes.set_quota(false, "user" + std::to_string(u), limits, [](const Status& s) {
          if (!s) std::fprintf(stderr, "setting a quota failed: %s\n", s.error().message.c_str());
        });
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
          if (labelled > 0) spec.constraints["pool"] = "a";
          batch.push_back(std::move(spec));
        }
        bool ok = false;
        jobs.controller.submit_all(
            std::move(batch), [&](const Result<std::vector<std::string>>& ids) { ok = ids.ok(); },
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
      const double start_cpu_ms = thread_cpu_ms();
      for (int i = 0; i < num_nodes; ++i) nodes.upsert(make_node(i, clock.steady_ms(), labelled));
      jobs.controller.on_node_registered("node_000000", {}, {});
      clock.run_ready();
      row.fill_ms = ms_since(start);
      row.fill_cpu_ms = thread_cpu_ms() - start_cpu_ms;
      row.launches = channel.launches;
      const std::map<head::JobState, int> states = jobs.table.count_by_state();
      if (auto found = states.find(head::JobState::kRunning); found != states.end()) row.placed = found->second;
      running = running_by_node(jobs.table);
    }  // the head stops: what it still held is written
    if (with_storm) storm(num_nodes, labelled, clock, store, logs, running, row);
  }
  std::filesystem::remove_all(logs_dir);
  return row;
}

struct SubmitRow {
  double at_once_us = 0;      // per one-job submit, placed at its submit
  double through_queue_us = 0;  // per one-job submit, queued then placed by a pass
  double batch_us = 0;        // per job of one submit of 1,000 jobs, placed at once
  size_t placed_at_once = 0;
};

// The head's CPU per one-job submit into `num_nodes` idle nodes, `count` submits; with
// `blocked`, an unplaceable job waits in the queue first. `per_submit` jobs each.
double submit_cpu_us(int num_nodes, int count, bool blocked, int per_submit, size_t* running) {
  testing::FakeClock clock;
  store::MemoryStore store;
  const std::filesystem::path logs_dir =
      std::filesystem::temp_directory_path() / ("ag-head-sched-bench-s-" + std::to_string(::getpid()));
  double us = 0;
  {
    head::LogStore logs(logs_dir.string());
    head::NodeRegistry nodes;
    EncodingChannel channel;
    head::JobLayer jobs({clock, store, nodes, channel, logs, clock}, head::JobConfig{});
    for (int i = 0; i < num_nodes; ++i) nodes.upsert(make_node(i, clock.steady_ms()));
    jobs.controller.on_node_registered("node_000000", {}, {});
    clock.run_ready();
    const auto submit = [&](std::vector<api::JobSpec> specs) {
      bool ok = false;
      jobs.controller.submit_all(std::move(specs), [&](const Result<std::vector<std::string>>& ids) { ok = ids.ok(); },
                                 head::JobController::Submitter{"user0"});
      clock.run_ready();
      if (!ok) {
        std::fprintf(stderr, "a submit failed\n");
        std::exit(1);
      }
    };
    api::JobSpec spec;
    spec.entrypoint = "python train.py";
    spec.num_gpus = 1;
    spec.num_cpus = 8;
    if (blocked) {
      api::JobSpec huge = spec;
      huge.num_gpus = 9;  // more than any node has
      huge.allow_unschedulable = true;
      submit({huge});
    }
    const double start = thread_cpu_ms();
    for (int i = 0; i < count; ++i) submit(std::vector<api::JobSpec>(static_cast<size_t>(per_submit), spec));
    us = (thread_cpu_ms() - start) * 1000.0 / (count * per_submit);
    *running = jobs.table.active().size();
  }
  std::filesystem::remove_all(logs_dir);
  return us;
}

SubmitRow submits(int num_nodes) {
  SubmitRow row;
  size_t running = 0;
  row.at_once_us = submit_cpu_us(num_nodes, 2000, false, 1, &row.placed_at_once);
  row.through_queue_us = submit_cpu_us(num_nodes, 2000, true, 1, &running);
  row.batch_us = submit_cpu_us(num_nodes, 1, false, 1000, &running);
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> node_counts{1000, 10000};
  int num_jobs = 100000, num_users = 100, with_storm = 1, quota_halves = 6, labelled = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--nodes"))
      node_counts = parse_list(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--jobs"))
      num_jobs = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--storm"))
      with_storm = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--users"))
      num_users = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--quota-halves"))
      quota_halves = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--labelled"))
      labelled = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "unknown option %s\n", argv[i]);
      return 2;
    }
  }
  std::printf(
      "| nodes | queued jobs (users) | jobs placed (tasks launched) | time to fill | placements/s | per CPU-second | "
      "queue set up in |\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- |\n");
  std::vector<Row> rows;
  for (int nodes : node_counts) {
    const Row row = run(nodes, num_jobs, num_users, with_storm != 0, quota_halves, labelled);
    std::printf("| %d | %d (%d) | %zu (%zu) | %.2f s | %.0f | %.0f | %.1f s |\n", nodes, num_jobs, num_users,
                row.placed, row.launches, row.fill_ms / 1000.0,
                static_cast<double>(row.placed) / (row.fill_ms / 1000.0),
                static_cast<double>(row.placed) / (row.fill_cpu_ms / 1000.0), row.submit_s);
    std::fflush(stdout);
    rows.push_back(row);
  }
  std::printf("\nOne-job submits into idle nodes, the head's CPU per job (2,000 submits; then one submit of 1,000 "
              "jobs):\n\n");
  std::printf("| nodes | placed at its submit | queued, then placed by a pass (a job waits in the queue) | "
              "one submit of 1,000 jobs, per job |\n");
  std::printf("| --- | --- | --- | --- |\n");
  for (int nodes : node_counts) {
    const SubmitRow row = submits(nodes);
    std::printf("| %d | %.1f us (%zu running) | %.1f us | %.1f us |\n", nodes, row.at_once_us, row.placed_at_once,
                row.through_queue_us, row.batch_us);
    std::fflush(stdout);
  }
  if (!with_storm) return 0;
  std::printf("\nRegistration storm after a head restart (every node at once, a pass after each):\n\n");
  std::printf("| nodes | running jobs recovered in | nodes ALIVE | tasks adopted (kills) | settled in |\n");
  std::printf("| --- | --- | --- | --- | --- |\n");
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& row = rows[i];
    std::printf("| %d | %zu in %.2f s | %zu | %zu (%zu) | %.2f s |\n", node_counts[i], row.running_jobs,
                row.recover_ms / 1000.0, row.alive, row.adopted, row.kills, row.storm_ms / 1000.0);
  }
  return 0;
}
