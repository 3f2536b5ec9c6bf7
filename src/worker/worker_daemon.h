// The worker daemon's composition root: detects resources, loads or creates the
// node's stable id, builds the task runner and the agent, and runs the io loop until
// SIGTERM/SIGINT (which stops every task first).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "common/result.h"
#include "worker/health_checks.h"

namespace ag::worker {

struct WorkerConfig {
  std::string head_address;  // HOST:PORT
  std::string token;
  std::string node_ip = "127.0.0.1";
  std::string network_interface;  // --network-interface; "" to find the one holding node_ip
  std::optional<double> num_cpus;  // overrides detection
  std::optional<int> num_gpus;     // overrides detection (first N indices)
  std::map<std::string, std::string> labels;  // what job constraints match
  std::optional<int64_t> memory_bytes;
  std::string data_dir;
  int64_t stop_grace_ms = 10000;
  int64_t package_cache_bytes = int64_t{10} << 30;
  int64_t max_unpack_ratio = 200;  // a package unpacks to at most this many times its size
  std::string task_user;  // --task-user; "" for the default (worker/task_user.h)
  std::string head_ca_pem;  // verify the head against this CA (TLS); "" for plain HTTP
  bool verbose = false;
  bool wait_for_head = false;  // keep trying a head not reachable at start
  bool enforce_limits = true;  // cap tasks' memory and CPU where cgroups allow (task_limits.h)
  std::string container_engine = "auto";     // auto, podman, docker, none (container_engine.h)
  std::vector<std::string> allowed_mounts;   // node paths jobs may mount
  HealthCheckConfig health;                  // --health-check (none by default)
};

// The exit status of a worker the head refused for good (its token, its protocol
// version): restarting it unchanged cannot help, so a service manager should not
// (the systemd unit's RestartPreventExitStatus).
inline constexpr int kExitRefused = 78;

// Runs the worker until it is told to stop. `on_ready` is called exactly once: ok
// after the first registration with the head, or the first error (the worker keeps
// retrying unreachable heads; a wrong token or protocol version ends it). Returns the
// exit code: 0, 1 (no head answered at start), or kExitRefused.
int run_worker(const WorkerConfig& config, const std::function<void(const Status&, const std::string& summary)>& on_ready);

}  // namespace ag::worker
