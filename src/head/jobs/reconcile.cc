#include "head/jobs/reconcile.h"

#include <cmath>

#include "api/task_environment.h"

namespace ag::head {

api::Launch launch_message(const Job& job, const api::TaskKey& key, int64_t preempt_grace_ms) {
  const AttemptRecord& attempt = job.attempts[static_cast<size_t>(key.attempt)];
  const TaskRecord& task = attempt.tasks[static_cast<size_t>(key.task_index)];
  api::TaskPlacement placement;
  placement.job_id = job.id;
  placement.attempt = attempt.number;
  placement.task_index = task.index;
  placement.num_tasks = job.spec.num_workers;
  placement.master_addr = attempt.master_addr;
  placement.master_port = attempt.master_port;
  placement.node_id = task.node_id;
  placement.node_address = task.node_address;
  placement.gpu_ids = task.gpu_ids;
  if (!job.array_id.empty()) {
    placement.array_id = job.array_id;
    placement.array_index = job.array_index;
    placement.array_size = job.spec.array ? static_cast<int>(job.spec.array->indices.size()) : 0;
  }
  placement.preempt_grace_ms = preempt_grace_ms;
  // The gang's tasks on this node in index order are its local ranks.
  std::vector<std::vector<int>> gpus_by_local_rank;
  for (const auto& other : attempt.tasks) {
    if (other.node_id != task.node_id) continue;
    if (other.index == task.index) placement.local_rank = static_cast<int>(gpus_by_local_rank.size());
    gpus_by_local_rank.push_back(other.gpu_ids);
  }
  placement.local_world_size = static_cast<int>(gpus_by_local_rank.size());
  placement.visible_gpu_ids = api::visible_gpus(gpus_by_local_rank, placement.local_rank, job.spec.gpu_isolation);
  api::Launch launch;
  launch.task = key;
  launch.entrypoint = api::task_entrypoint(job.spec, task.index);
  launch.env = api::head_task_environment(placement);
  launch.env_vars = job.spec.runtime_env.env_vars;
  launch.gpu_ids = task.gpu_ids;
  launch.working_dir_hash = job.spec.runtime_env.working_dir_hash();
  launch.python_executable = job.spec.runtime_env.python_executable;
  launch.image = job.spec.runtime_env.image;
  launch.mounts = job.spec.runtime_env.mounts;
  launch.owner = job.owner;
  launch.memory_limit_bytes = job.spec.memory_bytes;
  launch.cpu_limit_millis = static_cast<int64_t>(std::llround(job.spec.num_cpus * 1000));
  return launch;
}

Status check_reporter(const std::map<std::string, Job>& jobs, const std::string& node_id, const api::TaskKey& task) {
  auto it = jobs.find(task.job_id);
  const Job* job = it == jobs.end() ? nullptr : &it->second;
  if (!job || task.attempt >= static_cast<int>(job->attempts.size()) ||
      task.task_index >= static_cast<int>(job->attempts[static_cast<size_t>(task.attempt)].tasks.size())) {
    return not_found("the head has no task " + task.to_string());
  }
  const TaskRecord& record = job->attempts[static_cast<size_t>(task.attempt)].tasks[static_cast<size_t>(task.task_index)];
  if (record.node_id != node_id) {
    return Error{ErrorCode::kPermissionDenied, "task " + task.to_string() + " is not placed on node " + node_id};
  }
  return {};
}

Reconciliation reconcile_node(const std::map<std::string, Job>& jobs, const std::map<std::string, Job*>& active,
                              const std::string& node_id, const std::vector<api::RunningTask>& running,
                              const std::vector<api::TaskKey>& ended, int64_t kill_grace_ms) {
  Reconciliation out;
  std::set<api::TaskKey> reported;
  for (const auto& r : running) {
    reported.insert(r.task);
    auto it = jobs.find(r.task.job_id);
    const AttemptRecord* attempt = it == jobs.end() ? nullptr : it->second.current_attempt();
    const bool wanted = attempt && attempt->number == r.task.attempt && !attempt->finished() &&
                        !attempt->ending && r.task.task_index < static_cast<int>(attempt->tasks.size()) &&
                        attempt->tasks[static_cast<size_t>(r.task.task_index)].node_id == node_id &&
                        !attempt->tasks[static_cast<size_t>(r.task.task_index)].terminal();
    if (!wanted) {
      out.kill.push_back({r.task, kill_grace_ms});
      continue;
    }
    out.adopt.push_back(r);
  }
  reported.insert(ended.begin(), ended.end());
  for (const auto& [id, job] : active) {
    const AttemptRecord* attempt = job->current_attempt();
    if (!attempt) continue;
    for (const auto& task : attempt->tasks) {
      if (task.node_id != node_id || task.terminal()) continue;
      api::TaskKey key{id, attempt->number, task.index};
      if (reported.count(key)) continue;
      TaskRef ref{key, node_id};
      if (task.state == TaskState::kStarting && !attempt->ending) {
        out.relaunch.push_back(std::move(ref));
      } else {
        out.lost.push_back(std::move(ref));
      }
    }
  }
  return out;
}

}  // namespace ag::head
