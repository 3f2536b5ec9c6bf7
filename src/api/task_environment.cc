#include "api/task_environment.h"

#include "common/env_expand.h"

#include <cstdio>

namespace ag::api {

namespace {

std::string join_ids(const std::vector<int>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? "," : "") + std::to_string(ids[i]);
  return out;
}

}  // namespace

std::vector<int> visible_gpus(const std::vector<std::vector<int>>& by_local_rank, int local_rank, bool isolated) {
  if (local_rank < 0 || local_rank >= static_cast<int>(by_local_rank.size())) return {};
  if (isolated) return by_local_rank[static_cast<size_t>(local_rank)];
  std::vector<int> out;
  for (const auto& ids : by_local_rank) out.insert(out.end(), ids.begin(), ids.end());
  return out;
}

Environment head_task_environment(const TaskPlacement& p) {
  const std::string world = std::to_string(p.num_tasks);
  const std::string rank = std::to_string(p.task_index);
  const std::string port = std::to_string(p.master_port);
  Environment env{
      {"AG_JOB_ID", p.job_id},
      {"AG_ATTEMPT", std::to_string(p.attempt)},
      {"AG_TASK_INDEX", rank},
      {"AG_WORKER_NUM", world},
      {"AG_MASTER_ADDR", p.master_addr},
      {"AG_MASTER_PORT", port},
      {"AG_NODE_ID", p.node_id},
      {"AG_NODE_IP", p.node_address},
      {"RANK", rank},
      {"WORLD_SIZE", world},
      {"LOCAL_RANK", std::to_string(p.local_rank)},
      {"LOCAL_WORLD_SIZE", std::to_string(p.local_world_size)},
      {"MASTER_ADDR", p.master_addr},
      {"MASTER_PORT", port},
      {"CUDA_VISIBLE_DEVICES", join_ids(p.visible_gpu_ids)},
      {"AG_GPU_IDS", join_ids(p.gpu_ids)},
  };
  if (!p.array_id.empty()) {
    env["AG_ARRAY_ID"] = p.array_id;
    env["AG_ARRAY_INDEX"] = std::to_string(p.array_index);
    env["AG_ARRAY_SIZE"] = std::to_string(p.array_size);
  }
  if (p.preempt_grace_ms > 0) {
    const int64_t whole = p.preempt_grace_ms / 1000;
    const int64_t millis = p.preempt_grace_ms % 1000;
    char fraction[8];
    std::snprintf(fraction, sizeof fraction, ".%03d", static_cast<int>(millis));
    env["AG_PREEMPT_GRACE_S"] = std::to_string(whole) + (millis ? fraction : "");
  }
  return env;
}

Result<Environment> worker_task_environment(const Environment& inherited, const Environment& from_head,
                                            const Environment& env_vars, const std::string& python_shim_dir,
                                            const std::string& network_interface) {
  Environment env;
  for (const auto& [name, value] : inherited) {
    if (name.rfind("AG_", 0) == 0) continue;
    env[name] = value;
  }
  for (const auto& [name, value] : from_head) env[name] = value;
  // Output reaches the log as it is written, not when a buffer fills; a rank whose
  // peer died errors out instead of hanging in a collective.
  env.try_emplace("PYTHONUNBUFFERED", "1");
  env.try_emplace("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1");
  env.try_emplace("NCCL_ASYNC_ERROR_HANDLING", "1");
  if (!network_interface.empty()) {
    for (const char* name : {"GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "TP_SOCKET_IFNAME"}) {
      env.try_emplace(name, network_interface);
    }
  }
  if (!python_shim_dir.empty()) {
    auto path = env.find("PATH");
    env["PATH"] = python_shim_dir + (path != env.end() ? ":" + path->second : "");
  }
  // Expanded against the environment before any of them is applied, so their order
  // does not matter.
  Environment expanded;
  size_t total = 0;
  for (const auto& [name, value] : env_vars) {
    auto result = expand_env_vars(value, env, kMaxExpandedEnvBytes);
    total += result ? result->size() : 0;
    if (!result || total > kMaxExpandedEnvBytes) {
      return invalid_argument("runtime_env.env_vars." + name + " expands to more than " +
                              std::to_string(kMaxExpandedEnvBytes >> 20) + " MiB" +
                              (result ? " (with the others)" : "") + " on this node; name fewer or shorter variables");
    }
    expanded[name] = std::move(*result);
  }
  for (auto& [name, value] : expanded) env[name] = std::move(value);
  return env;
}

Environment environment_from_entries(const std::vector<std::string>& entries) {
  Environment env;
  for (const auto& entry : entries) {
    size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return env;
}

}  // namespace ag::api
