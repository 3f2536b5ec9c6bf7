// The worker agent's settings, from `ag start-worker`'s flags and what the worker found
// out about its node (worker_daemon.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "api/task_environment.h"
#include "common/resources.h"
#include "common/result.h"
#include "common/version.h"

namespace ag::worker {

struct AgentConfig {
  std::string node_id;
  std::string node_ip;
  // The interface holding node_ip, named to tasks' collectives (GLOO_SOCKET_IFNAME, ...).
  std::string network_interface;
  // Finds it again (each time the agent registers: addresses move); empty: never.
  std::function<Result<std::string>()> find_network_interface;
  std::string hostname;
  Resources resources;
  std::vector<int> gpu_ids;
  std::map<std::string, std::string> labels;  // ag start-worker --label
  std::string limits;                         // which task caps this node enforces (task_limits.h)
  std::vector<std::string> allowed_mounts;    // node paths jobs may mount (--allow-mount)
  std::string data_dir;
  api::Environment inherited_env;  // the agent's own environment, handed down to tasks
  int64_t heartbeat_ms = 1000;
  // Grace between SIGTERM and SIGKILL when the node fences itself off (lost head).
  int64_t fence_grace_ms = 2000;
  int64_t max_backoff_ms = 5000;
  // The worker protocol version sent at registration (a test sets another one).
  int protocol_version = kWorkerProtocol;
  // Send task output on the log stream (worker/log_stream.h) when the head takes one;
  // otherwise (and with AG_WORKER_LOG_STREAM=off) in frames on the channel.
  bool log_stream = true;
  // Keep trying a head that cannot be reached at start (otherwise the agent gives up,
  // so that `ag start-worker` fails with the reason). Once joined it always retries.
  bool wait_for_head = false;
};

}  // namespace ag::worker
