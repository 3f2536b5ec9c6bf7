// The `ag` subcommands. Each returns the process exit code: 0 success, 1 the
// operation failed (job FAILED, head unreachable, ...), 2 bad usage.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/log_lines.h"
#include "cli/session.h"
#include "cli/submit_options.h"

namespace ag::cli {

struct StartHeadOptions {
  std::string node_ip = "127.0.0.1";
  std::string bind;  // where to listen, when not node_ip
  int port = 6379;
  int dashboard_port = 8265;
  std::string data_dir;
  double node_timeout_s = 10;
  double kill_grace_s = 10;
  double preempt_grace_s = 30;       // what a preempted task gets between SIGTERM and SIGKILL
  double usage_half_life_days = 7;  // fair share: how fast past usage stops counting
  double max_package_mb = 500;
  double package_store_gb = 20;
  std::string job_retention = "0";  // a duration (30d); "0" keeps finished jobs
  double max_task_log_mb = 1024;
  double hang_timeout_s = 0;  // jobs without their own --hang-timeout: 0 watches none
  double idle_gpu_timeout_s = 0;  // jobs without their own --idle-gpu-timeout: 0 watches none
  std::string log_export;         // a directory for JSON-lines copies of every task line
  double log_export_max_mb = 256;
  bool insecure = false;
  std::string tls_cert, tls_key;
  std::vector<std::string> advertise;
  // Heads sharing one store (README, High availability).
  std::string store;                // postgresql://USER@HOST:PORT/DB; "" keeps SQLite in the data dir
  std::string store_password_file;  // the store's password, mode 0600
  std::string shared_dir;           // what every head needs: CA, tokens, packages, logs
  double leader_lease_s = 15;
  bool node_timeout_given = false;  // --node-timeout on the command line or in --config
  bool block = false;
  bool verbose = false;
};
int start_head(const StartHeadOptions& options);

// ag admin copy-store (copy_store.cc).
struct CopyStoreOptions {
  std::string from;           // a stopped lone head's --data-dir
  std::string to;             // postgresql://...
  std::string password_file;
  std::string shared_dir;
  bool force = false;         // replace what the store (and shared dir) hold
};
int copy_store(const CopyStoreOptions& options);

struct StartWorkerOptions {
  std::string head_node;
  std::string token;
  std::string token_file;  // a file holding the token, readable by this user only
  std::string token_file_flag = "--token-file";  // how errors name it ("token-file in config file F")
  std::string task_user;   // the account tasks run as
  std::string ca_fingerprint;  // the head's cluster CA, pinned at the first join
  bool insecure = false;
  std::string node_ip = "127.0.0.1";
  std::string network_interface;  // --network-interface; "" to find the one holding node_ip
  std::optional<double> num_cpus;
  std::optional<int> num_gpus;
  std::optional<double> memory_gb;
  std::vector<std::string> labels;  // KEY=VALUE
  std::string data_dir;
  double kill_grace_s = 10;
  double package_cache_gb = 10;
  int64_t max_unpack_ratio = 200;
  bool wait_for_head = false;
  bool no_task_limits = false;
  std::vector<std::string> allowed_mounts;  // --allow-mount
  std::vector<std::string> health_checks;   // --health-check
  double health_interval_s = 60;
  double health_timeout_s = 30;
  std::string container_engine = "auto";
  bool block = false;
  bool verbose = false;
};
int start_worker(const StartWorkerOptions& options);
// `ag tls ca-cert`: the head's cluster CA (PEM) on stdout, for a browser to trust.
int tls_ca_cert(const ConnectionOptions& conn);

int stop_daemons(double timeout_s);

int submit(const ConnectionOptions& conn, const SubmitOptions& options);

int cluster_status(const ConnectionOptions& conn);
int job_status(const ConnectionOptions& conn, const std::string& job_id, bool verbose);
// `verbose`: with each node's network interface.
int list_nodes(const ConnectionOptions& conn, bool verbose);
// ag list-jobs: newest first, filtered; `limit` jobs (0: every job, --all). Says on
// stderr how many it did not show.
struct ListJobsOptions {
  std::string state;
  std::string user;   // --user, or the caller's own name with --mine
  bool mine = false;
  std::string name;   // a shell pattern
  std::string queue;
  std::string since;  // as typed: 1d, 2026-12-01T00:00:00
  int64_t limit = 1000;
  bool all = false;
};
int list_jobs(const ConnectionOptions& conn, const ListJobsOptions& options);
// ag stop-job ID [ID...] | --mine [--state S] | --state S: stops the jobs named, or every
// unfinished job chosen (after a count and a confirmation, unless `yes`). Exits 1 when
// one could not be stopped, 2 for a command line that does not say which.
struct StopJobsOptions {
  std::vector<std::string> job_ids;
  bool mine = false;
  std::string state;  // PENDING or RUNNING
  bool yes = false;
};
int stop_jobs(const ConnectionOptions& conn, const StopJobsOptions& options);
// One task's output as its bytes (--task-index without --tail/--since/--timestamps),
// else as lines (cli/log_lines.h): all ranks interleaved, each prefixed "[rank N]".
// `since` is --since as typed. Control characters are escaped (terminal_safe) unless
// `lines.raw`.
// `ag exec JOB [--task-index N | --all-ranks] [-i] [-t] -- CMD...` (cli/exec_command.cc).
struct ExecOptions {
  std::string job_id;
  int task_index = 0;
  bool task_index_given = false;
  bool with_stdin = false;  // -i
  bool tty = false;         // -t
  bool all_ranks = false;
  std::vector<std::string> command;
};
int exec(const ConnectionOptions& options, const ExecOptions& exec);
// `ag alloc -n N [...]`, `ag release-alloc JOB` (cli/alloc_command.cc).
struct AllocOptions {
  int num_workers = 1;
  std::optional<double> num_cpus;
  std::optional<int> num_gpus;
  std::optional<double> memory_gb;
  std::optional<double> time_s;  // --time: how long it may be held
  std::string placement = "pack";
  std::string name = "alloc";
  std::string queue;
  std::string image;
  std::vector<std::string> constraints;
};
int alloc(const ConnectionOptions& options, const AllocOptions& alloc);
int release_alloc(const ConnectionOptions& options, const std::string& job_id);
// `ag submit -it`, once job `job_id` is submitted: waits for task 0, runs `entrypoint`
// there through `ag exec` (this terminal with -t, this input with -i), then stops the
// job. Returns the command's exit code.
int run_interactive(const ConnectionOptions& options, const Connection& conn, const std::string& job_id,
                    const std::string& entrypoint, bool with_stdin, bool tty);
// `ag stack JOB [--task-index N]` (cli/stack_command.cc).
int stack(const ConnectionOptions& options, const std::string& job_id, std::optional<int> task_index);

// `ag webhook ...` (webhook_commands.cc).
struct WebhookAddOptions {
  std::string url;
  std::string events;   // "job.failed,node.dead"; "" for the default set
  std::string jobs_of;  // another user's jobs (admins)
  bool all = false;     // every job's and node's (admins)
  std::string format = "json";
  std::string ca_file;
  std::optional<double> retry_for_s;
};
int webhook_add(const ConnectionOptions& options, const WebhookAddOptions& opts);
int webhook_list(const ConnectionOptions& options);
int webhook_remove(const ConnectionOptions& options, const std::string& id);
int webhook_test(const ConnectionOptions& options, const std::string& id);
int webhook_deliveries(const ConnectionOptions& options, const std::string& id);

// `ag events` (events_command.cc).
struct EventsOptions {
  bool follow = false;
  std::string job_id, node_id;
  std::string since;  // "10m" or a UTC time
  std::string types;  // "job.failed,node.dead"
  int limit = 100;
};
int events(const ConnectionOptions& options, const EventsOptions& opts);
// `ag port-forward JOB [--task-index N] [LOCAL:]REMOTE` (cli/port_forward_command.cc).
int port_forward(const ConnectionOptions& options, const std::string& job_id, int task_index, const std::string& ports);
int logs(const ConnectionOptions& conn, const std::string& job_id, const LinesOptions& lines,
         const std::string& since);
int head_logs();
int stop_job(const ConnectionOptions& conn, const std::string& job_id);
int delete_job(const ConnectionOptions& conn, const std::string& job_id);
// ag hold / ag release: each job in turn; exits 1 if any was refused (the others are
// still held or released), saying which and why.
int set_held(const ConnectionOptions& conn, const std::vector<std::string>& job_ids, bool hold);

// Users, join tokens, nodes and the audit log (admin_commands.cc).
int user_add(const ConnectionOptions& conn, const std::string& name, const std::string& role,
             const std::vector<std::string>& groups);
int user_list(const ConnectionOptions& conn);
int user_set_enabled(const ConnectionOptions& conn, const std::string& name, bool enabled);
int user_rotate(const ConnectionOptions& conn, const std::string& name);
// ag user set NAME [--role R] [--group G]... [--remove-group G]...: at least one change.
int user_set(const ConnectionOptions& conn, const std::string& name, const std::string& role,
             const std::vector<std::string>& add_groups, const std::vector<std::string>& remove_groups);
int user_delete(const ConnectionOptions& conn, const std::string& name);
int token_create_join(const ConnectionOptions& conn, const std::string& ttl);
int token_list(const ConnectionOptions& conn);

// ag quota set|remove|list: a user's or group's limits (admin to set; anyone may list).
struct QuotaOptions {
  std::string user;
  std::string group;
  std::optional<int64_t> max_gpus;
  std::optional<double> max_cpus;
  std::optional<double> max_memory_gb;
  std::optional<int64_t> max_running_jobs;
  std::optional<int> max_priority;
  bool allow_no_preempt = false;
  std::optional<double> share;
};
int quota_set(const ConnectionOptions& conn, const QuotaOptions& quota);
int quota_remove(const ConnectionOptions& conn, const QuotaOptions& quota);
int quota_list(const ConnectionOptions& conn);
// ag queue create|remove|list: queues (partitions) of nodes with their own priority,
// per-user limits and preemption (admin to change; anyone may list).
struct QueueOptions {
  std::string name;
  std::vector<std::string> nodes_with;  // KEY=VALUE
  std::string priority;
  bool preempt = false;
  std::optional<int64_t> max_gpus_per_user;
  std::optional<double> max_cpus_per_user;
  std::optional<double> max_memory_gb_per_user;
  std::optional<int64_t> max_running_jobs_per_user;
  std::optional<double> idle_gpu_timeout_s;
};
int queue_create(const ConnectionOptions& conn, const QueueOptions& queue);
int queue_remove(const ConnectionOptions& conn, const std::string& name);
int queue_list(const ConnectionOptions& conn);
// ag share: each user's recent usage, share and fair-share factor.
int share(const ConnectionOptions& conn);
int token_revoke(const ConnectionOptions& conn, const std::string& id);
int remove_node(const ConnectionOptions& conn, const std::string& node_id);
// ag drain NODE / ag resume NODE.
int set_draining(const ConnectionOptions& conn, const std::string& node_id, bool draining);
// ag pull IMAGE [--nodes A,B]: pulls on every node that runs containers (or those),
// showing each node's progress; exit 1 when a node could not pull it.
int pull_image(const ConnectionOptions& conn, const std::string& image, const std::vector<std::string>& nodes,
               double timeout_s);
// ag audit: the newest `limit` entries, only `user`'s, with `action` in them, `since`.
struct AuditOptions {
  int limit = 100;
  std::string user;
  std::string action;
  std::string since;  // as typed
};
int audit(const ConnectionOptions& conn, const AuditOptions& options);
int whoami(const ConnectionOptions& conn);
// ag config [--address HOST:PORT] [--ca-fingerprint sha256:...]: pins a head's CA.
int config(const ConnectionOptions& conn, const std::string& ca_fingerprint);
// A lifetime: "24h", "30m", "7d", "90s" (units.h's durations, whole seconds) or "0"
// (never ends), at most 10 years. Errors: kInvalidArgument naming `flag`.
Result<int64_t> parse_lifetime_s(const std::string& flag, const std::string& text);

}  // namespace ag::cli
