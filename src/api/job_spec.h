// JobSpec: what a user asks for when submitting a job, parsed and validated from the
// JSON body of POST /api/jobs. Every limit a request is held to lives here.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "api/container_spec.h"
#include "common/resources.h"
#include "common/result.h"

namespace ag::api {

// Limits on a job spec; requests over them are refused with a 400 that names the limit.
inline constexpr int kMaxNumWorkers = 4096;
inline constexpr double kMaxCpusPerTask = 1024;
// Every task holds some CPU, so that the cluster's CPUs bound how many tasks a node runs
// (0 would let any number pack onto one node). A thousandth lets light tasks share.
inline constexpr double kMinCpusPerTask = 0.001;
inline constexpr int64_t kMaxGpusPerTask = 64;
inline constexpr int kMaxRetries = 100;
// Priorities: higher is placed first; the names stand for these numbers.
inline constexpr int kMinPriority = -1000;
inline constexpr int kMaxPriority = 1000;
// "low" -100, "normal" 0, "high" 100, "urgent" 1000; nullopt for another name.
std::optional<int> priority_level(std::string_view name);
// A queue name: 1-32 of a-z, 0-9, '-', '_', starting with a letter or digit.
Status check_queue_name(const std::string& name);
inline constexpr size_t kMaxEntrypointBytes = 64 * 1024;
inline constexpr size_t kMaxNameBytes = 256;
inline constexpr size_t kMaxLabels = 64;
inline constexpr size_t kMaxEnvVars = 256;
// Sizes checked at submit, so that nothing is accepted that fails or swells later.
inline constexpr size_t kMaxEnvNameBytes = 256;
inline constexpr size_t kMaxEnvValueBytes = 64 * 1024;
inline constexpr size_t kMaxEnvTotalBytes = 512 * 1024;
inline constexpr size_t kMaxLabelKeyBytes = 128;
inline constexpr size_t kMaxLabelValueBytes = 1024;
inline constexpr size_t kMaxExcludes = 1024;
inline constexpr size_t kMaxExcludeBytes = 1024;
inline constexpr size_t kMaxPathBytes = 4096;       // runtime_env.python and other paths
inline constexpr size_t kMaxArraySpecBytes = 4096;  // "0-9999%16", "1,3,5-9"
inline constexpr double kMaxTimeoutSeconds = 90.0 * 24 * 3600;
inline constexpr double kMaxHoldOnFailureSeconds = 7.0 * 24 * 3600;
// What an allocation's tasks, and task 0 of an interactive job, run: nothing, until
// they are stopped.
inline constexpr const char* kHoldingEntrypoint = "exec sleep infinity";

// The command task `task_index` of a job runs.
struct JobSpec;
const std::string& task_entrypoint(const JobSpec& spec, int task_index);
// Retries wait retry_delay before the first retry, twice as long before each next one,
// at most kMaxRetryDelaySeconds.
inline constexpr double kDefaultRetryDelaySeconds = 3;
inline constexpr double kMaxRetryDelaySeconds = 600;
inline constexpr size_t kMaxRetryExitCodes = 64;
// Node labels (ag start-worker --label) and the constraints jobs put on them.
inline constexpr size_t kMaxNodeLabels = 32;
inline constexpr size_t kMaxConstraints = 16;
// Job arrays: at most this many elements, each index from 0 to kMaxArrayIndex.
inline constexpr size_t kMaxArraySize = 10000;
inline constexpr size_t kMaxQueueNameBytes = 32;
inline constexpr int kMaxArrayIndex = 999999;

// `ag submit --array 0-99%8`: one job per index, each with AG_ARRAY_INDEX, at most
// max_running of them queued or running at once (0: no limit).
struct ArraySpec {
  std::vector<int> indices;  // ascending, distinct, not empty
  int max_running = 0;
  bool operator==(const ArraySpec&) const = default;
};

// "0-99%8", "1,3,10-20:2", "0-9": items N, A-B or A-B:STEP, comma-separated, with an
// optional %LIMIT. Errors (kInvalidArgument) say which part is wrong and the forms.
Result<ArraySpec> parse_array_spec(std::string_view text);
// The indices folded back into that form ("0-99%8").
std::string to_string(const ArraySpec& array);

// Jobs one job may depend on (after + after_any + after_failed together).
inline constexpr size_t kMaxDependencies = 128;

// What is wrong with a label or constraint `key`=`value` (key: 1-63 of letters, digits,
// '.', '_', '-', '/'; value: up to 63 of letters, digits, '.', '_', '-'), or nullopt.
std::optional<std::string> label_problem(const std::string& key, const std::string& value);

// How a job's tasks are spread over nodes. On the wire (REST body, stored records) it
// is the string "pack" or "spread", so that documents written before it was an enum
// still load.
enum class Placement {
  kPack,    // fewest nodes, so that collective traffic stays local
  kSpread,  // as many distinct nodes as possible
};

// "pack" or "spread".
const char* to_string(Placement placement);
// The placement a wire string names; nullopt for anything but "pack" and "spread"
// (exact, lower case).
std::optional<Placement> parse_placement(std::string_view text);

// Which failures a job's retries are for.
struct RetryOn {
  enum class Kind {
    kAny,        // every failure (the default)
    kNodeLost,   // only a task lost with its node (the program did nothing wrong)
    kExitCodes,  // a task exiting with one of exit_codes, and a lost node
  };
  Kind kind = Kind::kAny;
  std::vector<int> exit_codes;  // kExitCodes: 1-255, ascending, distinct
  bool operator==(const RetryOn&) const = default;
};

struct RuntimeEnv {
  std::map<std::string, std::string> env_vars;
  std::string working_dir;        // "sha256:<hex>" of an uploaded package, or ""
  std::string python_executable;  // interpreter `python`/`python3` resolve to, or ""
  std::string image;              // container image the tasks run in ("" for the node's own environment)
  std::vector<Mount> mounts;      // node paths mounted into the image's containers
  std::vector<std::string> excludes;  // used by clients while packing; kept for the record

  // The package's hex digest ("" when there is no working_dir).
  std::string working_dir_hash() const;
};

struct JobSpec {
  std::string entrypoint;
  int num_workers = 1;
  double num_cpus = 1;         // per task
  int64_t num_gpus = 0;        // per task
  int64_t memory_bytes = 0;    // per task; 0 = no memory requirement
  // CUDA_VISIBLE_DEVICES lists only the task's own GPUs, not all the GPUs its gang
  // holds on the node (see api::visible_gpus).
  bool gpu_isolation = false;
  RuntimeEnv runtime_env;
  std::string name;
  std::map<std::string, std::string> labels;
  int max_retries = 0;
  int priority = 0;  // higher first among pending jobs; ties in submit order
  // Whether the submitter chose the priority; if not, the job's queue gives its default.
  bool priority_set = false;
  double retry_delay_s = kDefaultRetryDelaySeconds;  // before the first retry; doubles
  RetryOn retry_on;
  std::optional<double> timeout_s;
  bool timeout_per_attempt = false;  // the timeout restarts with every attempt
  // No rank writes output and the job's processes use under 1% of a CPU for this long:
  // the job is hung (head/exec/hang_watch.h). Unset: the cluster's default, if any.
  std::optional<double> hang_timeout_s;
  // An allocation (`ag alloc`): the gang holds its resources and runs no command of its
  // own; `ag exec` runs commands in its tasks until it is released or its time is up.
  bool allocation = false;
  // `ag submit -it`: task 0 holds its place like an allocation's task, and the client
  // runs the command there on its terminal (`ag exec -it`); the other tasks run it as usual.
  bool interactive = false;
  bool fail_on_hang = false;
  // on_node_unhealthy "requeue": when a node of a running attempt turns UNHEALTHY (a
  // failing health check, a GPU error), the gang is stopped and queued again, not
  // counted against max_retries. "keep" (false, the default): it runs on.
  bool requeue_on_unhealthy = false;
  // Every GPU the job holds stays under 5% busy for this long: an event ("job.idle"),
  // and with on_idle "stop" (stop_on_idle) the job is stopped for it. Unset: the
  // head's --idle-gpu-timeout, if any.
  std::optional<double> idle_gpu_timeout_s;
  bool stop_on_idle = false;
  // A failed attempt's tasks still running are kept this long before the gang is torn
  // down (or retried), so that a user can `ag exec` into them.
  std::optional<double> hold_on_failure_s;  // on_hang "fail": end the attempt (a retry if allowed), not only report it
  Placement placement = Placement::kPack;
  std::string submission_id;  // client-chosen idempotency key, optional
  // Node labels every node of the job must have (key -> value).
  std::map<std::string, std::string> constraints;
  // Queue it even when no node of the cluster as it is could ever run it (nodes still
  // to join); otherwise such a submit is refused with the reason.
  bool allow_unschedulable = false;
  // Gates before the queue (head/scheduler/gates.h): job ids it starts after, once
  // they succeeded (after), ended (after_any) or ended without success (after_failed);
  // submitted held (released with `ag release`); not started before begin_ms (wall
  // time, ms since the epoch; 0 for at once).
  std::vector<std::string> after;
  std::vector<std::string> after_any;
  std::vector<std::string> after_failed;
  bool hold = false;
  int64_t begin_ms = 0;
  // No other job's tasks share its nodes (`ag submit --exclusive`).
  bool exclusive = false;
  // The queue it waits in (`ag submit --queue`; `ag queue create`), "" for none: its
  // nodes, default priority, per-user limits and whether it may preempt.
  std::string queue;
  // Never preempted by a higher-priority job (`ag submit --no-preempt`; admins allow it).
  bool no_preempt = false;
  // Submitted as an array: the head makes one job per index (JobController::submit_all).
  std::optional<ArraySpec> array;

  Resources per_task() const;
  // How long retry number `retry` (0 for the first) waits, in ms.
  int64_t retry_delay_ms(int retry) const;
};

// Parses and validates a job spec from JSON. Errors (kInvalidArgument) name the field
// and what is accepted: unknown fields, wrong types, out-of-range numbers, a missing
// entrypoint.
Result<JobSpec> parse_job_spec(const nlohmann::json& body);

// The spec as JSON, in the same shape parse_job_spec reads.
nlohmann::json to_json(const JobSpec& spec);

}  // namespace ag::api
