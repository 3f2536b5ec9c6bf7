// The head daemon's composition root: builds the store, registries, job layer,
// gateway and routes, wires them together and runs the io loop until SIGTERM/SIGINT.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"

namespace ag::head {

struct HeadConfig {
  std::string node_ip = "127.0.0.1";
  int port = 6379;
  int dashboard_port = 8265;
  std::string data_dir;
  int64_t node_timeout_ms = 10000;
  int64_t kill_grace_ms = 10000;
  int64_t preempt_grace_ms = 30000;  // SIGTERM -> SIGKILL for preempted tasks
  int64_t usage_half_life_ms = int64_t{7} * 24 * 3600 * 1000;  // fair share's decay
  size_t max_body_bytes = 8 << 20;
  int64_t max_package_bytes = int64_t{500} << 20;
  int64_t package_store_bytes = int64_t{20} << 30;  // the package store's quota
  // Bytes of one task's log kept on disk; past it the oldest part is dropped.
  int64_t max_task_log_bytes = int64_t{1} << 30;
  // The hang timeout of jobs without one of their own (head/exec/hang_watch.h).
  std::optional<double> hang_timeout_s;
  std::optional<double> idle_gpu_timeout_s;  // jobs without their own: unset watches none
  std::string log_export_dir;                // --log-export: "" exports nothing
  int64_t log_export_max_bytes = int64_t{256} << 20;
  // Finished jobs older than this are deleted (record, events, logs); 0 keeps them.
  int64_t job_retention_ms = 0;
  // TLS (net/tls.h): on unless `insecure`; plain HTTP is then answered only on
  // loopback. The dashboard port may carry a certificate of the user's own.
  bool insecure = false;
  std::string tls_cert, tls_key;
  std::vector<std::string> advertise;  // more names and addresses for the head's certificate
  bool verbose = false;

  // This head's API address as clients and workers reach it ("10.0.0.1:6379"): what a
  // standby names when it points at the leader.
  std::string address;
  // Heads sharing one store (ADR 0008): a postgresql:// URL; "" keeps the SQLite
  // database in data_dir and this head the only one. With a store, `shared_dir` (a
  // directory every head mounts) holds what every head needs: the cluster CA, the
  // tokens, packages and task logs; the heads elect a leader with a lease of
  // `leader_lease_ms` on the store.
  std::string store_url;
  std::string store_password;  // "" leaves it to libpq (PGPASSWORD, ~/.pgpass)
  std::string shared_dir;
  int64_t leader_lease_ms = 15000;

  // Where the state every head shares lives: shared_dir, or data_dir for a lone head.
  const std::string& state_dir() const { return shared_dir.empty() ? data_dir : shared_dir; }
};

// What a started head tells the command that started it.
struct HeadStarted {
  std::string admin_token;  // the first admin's token
  std::string leader;       // a standby: the head that leads ("" while none does); a leader: ""
  bool standby = false;
};

// Runs the head until it is told to stop. `on_ready` is called exactly once: with ok
// once both ports accept connections (as the leader or as a standby), or with the error
// that kept it from starting (port busy, data dir unusable, store unreachable or of
// another cluster). Returns the exit code.
using OnHeadReady = std::function<void(const Status&, const HeadStarted&)>;
int run_head(const HeadConfig& config, const OnHeadReady& on_ready);

}  // namespace ag::head
