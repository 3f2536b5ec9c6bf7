// `ag`: the one AetherGrid executable. Parses the command line and dispatches to the
// subcommands in commands.h. Global options (--address, --token, --output) are
// accepted before or after the subcommand.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <clocale>
#include <cstdlib>
#include <cstring>

#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "api/protocol.h"
#include "cli/api_client.h"
#include "cli/command_line.h"
#include "cli/commands.h"
#include "cli/completion.h"
#include "cli/config_file.h"
#include "cli/doctor.h"
#include "cli/install_service.h"
#include "cli/unit_flags.h"
#include "cli/units.h"
#include "cli/usage_hints.h"
#include "common/version.h"
#include "worker/exec_helper.h"
#include "worker/task_supervisor.h"

namespace {

// The worker daemon keeps its join token in memory only. Its command line (`ps`)
// and its environment (/proc/PID/environ) are readable by other processes on the
// machine, its own tasks first, so the token is overwritten in both once it has been
// read, and AG_TOKEN is not passed on to the processes it starts.
void hide_token(int argc, char** argv) {
  auto blank = [](char* text) { std::memset(text, 'x', std::strlen(text)); };
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--token") == 0 && i + 1 < argc) {
      blank(argv[++i]);
    } else if (std::strncmp(argv[i], "--token=", 8) == 0) {
      blank(argv[i] + 8);
    }
  }
  for (char** e = environ; *e; ++e) {
    if (std::strncmp(*e, "AG_TOKEN=", 9) == 0) blank(*e + 9);
  }
  ::unsetenv("AG_TOKEN");
}

}  // namespace

namespace {

int run(int argc, char** argv) {
  using namespace ag::cli;
  // The worker's task supervisor (worker/task_supervisor.h), started by the worker
  // itself; not a user command, so not listed.
  if (argc == 3 && std::string(argv[1]) == ag::worker::kSupervisorCommand) ag::worker::run_supervisor(3, argv[2]);
  // The first process of an `ag exec` command (worker/exec_helper.h), likewise.
  if (argc == 2 && std::string(argv[1]) == ag::worker::kTaskExecCommand) ag::worker::run_exec_helper(3);
  // A closed pipe (ag logs | head) must end the command quietly, not kill it mid-write
  // of a socket; socket writes report EPIPE as an error instead.
  ::signal(SIGPIPE, SIG_IGN);
  // File names in packages are UTF-8; libarchive converts through the C library's
  // character set, which must therefore be UTF-8 rather than the "C" locale's ASCII.
  if (!std::setlocale(LC_CTYPE, "C.UTF-8")) std::setlocale(LC_CTYPE, "");

  CLI::App app{"AetherGrid: run distributed AI jobs on your machines.\n"
               "Start a cluster with `ag start-head` and `ag start-worker`, then `ag submit -- COMMAND`."};
  app.set_version_flag("--version", ag::version_line());
  app.name("ag");
  app.require_subcommand(1);
  app.fallthrough();
  ConnectionOptions conn;
  add_connection_options(app, conn);

  StartHeadOptions head;
  auto* start_head_cmd = app.add_subcommand("start-head", "Start the head daemon");
  start_head_cmd->add_option("--node-ip-address", head.node_ip, "IP address to bind and advertise (0.0.0.0: every interface)")->capture_default_str();
  start_head_cmd->add_option("--bind", head.bind, "Listen on this address instead (0.0.0.0: every interface); the join line and dashboard link then name a non-loopback --node-ip-address, else the first --advertise-address, else the outgoing interface's address");
  start_head_cmd->add_option("--port", head.port, "Cluster/API port")->capture_default_str()->check(CLI::Range(1, 65535));
  start_head_cmd->add_option("--dashboard-port", head.dashboard_port, "Dashboard port")->capture_default_str()->check(CLI::Range(1, 65535));
  start_head_cmd->add_option("--data-dir", head.data_dir, "Where the head keeps its database, logs and token");
  start_head_cmd->add_option("--node-timeout", head.node_timeout_s, "How long a node may go without a heartbeat before it is dead (15s, 1m)")->capture_default_str()->transform(ag::cli::duration_flag(0.2, 3600));
  start_head_cmd->add_option("--log-export", head.log_export,
                             "Also write every task line as JSON lines to files here, for a log shipper to tail");
  start_head_cmd->add_option("--log-export-max-mb", head.log_export_max_mb,
                             "Start a new export file once one holds this much (MiB; the newest 8 are kept)")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 1e6));
  start_head_cmd->add_option("--idle-gpu-timeout", head.idle_gpu_timeout_s,
                             "Jobs without their own --idle-gpu-timeout: every GPU under 5% busy this long is an event "
                             "(30m; 0, the default, watches none)")
      ->capture_default_str()
      ->transform(ag::cli::duration_flag(0, 90 * 24 * 3600));
  start_head_cmd->add_option("--hang-timeout", head.hang_timeout_s,
                             "Jobs without their own --hang-timeout: no output and under 1% of a CPU this long is a "
                             "hang (10m; 0, the default, watches none)")
      ->capture_default_str()
      ->transform(ag::cli::duration_flag(0, 90 * 24 * 3600));
  start_head_cmd->add_option("--kill-grace", head.kill_grace_s, "Time between SIGTERM and SIGKILL when stopping tasks (10s)")->capture_default_str()->transform(ag::cli::duration_flag(0, 3600));
  start_head_cmd->add_option("--preempt-grace", head.preempt_grace_s,
                             "Time a preempted job's tasks get between SIGTERM and SIGKILL (30s; AG_PREEMPT_GRACE_S)")
      ->capture_default_str()
      ->transform(ag::cli::duration_flag(0, 3600));
  start_head_cmd->add_option("--usage-half-life", head.usage_half_life_days,
                             "Fair share: days after which a user's past usage counts half")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 3650.0));
  start_head_cmd->add_option("--max-package-mb", head.max_package_mb, "Largest working_dir package accepted, MiB (or 2G, ...)")->capture_default_str()->transform(ag::cli::size_flag(1 << 20, "MiB", 1, 1e6));
  start_head_cmd->add_option("--max-task-log-mb", head.max_task_log_mb,
                             "Most of one task's log kept, MiB (or 2G, ...); past it the oldest part is dropped (a marker line says so)")
      ->capture_default_str()
      ->transform(ag::cli::size_flag(1 << 20, "MiB", 1, 1e7));
  start_head_cmd->add_option("--job-retention", head.job_retention,
                             "Delete finished jobs (record, events, logs) this long after they end, e.g. 30d (default 0: keep them)")
      ->capture_default_str();
  start_head_cmd->add_option("--package-store-gb", head.package_store_gb, "Most the stored working_dir packages may take, GiB (or 500M, ...; packages no pending or running job uses make room)")->capture_default_str()->transform(ag::cli::size_flag(int64_t{1} << 30, "GiB", 0.001, 1e6));
  start_head_cmd->add_option("--tls-cert", head.tls_cert, "Certificate chain (PEM) for the dashboard port, e.g. your CA's");
  start_head_cmd->add_option("--tls-key", head.tls_key, "Private key (PEM, mode 0600) of --tls-cert");
  start_head_cmd->add_option("--advertise-address", head.advertise, "Another name or address clients use for the head (repeatable; goes in its certificate)");
  start_head_cmd->add_option("--store", head.store,
                             "Share the cluster's state with standby heads in this PostgreSQL database: "
                             "postgresql://USER@HOST:PORT/DB (the password from --store-password-file, PGPASSWORD "
                             "or ~/.pgpass; never in the URL); default: SQLite in --data-dir");
  start_head_cmd->add_option("--store-password-file", head.store_password_file,
                             "File holding the --store password (mode 0600)");
  start_head_cmd->add_option("--shared-dir", head.shared_dir,
                             "With --store: a directory every head mounts (NFS) for the cluster CA, tokens, "
                             "working_dir packages and task logs");
  start_head_cmd->add_option("--leader-lease", head.leader_lease_s,
                             "With --store: how long the leader's lease lasts (15s); it is renewed every third of "
                             "it, and a standby takes over once it runs out")
      ->capture_default_str()
      ->transform(ag::cli::duration_flag(1, 600));
  std::string head_config;
  start_head_cmd->add_option("--config", head_config,
                             "Options from this file: KEY = VALUE lines, keys are these flags' long names "
                             "(sample: packaging/config/head.conf); flags given here override it");
  start_head_cmd->add_flag("--block", head.block, "Stay in the foreground");
  start_head_cmd->add_flag("--verbose", head.verbose, "Debug logging");

  StartWorkerOptions worker;
  auto* start_worker_cmd = app.add_subcommand("start-worker", "Start a worker daemon that joins a head");
  // Required, but it may come from --config: checked once the file is read.
  start_worker_cmd->add_option("--head-node", worker.head_node, "Head address HOST:PORT (required)");
  start_worker_cmd->add_option("--node-ip-address", worker.node_ip, "This node's IP address (tasks' MASTER_ADDR)")->capture_default_str();
  start_worker_cmd->add_option("--network-interface", worker.network_interface,
                               "Interface tasks' collectives use (GLOO/NCCL/TP_SOCKET_IFNAME); default: the one "
                               "holding --node-ip-address");
  start_worker_cmd->add_option("--num-cpus", worker.num_cpus, "CPUs to offer (default: detected)")->check(CLI::Range(0.0, ag::api::kMaxNodeCpuMillis / 1000.0));
  start_worker_cmd->add_option("--label", worker.labels, "Node label KEY=VALUE for job constraints (repeatable)");
  start_worker_cmd->add_option("--num-gpus", worker.num_gpus, "GPUs to offer (default: detected with NVML)")->check(CLI::Range(0, ag::api::kMaxNodeGpus));
  start_worker_cmd->add_option("--memory", worker.memory_gb, "Memory to offer, GiB (or 512M, 64G, ...; default: detected)")->transform(ag::cli::size_flag(int64_t{1} << 30, "GiB", 0, static_cast<double>(ag::api::kMaxNodeMemoryBytes >> 30)));
  start_worker_cmd->add_option("--data-dir", worker.data_dir, "Where the worker keeps task dirs and logs");
  start_worker_cmd->add_option("--kill-grace", worker.kill_grace_s, "Time between SIGTERM and SIGKILL at shutdown (10s)")->capture_default_str()->transform(ag::cli::duration_flag(0, 3600));
  start_worker_cmd->add_option("--allow-mount", worker.allowed_mounts,
                               "Node folder jobs may mount into their containers, with all below it (repeatable; "
                               "none by default)");
  start_worker_cmd->add_option("--health-check", worker.health_checks,
                               "A command (run by /bin/sh) that must exit 0 for the node to take tasks; run every "
                               "--health-interval, killed after --health-timeout (repeatable)");
  start_worker_cmd->add_option("--health-interval", worker.health_interval_s, "How often the health checks run (60s; 1s at least)")
      ->capture_default_str()
      ->transform(ag::cli::duration_flag(1, 7 * 24 * 3600));
  start_worker_cmd->add_option("--health-timeout", worker.health_timeout_s,
                               "A health check still running after this fails, killed (30s)")
      ->capture_default_str()
      ->transform(ag::cli::duration_flag(1, 24 * 3600));
  start_worker_cmd->add_option("--container-engine", worker.container_engine,
                               "Engine for jobs with an image: auto (podman, else docker), podman, docker or none")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "podman", "docker", "none"}));
  start_worker_cmd->add_flag("--no-task-limits", worker.no_task_limits,
                             "Run tasks without memory and CPU caps (their requests still count for placement)");
  start_worker_cmd->add_flag("--wait-for-head", worker.wait_for_head,
                             "Keep trying a head that cannot be reached yet (default: fail with the reason)");
  start_worker_cmd->add_option("--max-unpack-ratio", worker.max_unpack_ratio,
                               "A working_dir package may unpack to at most this many times its packed size "
                               "(past its first 64 MiB; 0: no bound)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  start_worker_cmd->add_option("--package-cache-gb", worker.package_cache_gb, "Disk budget for cached working_dir packages, GiB (or 500M, ...)")->capture_default_str()->transform(ag::cli::size_flag(int64_t{1} << 30, "GiB", 0, 1e6));
  start_worker_cmd->add_option("--token-file", worker.token_file,
                               "File holding a join token (mode 0600; default: AG_TOKEN_FILE); keeps it out of `ps`");
  start_worker_cmd->add_option("--task-user", worker.task_user,
                               "Run every task as this unprivileged user (default when root: an account of its own for each user)");
  start_worker_cmd->add_option("--ca-fingerprint", worker.ca_fingerprint,
                               "The head's cluster CA fingerprint (sha256:..., printed by `ag start-head`)");
  std::string worker_config;
  start_worker_cmd->add_option("--config", worker_config,
                               "Options from this file: KEY = VALUE lines, keys are these flags' long names "
                               "(sample: packaging/config/worker.conf); flags given here override it");
  start_worker_cmd->add_flag("--block", worker.block, "Stay in the foreground");
  start_worker_cmd->add_flag("--verbose", worker.verbose, "Debug logging");
  worker.token.clear();
  start_worker_cmd->callback([&] { if (worker.token.empty()) worker.token = conn.token; });

  double stop_timeout = 30;
  auto* stop_cmd = app.add_subcommand("stop", "Stop the daemons started from this machine");
  stop_cmd->add_option("--timeout", stop_timeout, "How long to wait for each daemon before SIGKILL (30s)")->capture_default_str()->transform(ag::cli::duration_flag(0, 3600));

  std::string status_job;
  bool status_verbose = false;
  auto* status_cmd = app.add_subcommand("status", "Cluster summary, or one job's state with JOB_ID");
  status_cmd->add_option("job_id", status_job, "Job id");
  status_cmd->add_flag("-v,--verbose", status_verbose, "Add the job's event log");

  bool list_nodes_verbose = false;
  app.add_subcommand("list-nodes", "List the cluster's nodes")
      ->add_flag("-v,--verbose", list_nodes_verbose, "Add each node's network interface (what tasks' collectives use)");
  ag::cli::ListJobsOptions list_opts;
  auto* list_jobs_cmd = app.add_subcommand("list-jobs", "List jobs, newest first");
  list_jobs_cmd->add_option("--state", list_opts.state, "Only jobs in this state");
  list_jobs_cmd->add_option("--user", list_opts.user, "Only this user's jobs");
  list_jobs_cmd->add_flag("--mine", list_opts.mine, "Only your own jobs");
  list_jobs_cmd->add_option("--name", list_opts.name, "Only jobs whose name matches this pattern (train-*)");
  list_jobs_cmd->add_option("--queue", list_opts.queue, "Only jobs of this queue");
  list_jobs_cmd->add_option("--since", list_opts.since, "Only jobs submitted since: a time ago (1d, 2h) or a UTC time");
  list_jobs_cmd->add_option("--limit", list_opts.limit, "Show at most this many, newest first")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1000000}));
  list_jobs_cmd->add_flag("--all", list_opts.all, "Show every job (in pages of 1000)");

  ag::cli::ExecOptions exec_opts;
  auto* exec_cmd = app.add_subcommand(
      "exec", "Run a command beside a running task: on its node, as its user, in its directory and environment");
  exec_cmd->add_option("job_id", exec_opts.job_id, "Job id")->required();
  auto* exec_task_opt = exec_cmd->add_option("--task-index", exec_opts.task_index, "Which task of the gang (default 0)")
                            ->check(CLI::Range(0, 1000000));
  exec_cmd->add_flag("--all-ranks", exec_opts.all_ranks, "Run it beside every task, each line prefixed [rank N]");
  exec_cmd->add_flag("-i,--stdin", exec_opts.with_stdin, "Pass this process's input to the command's stdin");
  exec_cmd->add_flag("-t,--tty", exec_opts.tty,
                     "Run it on a terminal that follows this one (with -i: an interactive shell, `-it -- bash`)");
  ag::cli::AllocOptions alloc_opts;
  auto* alloc_cmd = app.add_subcommand(
      "alloc", "Hold a gang's resources with no command; run commands in its tasks with `ag exec`");
  alloc_cmd->add_option("--num-workers,-n", alloc_opts.num_workers, "Tasks in the gang")->capture_default_str()
      ->check(CLI::Range(1, 4096));
  alloc_cmd->add_option("--num-cpus", alloc_opts.num_cpus, "CPUs per task (default 1)")->check(CLI::Range(0.0, 1024.0));
  alloc_cmd->add_option("--num-gpus", alloc_opts.num_gpus, "GPUs per task (default 0)")->check(CLI::Range(0, 64));
  alloc_cmd->add_option("--memory", alloc_opts.memory_gb, "Memory per task, GiB (or 512M, 4G)")
      ->transform(ag::cli::size_flag(int64_t{1} << 30, "GiB", 0, 1e6));
  alloc_cmd->add_option("--time", alloc_opts.time_s, "How long it may be held before it ends (2h; default: until released)")
      ->transform(ag::cli::duration_flag(1, 90 * 24 * 3600));
  alloc_cmd->add_option("--placement", alloc_opts.placement, "pack (fewest nodes) or spread")->capture_default_str()
      ->check(CLI::IsMember({"pack", "spread"}));
  alloc_cmd->add_option("--name", alloc_opts.name, "Its name")->capture_default_str();
  alloc_cmd->add_option("--queue", alloc_opts.queue, "The queue it waits in");
  alloc_cmd->add_option("--image", alloc_opts.image, "Container image its tasks hold (ag exec runs in it)");
  alloc_cmd->add_option("--constraint", alloc_opts.constraints, "Only nodes with this label KEY=VALUE (repeatable)");
  std::string release_job;
  auto* release_alloc_cmd = app.add_subcommand("release-alloc", "End an allocation: its tasks stop, its resources are free");
  release_alloc_cmd->add_option("job_id", release_job, "The allocation's job id")->required();
  std::string stack_job;
  int stack_task = 0;
  auto* stack_cmd = app.add_subcommand(
      "stack", "Print the Python stacks of every thread of a running job's ranks (where a hang waits)");
  stack_cmd->add_option("job_id", stack_job, "Job id")->required();
  auto* stack_task_opt = stack_cmd->add_option("--task-index", stack_task, "Only this task (default: every rank)")
                             ->check(CLI::Range(0, 1000000));
  ag::cli::EventsOptions events_opts;
  auto* events_cmd = app.add_subcommand("events", "The cluster's job and node events in order (what failed, which node died)");
  events_cmd->add_flag("--follow,-f", events_opts.follow, "Keep printing new events as they happen (Ctrl-C ends)");
  events_cmd->add_option("--job", events_opts.job_id, "Only this job's events (an array's: its elements')");
  events_cmd->add_option("--node", events_opts.node_id, "Only this node's events, and job events that name it");
  events_cmd->add_option("--since", events_opts.since, "Events since a time ago (10m, 2h, 1d) or a UTC time");
  events_cmd->add_option("--type", events_opts.types, "Only these types, comma-separated (job.failed,node.dead)");
  events_cmd->add_option("--limit", events_opts.limit, "At most this many past events (default 100)")
      ->check(CLI::Range(1, 10000));
  ag::cli::WebhookAddOptions webhook_opts;
  std::string webhook_id;
  auto* webhook_cmd = app.add_subcommand("webhook", "Where the head POSTs job and node events (signed)");
  webhook_cmd->require_subcommand(1);
  auto* webhook_add_cmd = webhook_cmd->add_subcommand("add", "Add a webhook; prints its secret once");
  webhook_add_cmd->add_option("url", webhook_opts.url, "The receiver: http(s)://HOST[:PORT]/PATH")->required();
  webhook_add_cmd->add_option("--events", webhook_opts.events,
                              "Which events, comma-separated (default job.failed,job.succeeded,job.stopped,"
                              "job.preempted,node.dead,node.unhealthy)");
  auto* webhook_of_opt = webhook_add_cmd->add_option("--jobs-of", webhook_opts.jobs_of, "Another user's jobs (admins)");
  webhook_add_cmd->add_flag("--all", webhook_opts.all, "Every job's and every node's events (admins)")
      ->excludes(webhook_of_opt);
  webhook_add_cmd->add_option("--format", webhook_opts.format, "json, or slack (Slack's incoming-webhook shape)")
      ->capture_default_str()
      ->check(CLI::IsMember({"json", "slack"}));
  webhook_add_cmd->add_option("--ca-file", webhook_opts.ca_file, "Verify an https receiver against this CA only (PEM)");
  webhook_add_cmd->add_option("--retry-for", webhook_opts.retry_for_s,
                              "How long one event is retried before it is given up (1h; 10s to 7d)")
      ->transform(ag::cli::duration_flag(10, 7 * 24 * 3600));
  auto* webhook_list_cmd = webhook_cmd->add_subcommand("list", "Your webhooks (an admin: everyone's)");
  auto* webhook_remove_cmd = webhook_cmd->add_subcommand("remove", "Remove a webhook");
  webhook_remove_cmd->add_option("id", webhook_id, "Webhook id (from `ag webhook list`)")->required();
  auto* webhook_test_cmd = webhook_cmd->add_subcommand("test", "Send one webhook.test delivery now and say how it went");
  webhook_test_cmd->add_option("id", webhook_id, "Webhook id")->required();
  auto* webhook_deliveries_cmd = webhook_cmd->add_subcommand("deliveries", "A webhook's last 100 deliveries");
  webhook_deliveries_cmd->add_option("id", webhook_id, "Webhook id")->required();
  std::string pf_job, pf_ports;
  int pf_task = 0;
  auto* pf_cmd = app.add_subcommand(
      "port-forward", "Forward a local port to a port on a running task's node (Jupyter, TensorBoard, a debugger)");
  pf_cmd->add_option("job_id", pf_job, "Job id")->required();
  pf_cmd->add_option("ports", pf_ports, "[LOCAL:]REMOTE, e.g. 8888 or 9000:8888 (LOCAL 0: any free port)")->required();
  pf_cmd->add_option("--task-index", pf_task, "Which task's node (default 0)")->check(CLI::Range(0, 1000000));
  std::string logs_job;
  ag::cli::LinesOptions logs_lines;
  std::string logs_since;
  bool logs_head = false;
  std::string logs_limit = "0";
  auto* logs_cmd = app.add_subcommand("logs", "Print a task's output (or the head's log with --head)");
  logs_cmd->add_option("job_id", logs_job, "Job id");
  logs_cmd->add_option("--task-index", logs_lines.task_index,
                       "One task's output (default: every task's, lines interleaved as received, each prefixed [rank N])")
      ->check(CLI::NonNegativeNumber);
  logs_cmd->add_option("--attempt", logs_lines.attempt, "Attempt (default: the latest)")->check(CLI::NonNegativeNumber);
  logs_cmd->add_flag("-f,--follow", logs_lines.follow, "Keep printing new output until the tasks end");
  logs_cmd->add_option("--tail", logs_lines.tail, "Only the last N lines (of every rank's, merged)")->check(CLI::Range(1, 1000000));
  logs_cmd->add_option("--limit-bytes", logs_limit,
                       "Print at most this much (512K, 100M, 2G); past it, say where it was cut and exit 3 "
                       "(default 0: everything)");
  logs_cmd->add_option("--since", logs_since, "Only lines received since: a time ago (90s, 10m, 2h, 1d) or a UTC time (2026-12-01T11:00:00)");
  logs_cmd->add_flag("--timestamps", logs_lines.timestamps, "Each line after the time the head received it (UTC)");
  logs_cmd->add_flag("--head", logs_head, "Print the head daemon's own log");
  logs_cmd->add_flag("--raw", logs_lines.raw, "Print the bytes as the task wrote them (terminal escape sequences included)");

  SubmitOptions submit_opts;
  auto* submit_cmd = ag::cli::add_submit_command(app, submit_opts);

  ag::cli::StopJobsOptions stop_jobs_opts;
  auto* stop_job_cmd = app.add_subcommand("stop-job", "Stop jobs: every process of every task");
  stop_job_cmd->add_option("job_id", stop_jobs_opts.job_ids, "Job ids (or an array's id)");
  stop_job_cmd->add_flag("--mine", stop_jobs_opts.mine, "Every unfinished job of yours");
  stop_job_cmd->add_option("--state", stop_jobs_opts.state, "Every job in this state (PENDING or RUNNING; yours with --mine)");
  stop_job_cmd->add_flag("-y,--yes", stop_jobs_opts.yes, "Stop the jobs chosen without asking");
  std::vector<std::string> hold_job_ids, release_job_ids;
  auto* hold_cmd = app.add_subcommand("hold", "Hold pending jobs: they leave the queue until released");
  hold_cmd->add_option("job_ids", hold_job_ids, "Job ids")->required();
  auto* release_cmd = app.add_subcommand("release", "Release held jobs: they join the queue again");
  release_cmd->add_option("job_ids", release_job_ids, "Job ids")->required();
  std::string delete_job_id;
  auto* delete_job_cmd =
      app.add_subcommand("delete-job", "Delete a finished job for good: its record, events, logs and package");
  delete_job_cmd->add_option("job_id", delete_job_id, "Job id")->required();

  std::string user_name, user_role = "user";
  std::vector<std::string> user_groups;
  auto* user_cmd = app.add_subcommand("user", "Manage users and their tokens (admin)");
  user_cmd->require_subcommand(1);
  auto* user_add_cmd = user_cmd->add_subcommand("add", "Add a user; prints their token once");
  user_add_cmd->add_option("name", user_name, "User name: lowercase letters, digits, '_' or '-'")->required();
  user_add_cmd->add_option("--role", user_role, "admin, user or viewer")->capture_default_str()->check(CLI::IsMember({"admin", "user", "viewer"}));
  user_add_cmd->add_option("--group", user_groups, "A group whose members share access to each other's jobs (repeatable)");
  auto* user_list_cmd = user_cmd->add_subcommand("list", "List users");
  auto* user_disable_cmd = user_cmd->add_subcommand("disable", "Disable a user: their token and sessions stop working");
  user_disable_cmd->add_option("name", user_name, "User name")->required();
  auto* user_enable_cmd = user_cmd->add_subcommand("enable", "Enable a disabled user again");
  user_enable_cmd->add_option("name", user_name, "User name")->required();
  auto* user_rotate_cmd = user_cmd->add_subcommand("rotate", "Give a user a new token; the old one stops working");
  user_rotate_cmd->add_option("name", user_name, "User name")->required();
  std::string user_new_role;
  std::vector<std::string> user_removed_groups;
  auto* user_set_cmd = user_cmd->add_subcommand("set", "Change a user's role or groups");
  user_set_cmd->add_option("name", user_name, "User name")->required();
  user_set_cmd->add_option("--role", user_new_role, "admin, user or viewer")->check(CLI::IsMember({"admin", "user", "viewer"}));
  user_set_cmd->add_option("--group", user_groups, "Add them to this group (repeatable)");
  user_set_cmd->add_option("--remove-group", user_removed_groups, "Take them out of this group (repeatable)");
  auto* user_delete_cmd =
      user_cmd->add_subcommand("delete", "Delete a user: their token and sessions stop working; their jobs keep their name");
  user_delete_cmd->add_option("name", user_name, "User name")->required();

  std::string token_ttl = "24h", token_id;
  bool token_join = false;
  QuotaOptions quota;
  auto* quota_cmd = app.add_subcommand("quota", "Quotas: the most a user or group may hold at once");
  quota_cmd->require_subcommand(1);
  auto* quota_set_cmd = quota_cmd->add_subcommand("set", "Set a user's or group's quota (admin); unset limits have none");
  auto* quota_remove_cmd = quota_cmd->add_subcommand("remove", "Remove a user's or group's quota (admin)");
  for (auto* cmd : {quota_set_cmd, quota_remove_cmd}) {
    cmd->add_option("--user", quota.user, "The user");
    cmd->add_option("--group", quota.group, "The group (its users together)");
  }
  quota_set_cmd->add_option("--max-gpus", quota.max_gpus, "GPUs held at once")->check(CLI::NonNegativeNumber);
  quota_set_cmd->add_option("--max-cpus", quota.max_cpus, "CPUs held at once")->check(CLI::NonNegativeNumber);
  quota_set_cmd->add_option("--max-memory", quota.max_memory_gb, "Memory held at once, GiB (or 512M, 64G, ...)")->transform(ag::cli::size_flag(int64_t{1} << 30, "GiB", 0, 1e9));
  quota_set_cmd->add_option("--max-running-jobs", quota.max_running_jobs, "Jobs running at once")
      ->check(CLI::NonNegativeNumber);
  quota_set_cmd->add_option("--max-priority", quota.max_priority, "Highest --priority its jobs may have")
      ->check(CLI::Range(-1000, 1000));
  quota_set_cmd->add_flag("--allow-no-preempt", quota.allow_no_preempt, "Its users may submit with --no-preempt");
  quota_set_cmd->add_option("--share", quota.share, "A user's fair-share weight: 2 is twice the share of a user with 1")
      ->check(CLI::PositiveNumber);
  auto* quota_list_cmd = quota_cmd->add_subcommand("list", "Each quota with what it holds now (used/limit)");
  QueueOptions queue;
  auto* queue_cmd = app.add_subcommand("queue", "Queues (partitions): nodes of their own, default priority, limits");
  queue_cmd->require_subcommand(1);
  auto* queue_create_cmd =
      queue_cmd->add_subcommand("create", "Create or change a queue (admin): ag queue create gpu --nodes-with gpu=a100");
  auto* queue_remove_cmd = queue_cmd->add_subcommand("remove", "Remove a queue no job waits or runs in (admin)");
  auto* queue_list_cmd = queue_cmd->add_subcommand("list", "Each queue with its nodes, depth and what it runs");
  for (auto* cmd : {queue_create_cmd, queue_remove_cmd}) cmd->add_option("name", queue.name, "The queue's name")->required();
  queue_create_cmd->add_option("--nodes-with", queue.nodes_with,
                               "Its jobs run only on nodes with this label KEY=VALUE (repeatable; none: any node)");
  queue_create_cmd->add_option("--priority", queue.priority, "Priority of its jobs that choose none (low|normal|high|urgent|N)");
  queue_create_cmd->add_flag("--preempt", queue.preempt, "Its jobs may preempt lower-priority jobs to start");
  queue_create_cmd->add_option("--max-gpus-per-user", queue.max_gpus_per_user, "GPUs one user may hold in it")
      ->check(CLI::NonNegativeNumber);
  queue_create_cmd->add_option("--max-cpus-per-user", queue.max_cpus_per_user, "CPUs one user may hold in it")
      ->check(CLI::NonNegativeNumber);
  queue_create_cmd->add_option("--max-memory-per-user", queue.max_memory_gb_per_user,
                               "Memory one user may hold in it, GiB (or 512M, 64G, ...)")
      ->transform(ag::cli::size_flag(int64_t{1} << 30, "GiB", 0, 1e9));
  queue_create_cmd->add_option("--idle-gpu-timeout", queue.idle_gpu_timeout_s,
                               "Its jobs that give none: every GPU under 5% busy this long is an event (30m)")
      ->transform(ag::cli::duration_flag(1, 90 * 24 * 3600));
  queue_create_cmd->add_option("--max-running-jobs-per-user", queue.max_running_jobs_per_user,
                               "Jobs one user may run in it at once")
      ->check(CLI::NonNegativeNumber);
  auto* share_cmd = app.add_subcommand(
      "share", "Fair share: each user's recent usage (GPU-equivalent hours, halving every --usage-half-life) and share");
  auto* token_cmd = app.add_subcommand("token", "Manage join tokens, which only add nodes (admin)");
  token_cmd->require_subcommand(1);
  auto* token_create_cmd = token_cmd->add_subcommand("create", "Make a join token: ag token create --join [--ttl 24h]");
  token_create_cmd->add_flag("--join", token_join, "A join token (the only kind made here)")->required();
  token_create_cmd->add_option("--ttl", token_ttl, "How long it works: 30m, 24h, 7d; 0 for until revoked")->capture_default_str();
  auto* token_list_cmd = token_cmd->add_subcommand("list", "List join tokens");
  auto* token_revoke_cmd = token_cmd->add_subcommand("revoke", "Revoke a join token");
  token_revoke_cmd->add_option("id", token_id, "Token id (from `ag token list`)")->required();

  std::string remove_node_id;
  auto* remove_node_cmd = app.add_subcommand("remove-node", "Remove a node: revoke its credential, end its tasks (admin)");
  remove_node_cmd->add_option("node_id", remove_node_id, "Node id (from `ag list-nodes`)")->required();
  std::string drain_node_id, resume_node_id;
  std::string pull_image_ref;
  std::vector<std::string> pull_nodes;
  double pull_timeout_s = 3600;
  auto* pull_cmd = app.add_subcommand("pull", "Pull a container image on the nodes ahead of the jobs that use it");
  pull_cmd->add_option("image", pull_image_ref, "Image, e.g. registry.example/team/train:1.4")->required();
  pull_cmd->add_option("--nodes", pull_nodes, "Only these nodes (ids from `ag list-nodes`, comma-separated or repeated)");
  pull_cmd->add_option("--timeout", pull_timeout_s, "How long to wait for every node (10m, 1h)")->capture_default_str()->transform(ag::cli::duration_flag(1, 86400));
  auto* drain_cmd = app.add_subcommand("drain", "Drain a node: no new tasks, those running finish (admin)");
  drain_cmd->add_option("node_id", drain_node_id, "Node id (from `ag list-nodes`)")->required();
  auto* resume_cmd = app.add_subcommand("resume", "Let a drained node take new tasks again (admin)");
  resume_cmd->add_option("node_id", resume_node_id, "Node id (from `ag list-nodes`)")->required();

  ag::cli::AuditOptions audit_opts;
  auto* admin_cmd = app.add_subcommand("admin", "Cluster administration on the head's machine");
  admin_cmd->require_subcommand(1);
  ag::cli::CopyStoreOptions copy_store;
  auto* copy_store_cmd = admin_cmd->add_subcommand(
      "copy-store", "Move a stopped head's state into a PostgreSQL store for standby heads (README, High availability)");
  copy_store_cmd->add_option("--from", copy_store.from, "The stopped head's --data-dir")->required();
  copy_store_cmd->add_option("--to", copy_store.to, "postgresql://USER@HOST:PORT/DATABASE")->required();
  copy_store_cmd->add_option("--store-password-file", copy_store.password_file, "File holding the store's password (mode 0600)");
  copy_store_cmd->add_option("--shared-dir", copy_store.shared_dir,
                             "The directory the heads will share: gets the CA, tokens, task logs and packages")
      ->required();
  copy_store_cmd->add_flag("--force", copy_store.force, "Replace what the store already holds");
  auto* audit_cmd = app.add_subcommand("audit", "Who changed what, when, from where (admin)");
  audit_cmd->add_option("--limit", audit_opts.limit, "Newest entries to show")->capture_default_str()->check(CLI::Range(1, 10000));
  audit_cmd->add_option("--user", audit_opts.user, "Only what this user did");
  audit_cmd->add_option("--action", audit_opts.action, "Only actions containing this text (stop, /api/users, /api/queues)");
  audit_cmd->add_option("--since", audit_opts.since, "Only since: a time ago (1d, 2h) or a UTC time");
  auto* whoami_cmd = app.add_subcommand("whoami", "The user your token belongs to, and its role");
  auto* tls_cmd = app.add_subcommand("tls", "The cluster's TLS: ag tls ca-cert > aethergrid-ca.crt");
  tls_cmd->require_subcommand(1);
  auto* tls_ca_cmd = tls_cmd->add_subcommand(
      "ca-cert", "Print the head's cluster CA (PEM): import it in a browser to trust the dashboard");
  ag::cli::DoctorOptions doctor_options;
  auto* doctor_cmd = app.add_subcommand(
      "doctor", "Check the way to the cluster: the head, its CA, your token, clocks; --nodes N also runs a probe job "
                "across N nodes (ports between them, hostnames, interfaces)");
  doctor_cmd->add_option("--nodes", doctor_options.nodes, "Run the probe across this many nodes (0: none)")
      ->check(CLI::Range(0, 4096));
  doctor_cmd->add_flag("--gpus", doctor_options.gpus, "The probe takes a GPU a rank and checks torch, CUDA and NCCL");
  doctor_cmd->add_option("--timeout", doctor_options.timeout_s, "How long the probe may take to start and run (60s, 5m)")
      ->capture_default_str()
      ->transform(ag::cli::duration_flag(5, 3600));
  std::string config_fingerprint;
  auto* config_cmd = app.add_subcommand("config", "Pin a head's cluster CA and make it the default: ag config --address HOST:PORT --ca-fingerprint sha256:...");
  config_cmd->add_option("--ca-fingerprint", config_fingerprint, "The head's cluster CA fingerprint (`ag start-head` prints it)");

  ag::cli::InstallServiceOptions install;
  auto* install_cmd = app.add_subcommand(
      "install-service", "Write the systemd unit and config file of the head or a worker (as the packages do)");
  install_cmd->add_option("kind", install.kind, "head or worker")->required()->check(CLI::IsMember({"head", "worker"}));
  install_cmd->add_option("--unit-dir", install.unit_dir, "Where the unit goes")->capture_default_str();
  install_cmd->add_option("--config-dir", install.config_dir, "Where its config file goes (head.conf, worker.conf)")
      ->capture_default_str();
  install_cmd->add_option("--set", install.settings,
                          "KEY=VALUE in the config file, KEY a long flag of start-head/start-worker (repeatable)");
  install_cmd->add_option("--user", install.user, "The account the head runs as (head only)")->capture_default_str();
  install_cmd->add_flag("--force", install.force, "Replace files that exist with other contents");

  std::string completion_shell;
  auto* completion_cmd = app.add_subcommand("completion", "Print shell completion: source <(ag completion bash), or zsh");
  completion_cmd->add_option("shell", completion_shell, "bash or zsh")->required();

  // `ag SUBCOMMAND --help` lists the subcommand's own options: these work with every one.
  for (CLI::App* command : app.get_subcommands([](CLI::App*) { return true; })) {
    command->footer(
        "\nGlobal options (before or after the command):\n"
        "  --address HOST:PORT   The head (default: AG_ADDRESS, the default from `ag config`, this machine's session)\n"
        "  --token-file FILE     Your token, in a file only you can read (or AG_TOKEN_FILE; --token / AG_TOKEN)\n"
        "  -o, --output json     Machine-readable output, errors included\n"
        "  --insecure            Plain HTTP to a head on another machine (no TLS)\n"
        "See `ag --help` for every command.");
  }

  try {
    ag::cli::parse_command_line(app, std::vector<std::string>(argv, argv + argc), {{"submit", &submit_opts.command}, {"exec", &exec_opts.command}});
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (auto mistake = ag::cli::usage_mistake(app)) {
      if (ag::cli::json_requested(argc, argv)) std::cout << nlohmann::json{{"error", *mistake}}.dump() << "\n";
      std::cerr << "error: " << *mistake << "\n";
      return 2;
    }
    bool saw_double_dash = false;
    for (int i = 1; i < argc; ++i) saw_double_dash = saw_double_dash || std::strcmp(argv[i], "--") == 0;
    std::string hint = ag::cli::usage_hint(app, e, saw_double_dash);
    // One line that says what was wrong (the flag's own words where a value was; an
    // unknown option's nearest match), then any hint: never the parser's banner.
    std::string line = ag::cli::plain_value_error(e.what());
    std::string rest = hint.empty() ? "" : hint.substr(1);
    if (rest.rfind("unknown option", 0) == 0) {
      const size_t end = rest.find('\n');
      line = rest.substr(0, end);
      rest = end == std::string::npos ? "" : rest.substr(end + 1);
    }
    if (ag::cli::json_requested(argc, argv)) {
      std::cout << nlohmann::json{{"error", line + (rest.empty() ? "" : "\n" + rest)}}.dump() << "\n";
    }
    std::cerr << "error: " << line << "\n";
    if (!rest.empty()) std::cerr << rest << "\n";
    return 2;
  }
  ag::cli::set_json_errors(conn.output == "json");
  for (auto [command, path] : {std::pair{start_head_cmd, &head_config}, {start_worker_cmd, &worker_config}}) {
    if (!*command || path->empty()) continue;
    auto applied = ag::cli::apply_config_file(*command, app, *path);
    if (!applied.ok()) {
      std::cerr << "error: " << applied.error().message << "\nNothing was started.\n";
      return 2;
    }
    const auto& keys = applied.value();
    if (std::find(keys.begin(), keys.end(), "node-timeout") != keys.end()) head.node_timeout_given = true;
    if (std::find(keys.begin(), keys.end(), "token-file") != keys.end()) {
      worker.token_file_flag = "token-file (config file " + *path + ")";
    }
  }
  if (*start_worker_cmd && worker.head_node.empty()) {
    std::cerr << "error: --head-node is required: the head's HOST:PORT, on the command line or as head-node in the "
                 "--config file\n";
    return 2;
  }

  if (worker.token.empty()) worker.token = conn.token;
  if (worker.token_file.empty()) worker.token_file = conn.token_file;
  head.insecure = conn.insecure;
  worker.insecure = conn.insecure;
  if (*completion_cmd) {
    auto script = ag::cli::completion_script(app, completion_shell);
    if (!script) {
      std::cerr << "error: no completion for shell '" << completion_shell << "'; use bash or zsh\n";
      return 2;
    }
    std::cout << *script;
    return 0;
  }
  if (*install_cmd) return ag::cli::install_service(install);
  if (*copy_store_cmd) return ag::cli::copy_store(copy_store);
  if (*start_head_cmd) {
    if (start_head_cmd->get_option("--node-timeout")->count() > 0) head.node_timeout_given = true;
    return start_head(head);
  }
  if (*start_worker_cmd) {
    const char* env = std::getenv("AG_TOKEN");
    if (worker.token.empty() && worker.token_file.empty() && env && *env) worker.token = env;
    const char* env_file = std::getenv("AG_TOKEN_FILE");
    if (worker.token.empty() && worker.token_file.empty() && env_file && *env_file) worker.token_file = env_file;
    hide_token(argc, argv);
    return start_worker(worker);
  }
  if (*stop_cmd) return stop_daemons(stop_timeout);
  if (*status_cmd) return status_job.empty() ? cluster_status(conn) : job_status(conn, status_job, status_verbose);
  if (app.got_subcommand("list-nodes")) return list_nodes(conn, list_nodes_verbose);
  if (*list_jobs_cmd) return list_jobs(conn, list_opts);
  if (*exec_cmd) {
    exec_opts.task_index_given = exec_task_opt->count() > 0;
    return ag::cli::exec(conn, exec_opts);
  }
  if (*pf_cmd) return ag::cli::port_forward(conn, pf_job, pf_task, pf_ports);
  if (*events_cmd) return ag::cli::events(conn, events_opts);
  if (*webhook_add_cmd) return ag::cli::webhook_add(conn, webhook_opts);
  if (*webhook_list_cmd) return ag::cli::webhook_list(conn);
  if (*webhook_remove_cmd) return ag::cli::webhook_remove(conn, webhook_id);
  if (*webhook_test_cmd) return ag::cli::webhook_test(conn, webhook_id);
  if (*webhook_deliveries_cmd) return ag::cli::webhook_deliveries(conn, webhook_id);
  if (*alloc_cmd) return ag::cli::alloc(conn, alloc_opts);
  if (*release_alloc_cmd) return ag::cli::release_alloc(conn, release_job);
  if (*stack_cmd) {
    return ag::cli::stack(conn, stack_job, stack_task_opt->count() ? std::optional<int>(stack_task) : std::nullopt);
  }
  if (*logs_cmd) {
    if (logs_head) return head_logs();
    if (logs_job.empty()) {
      return ag::cli::usage_error("give a job id (ag logs JOB_ID) or --head");
    }
    auto limit = ag::cli::parse_size("--limit-bytes", logs_limit);
    if (!limit.ok()) return ag::cli::usage_error(limit.error().message);
    logs_lines.limit_bytes = limit.value();
    logs_lines.json = conn.output == "json";
    return logs(conn, logs_job, logs_lines, logs_since);
  }
  if (*submit_cmd) return submit(conn, submit_opts);
  if (*stop_job_cmd) return stop_jobs(conn, stop_jobs_opts);
  if (*delete_job_cmd) return delete_job(conn, delete_job_id);
  if (*hold_cmd) return set_held(conn, hold_job_ids, true);
  if (*release_cmd) return set_held(conn, release_job_ids, false);
  if (*user_add_cmd) return user_add(conn, user_name, user_role, user_groups);
  if (*user_list_cmd) return user_list(conn);
  if (*user_disable_cmd) return user_set_enabled(conn, user_name, false);
  if (*user_enable_cmd) return user_set_enabled(conn, user_name, true);
  if (*user_rotate_cmd) return user_rotate(conn, user_name);
  if (*user_set_cmd) return user_set(conn, user_name, user_new_role, user_groups, user_removed_groups);
  if (*user_delete_cmd) return user_delete(conn, user_name);
  if (*quota_set_cmd) return quota_set(conn, quota);
  if (*quota_remove_cmd) return quota_remove(conn, quota);
  if (*quota_list_cmd) return quota_list(conn);
  if (*queue_create_cmd) return queue_create(conn, queue);
  if (*queue_remove_cmd) return queue_remove(conn, queue.name);
  if (*queue_list_cmd) return queue_list(conn);
  if (*share_cmd) return share(conn);
  if (*token_create_cmd) return token_create_join(conn, token_ttl);
  if (*token_list_cmd) return token_list(conn);
  if (*token_revoke_cmd) return token_revoke(conn, token_id);
  if (*remove_node_cmd) return remove_node(conn, remove_node_id);
  if (*drain_cmd) return set_draining(conn, drain_node_id, true);
  if (*pull_cmd) return pull_image(conn, pull_image_ref, pull_nodes, pull_timeout_s);
  if (*resume_cmd) return set_draining(conn, resume_node_id, false);
  if (*audit_cmd) return audit(conn, audit_opts);
  if (*whoami_cmd) return whoami(conn);
  if (*tls_ca_cmd) return tls_ca_cert(conn);
  if (*doctor_cmd) return ag::cli::doctor(conn, doctor_options);
  if (*config_cmd) return config(conn, config_fingerprint);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  // Errors are values inside AetherGrid; this is the last line of defence for a library
  // that throws (out of memory, a filesystem call), so that a user sees why, not a trace.
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
