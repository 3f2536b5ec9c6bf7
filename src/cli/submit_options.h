// `ag submit`'s flags, as given, and the job spec they ask for. Turning flags into an
// api::JobSpec here (not JSON by hand) means the CLI sends exactly what the head's own
// parser reads back, and refuses a bad value with the head's message before anything
// is uploaded.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "api/job_spec.h"
#include "common/result.h"

namespace CLI {
class App;
}

namespace ag::cli {

// The flags as the user wrote them; main.cc fills it, CLI11 having checked ranges.
struct SubmitOptions {
  int num_workers = 1;
  std::optional<double> num_cpus;
  std::optional<int> num_gpus;
  std::optional<double> memory_gb;
  std::string placement = "pack";  // "pack" or "spread", as typed
  std::vector<std::string> env;    // NAME=VALUE
  std::string working_dir;         // local folder, packed and uploaded
  std::vector<std::string> excludes;
  std::string python;  // runtime_env.python.executable
  std::string image;   // runtime_env.image
  std::vector<std::string> mounts;  // SOURCE:TARGET[:ro|:rw] -> runtime_env.mounts
  std::string name;
  int max_retries = 0;
  std::string priority;  // a number or low|normal|high|urgent; "" for the default
  std::optional<double> retry_delay_s;
  std::string retry_on;  // "any", "node-lost" or exit codes "3,137"; "" for the default
  std::optional<double> timeout_s;
  bool timeout_per_attempt = false;
  std::optional<double> hang_timeout_s;
  std::string on_hang;  // "stacks" or "fail"; "" for the default (stacks)
  std::string on_node_unhealthy;  // "keep" or "requeue"; "" for the default (keep)
  std::optional<double> idle_gpu_timeout_s;
  std::string on_idle;  // "event" or "stop"; "" for the default (event)
  std::optional<double> hold_on_failure_s;
  bool gpu_isolation = false;
  bool allow_unschedulable = false;
  std::vector<std::string> constraints;  // KEY=VALUE
  // Gates: job ids (comma-separated, repeatable) it starts after; --hold; --begin TIME.
  std::vector<std::string> after;
  std::vector<std::string> after_any;
  std::vector<std::string> after_failed;
  bool hold = false;
  std::string begin;
  std::string array;  // --array 0-99%8: one job per index
  bool exclusive = false;
  std::string queue;        // --queue NAME
  bool no_preempt = false;  // --no-preempt
  bool no_wait = false;
  // -i / -t: an interactive job (api::JobSpec::interactive): task 0's command runs on
  // this input (and terminal) once the gang is placed.
  bool interactive_stdin = false;
  bool interactive_tty = false;
  bool all_ranks = false;  // stream every task's output, each line prefixed "[rank N]"
  std::vector<std::string> command;
};

// Adds `ag submit` and its flags to `app`, filling `options` when it is parsed (the
// task command after `--`: see cli/command_line.h).
CLI::App* add_submit_command(CLI::App& app, SubmitOptions& options);

// Mistakes in how the flags were used, which no head would be asked about: no command
// after `--`, an --env that is not NAME=VALUE, --exclude without --working-dir.
// Returns the first one (kInvalidArgument; `ag submit` exits 2 for these), or nullopt.
std::optional<Error> check_submit_usage(const SubmitOptions& options);

// The head's parser names REST fields ("field 'task_options.num_cpus': ..."); a user of
// `ag submit` typed a flag: the same message with the flag first ("--num-cpus
// (task_options.num_cpus): ..."). Messages about other fields stay as they are.
std::string in_flag_terms(const std::string& message);

// The command line each task runs: a single argument is taken as a shell command line
// as it is; several are shell-quoted where needed and joined with spaces.
std::string entrypoint_from_command(const std::vector<std::string>& command);

// The job spec the flags ask for, validated by the head's own parser
// (api::parse_job_spec), so a value the head would refuse fails here with the same
// message. Two fields are left for the caller: runtime_env.working_dir (the uploaded
// package, known only after packing options.working_dir) and submission_id (a fresh
// idempotency key per invocation). `now_ms` is what --begin counts from. Errors
// (kInvalidArgument): those of check_submit_usage, a --begin that is no time, then
// those of api::parse_job_spec.
Result<api::JobSpec> spec_from_submit_options(const SubmitOptions& options, int64_t now_ms);

// For a job that failed without --working-dir: when its failing task's `last_lines`
// say a file was not found and the command names that file, which exists here
// (`exists_here`, relative to the current folder), the hint to send the folder.
std::optional<std::string> working_dir_hint(const SubmitOptions& options, const std::string& last_lines,
                                            const std::function<bool(const std::string&)>& exists_here);

}  // namespace ag::cli
