// Fixture builders for job state machine tests: a job with a given gang size, the
// placement the scheduler would hand back for it, and the ways a task can end.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "head/jobs/job.h"
#include "head/jobs/job_state_machine.h"

namespace ag::head::testing {

inline constexpr int kMasterPort = 29500;
inline constexpr int64_t kPlacedAtMs = 1'000;

// A PENDING job of `num_workers` tasks, as the job table holds it after submit.
inline Job make_job(int num_workers = 2, int max_retries = 0, std::optional<double> timeout_s = std::nullopt) {
  Job job;
  job.id = "job_0123456789ab";
  job.spec.entrypoint = "python train.py";
  job.spec.num_workers = num_workers;
  job.spec.max_retries = max_retries;
  job.spec.timeout_s = timeout_s;
  job.submitted_ms = 500;
  return job;
}

// Node "node_<i>" at address "10.0.0.<i+1>" for task i: one task per node.
inline std::string node_id_for(int task_index) { return "node_" + std::to_string(task_index); }
inline std::string address_for(int task_index) { return "10.0.0." + std::to_string(task_index + 1); }

inline std::vector<PlacedTask> placed_tasks(int count) {
  std::vector<PlacedTask> tasks;
  for (int i = 0; i < count; ++i) tasks.push_back({node_id_for(i), address_for(i), {i}});
  return tasks;
}

// Places the job (one task per node) and returns the effects of placement.
inline Effects place(Job& job, int64_t now_ms = kPlacedAtMs) {
  return on_placed(job, placed_tasks(job.spec.num_workers), kMasterPort, now_ms);
}

// Places the job and reports every task of the new attempt as started.
inline void place_and_start(Job& job, int64_t now_ms = kPlacedAtMs) {
  place(job, now_ms);
  const int attempt = job.current_attempt()->number;
  for (int i = 0; i < job.spec.num_workers; ++i) on_task_started(job, attempt, i, 100 + i, now_ms + 1);
}

// How a task ended. Members are set by name so that new api::TaskExit fields default.
inline api::TaskExit exit_code(int code) {
  api::TaskExit exit;
  exit.exit_code = code;
  return exit;
}
inline api::TaskExit killed_by(int signal) {
  api::TaskExit exit;
  exit.signal = signal;
  return exit;
}
inline api::TaskExit start_error(std::string why) {
  api::TaskExit exit;
  exit.start_error = std::move(why);
  return exit;
}

// Task indexes of a list of task references, in order.
inline std::vector<int> indexes(const std::vector<TaskRef>& refs) {
  std::vector<int> out;
  for (const auto& ref : refs) out.push_back(ref.task.task_index);
  return out;
}

// True when any event line contains `needle`.
inline bool has_event_containing(const Effects& fx, const std::string& needle) {
  for (const auto& e : fx.events) {
    if (e.find(needle) != std::string::npos) return true;
  }
  return false;
}

}  // namespace ag::head::testing
