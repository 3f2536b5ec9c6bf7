// What a task sees: every environment variable a task process gets, built in one
// place. The head decides the gang's variables (ranks, master address, GPUs) and sends
// them in the launch message; the worker adds its own environment, the runtime
// defaults, the python shim and runtime_env.env_vars. Both halves are pure functions,
// and tests/unit/api/task_environment_test.cc checks the whole contract (DESIGN.md,
// "What a task sees") by composing them.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/result.h"

namespace ag::api {

using Environment = std::map<std::string, std::string>;

// Where one task of an attempt runs, as the head placed it.
struct TaskPlacement {
  std::string job_id;
  int attempt = 0;
  int task_index = 0;
  int num_tasks = 1;
  std::string master_addr;
  int master_port = 0;
  std::string node_id;
  std::string node_address;
  int local_rank = 0;        // this task's position among the gang's tasks on its node
  int local_world_size = 1;  // how many of the gang's tasks share its node
  std::vector<int> gpu_ids;          // the GPUs assigned to this task (AG_GPU_IDS)
  std::vector<int> visible_gpu_ids;  // what CUDA_VISIBLE_DEVICES lists (visible_gpus)
  // An element of a job array: AG_ARRAY_ID, AG_ARRAY_INDEX, AG_ARRAY_SIZE ("" / unset otherwise).
  std::string array_id;
  int array_index = 0;
  int array_size = 0;
  // > 0: the job may be preempted, and gets this long between SIGTERM and SIGKILL then
  // (AG_PREEMPT_GRACE_S, in seconds).
  int64_t preempt_grace_ms = 0;
};

// What CUDA_VISIBLE_DEVICES lists for the task with LOCAL_RANK `local_rank`, given the
// GPUs of each of its gang's tasks on that node (`by_local_rank[r]`: the task with
// LOCAL_RANK r): all of them, task after task, so that a task's own GPUs start at
// index LOCAL_RANK × num_gpus and `torch.cuda.set_device(LOCAL_RANK)` picks its own
// device, as under torchrun; with `isolated`, only the task's own.
std::vector<int> visible_gpus(const std::vector<std::vector<int>>& by_local_rank, int local_rank, bool isolated);

// The head's half: AG_* and torchrun's variables and the GPUs.
Environment head_task_environment(const TaskPlacement& placement);

// The worker's half, completing the environment from
//   `inherited`: the agent's own environment (its AG_* settings are dropped: they are
//                the daemon's, not the task's);
//   `from_head`: head_task_environment(), which wins over inherited values;
//   runtime defaults (PYTHONUNBUFFERED, NCCL async error handling) unless set;
//   `network_interface`: the interface that holds the node's address, as
//                GLOO_SOCKET_IFNAME, NCCL_SOCKET_IFNAME and TP_SOCKET_IFNAME unless
//                the worker's environment sets them (so ranks on other machines are
//                not told a loopback address); "" sets none;
//   `python_shim_dir`: put first on PATH when not empty, so `python` resolves to
//                runtime_env.python.executable;
//   `env_vars`: runtime_env.env_vars, each expanded ($VAR, ${VAR}) against the
//                environment built so far, and winning over it.
// Errors: kInvalidArgument naming the variable whose expansion passes
// kMaxExpandedEnvBytes (all of them together, too) on this node.
Result<Environment> worker_task_environment(const Environment& inherited, const Environment& from_head,
                                            const Environment& env_vars, const std::string& python_shim_dir,
                                            const std::string& network_interface = "");

// How large runtime_env.env_vars may grow once expanded, each and all together.
inline constexpr size_t kMaxExpandedEnvBytes = 1 << 20;

// "NAME=value" entries (as in `environ`) as a map; entries without '=' are skipped.
Environment environment_from_entries(const std::vector<std::string>& entries);

}  // namespace ag::api
