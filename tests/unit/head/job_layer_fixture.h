// The job layer's test fixture: a JobLayer over a memory store, a node registry filled
// by hand, a fake worker channel and a fake clock, with helpers to submit jobs and play
// a worker's part. Shared by job_controller_test.cc and job_gates_test.cc.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "fakes/fake_clock.h"
#include "fakes/fake_worker_channel.h"
#include "head/jobs/job_codec.h"
#include "head/jobs/job_layer.h"
#include "head/store/memory_store.h"

namespace ag::head {

class JobLayerTest : public ::testing::Test {
 protected:
  JobLayerTest()
      : log_dir_(std::filesystem::temp_directory_path() /
                 ("ag-jm-test-" + std::to_string(::getpid()) + "-" +
                  ::testing::UnitTest::GetInstance()->current_test_info()->name())),
        logs_(log_dir_.string()) {
    config_.kill_grace_ms = 3000;
    make_manager();
  }
  ~JobLayerTest() override {
    // The summary's counts, kept as jobs change, agree with the jobs themselves.
    if (jobs_) {
      std::map<JobState, int> counted;
      for (const auto& [_, job] : jobs_->table.all()) counted[job.state]++;
      EXPECT_EQ(jobs_->table.count_by_state(), counted) << "the counts by state drifted from the jobs";
      // And the newest-first list holds every job, in order.
      const auto listed = jobs_->table.list();
      EXPECT_EQ(listed.size(), jobs_->table.all().size());
      EXPECT_TRUE(std::is_sorted(listed.begin(), listed.end(),
                                 [](const Job* a, const Job* b) { return a->queue_seq > b->queue_seq; }));
    }
    jobs_.reset();
    std::filesystem::remove_all(log_dir_);
  }

  void make_manager() {
    jobs_ = std::make_unique<JobLayer>(JobLayer::Deps{clock_, store_, nodes_, channel_, logs_, clock_}, config_);
  }

  void add_node(const std::string& id, int cpus = 4, std::vector<int> gpus = {}) {
    Node node;
    node.node_id = id;
    node.address = "127.0.0." + std::to_string(2 + nodes_.nodes().size());
    node.total.cpu_millis = cpus * 1000;
    node.total.memory_bytes = int64_t{16} << 30;
    node.gpu_ids = gpus;
    node.total.gpus = static_cast<int64_t>(gpus.size());
    node.state = NodeState::kAlive;
    node.last_heartbeat_steady_ms = clock_.steady_ms();
    nodes_.upsert(std::move(node));
  }

  api::JobSpec spec(int num_workers = 1, double cpus = 1) {
    api::JobSpec s;
    s.entrypoint = "python train.py";
    s.num_workers = num_workers;
    s.num_cpus = cpus;
    return s;
  }

  // Submits and lets the store's acknowledgement and the scheduling pass run.
  std::string submit(api::JobSpec s) {
    std::optional<Result<std::string>> result;
    jobs_->controller.submit(std::move(s), [&](Result<std::string> id) { result = std::move(id); });
    clock_.run_ready();
    EXPECT_TRUE(result.has_value());
    EXPECT_TRUE(result->ok()) << result->error().message;
    return result->ok() ? result->value() : "";
  }

  // Stops the job (durably, as the API does) and lets the write land.
  Status stop(const std::string& id, const std::string& by = "") {
    std::optional<Status> result;
    jobs_->controller.stop(id, by, [&](Status s) { result = std::move(s); });
    clock_.run_ready();
    EXPECT_TRUE(result.has_value());
    return result ? *result : Status{};
  }

  const Job& job(const std::string& id) {
    const Job* j = jobs_->table.find(id);
    EXPECT_NE(j, nullptr);
    return *j;
  }

  std::vector<std::string> event_texts(const std::string& id) {
    std::vector<std::string> out;
    for (const auto& e : jobs_->table.events(id)) out.push_back(e.message);
    return out;
  }

  void start_all(const std::vector<std::pair<std::string, api::Launch>>& launches) {
    for (const auto& [node, launch] : launches) {
      EXPECT_TRUE(jobs_->controller.on_task_started(node, launch.task, 1000 + launch.task.task_index).ok());
    }
    clock_.run_ready();
  }

  void exit_all(const std::string& id, int attempt, int count, int code) {
    for (int i = 0; i < count; ++i) {
      api::TaskExit exit;
      exit.exit_code = code;
      report_exit({id, attempt, i}, exit);
    }
    clock_.run_ready();
  }

  // The node a task was placed on.
  std::string node_of(const api::TaskKey& task) {
    return job(task.job_id).attempts.at(static_cast<size_t>(task.attempt)).tasks.at(static_cast<size_t>(task.task_index)).node_id;
  }

  // The task's node reports its end.
  void report_exit(const api::TaskKey& task, const api::TaskExit& exit) {
    EXPECT_TRUE(jobs_->controller.on_task_exited(node_of(task), task, exit).ok());
  }

  // A one-task job on node_a, stored, whose placement is not at first: neither its own
  // write nor the next flush lands. Returns its id ("" if the submit failed).
  std::string submit_placed_but_unstored() {
    // Placed by a pass, not at its submit: it queued while no node was there.
    std::string id = submit(spec());
    EXPECT_EQ(job(id).state, JobState::kPending);
    clock_.advance(100);  // its record is written again with its events' places
    add_node("node_a");
    store_.fail_next_writes(2);
    jobs_->controller.on_node_registered("node_a", {}, {});
    clock_.run_ready();
    return id;
  }

  // The job as the store holds it.
  Job stored(const std::string& id) {
    auto value = store_.get(store::kJobsTable, id);
    EXPECT_TRUE(value.ok() && value.value().has_value());
    auto j = job_from_json(nlohmann::json::parse(*value.value()));
    EXPECT_TRUE(j.ok());
    return j.ok() ? j.value() : Job{};
  }

  std::filesystem::path log_dir_;
  ::ag::testing::FakeClock clock_;
  store::MemoryStore store_;
  NodeRegistry nodes_;
  ::ag::testing::FakeWorkerChannel channel_;
  LogStore logs_;
  JobConfig config_;
  std::unique_ptr<JobLayer> jobs_;
};

}  // namespace ag::head
