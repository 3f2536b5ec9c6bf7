#include "cli/submit_options.h"

#include <charconv>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/time_args.h"
#include "cli/unit_flags.h"
#include "common/shell_quote.h"

namespace ag::cli {

CLI::App* add_submit_command(CLI::App& app, SubmitOptions& options) {
  CLI::App* command = app.add_subcommand("submit", "Submit a job: ag submit [options] -- COMMAND...");
  command->add_option("--num-workers,-n", options.num_workers, "Tasks in the gang")->capture_default_str()->check(CLI::Range(1, 4096));
  command->add_option("--num-cpus", options.num_cpus, "CPUs per task (default 1)")->check(CLI::Range(0.0, 1024.0));
  command->add_option("--num-gpus", options.num_gpus, "GPUs per task (default 0)")->check(CLI::Range(0, 64));
  command->add_option("--memory", options.memory_gb, "Memory per task, GiB (or 512M, 4G, 1.5GiB)")->transform(size_flag(int64_t{1} << 30, "GiB", 0, 1e6));
  command->add_flag("--gpu-isolation", options.gpu_isolation,
                       "Each task sees only its own GPUs (default: all its gang's GPUs on the node, its own from index LOCAL_RANK x num_gpus)");
  command->add_option("--placement", options.placement, "pack (fewest nodes) or spread")->capture_default_str()->check(CLI::IsMember({"pack", "spread"}));
  command->add_option("--env", options.env, "Environment variable NAME=VALUE (repeatable)");
  command->add_option("--working-dir", options.working_dir, "Local folder to ship to every task as its working directory");
  command->add_option("--exclude", options.excludes, "Gitignore-style pattern left out of --working-dir (repeatable)");
  command->add_option("--python", options.python, "Interpreter that `python`/`python3` run as in the tasks");
  command->add_option("--image", options.image, "Container image the tasks run in (podman or docker on the nodes)");
  command->add_option("--mount", options.mounts,
                         "Node folder into the container: SOURCE:TARGET[:ro] (repeatable; needs --image and the "
                         "workers' --allow-mount)");
  command->add_option("--name", options.name, "Job name");
  command->add_option("--priority", options.priority,
                         "Place before jobs of lower priority: low, normal (default), high, urgent, or -1000..1000");
  command->add_option("--max-retries", options.max_retries, "Whole-gang retries after a failure")->capture_default_str()->check(CLI::Range(0, 100));
  command->add_option("--retry-delay", options.retry_delay_s,
                         "Time before the first retry, doubling for each next one up to 10m (default 3s)")
      ->transform(duration_flag(0, api::kMaxRetryDelaySeconds));
  command->add_option("--retry-on", options.retry_on,
                         "Which failures are retried: any (default), node-lost, or exit codes like 3,137 "
                         "(and lost nodes)");
  command->add_option("--timeout", options.timeout_s, "How long the job may run before it is stopped and FAILED (2h, 90m)")
      ->transform(duration_flag(1, api::kMaxTimeoutSeconds, "leave --timeout out for no limit"));
  command->add_flag("--timeout-per-attempt", options.timeout_per_attempt, "Restart the --timeout with every retry");
  command->add_option("--hang-timeout", options.hang_timeout_s,
                      "No rank writes output and the job uses under 1% of a CPU this long: a hang; its ranks' "
                      "stacks go into its events (10m; default: the head's --hang-timeout, off unless set)")
      ->transform(duration_flag(1, api::kMaxTimeoutSeconds));
  command->add_option("--on-hang", options.on_hang,
                      "What a hang does: stacks (record it and every rank's stacks, the default) or fail (that, "
                      "then end the attempt; retried if --max-retries allows)")
      ->check(CLI::IsMember({"stacks", "fail"}));
  command->add_option("--idle-gpu-timeout", options.idle_gpu_timeout_s,
                      "Every GPU the job holds under 5% busy this long: an event (30m; default: the head's "
                      "--idle-gpu-timeout, off unless set)")
      ->transform(duration_flag(1, api::kMaxTimeoutSeconds));
  command->add_option("--on-idle", options.on_idle,
                      "What idle GPUs do: event (say so in the job's events, the default) or stop (stop the job)")
      ->check(CLI::IsMember({"event", "stop"}));
  command->add_option("--on-node-unhealthy", options.on_node_unhealthy,
                      "When a node it runs on turns UNHEALTHY (a failing health check, a GPU error): keep (run "
                      "on, the default) or requeue (stop the gang and queue it again; not counted as a retry)")
      ->check(CLI::IsMember({"keep", "requeue"}));
  command->add_option("--hold-on-failure", options.hold_on_failure_s,
                      "When a task fails, keep the gang's other tasks running this long (30m) before it is torn "
                      "down or retried, to look inside with `ag exec`")
      ->transform(duration_flag(1, api::kMaxHoldOnFailureSeconds));
  command->add_option("--constraint", options.constraints,
                         "Run only on nodes with this label KEY=VALUE (repeatable; see ag start-worker --label)");
  command->add_flag("--allow-unschedulable", options.allow_unschedulable,
                       "Queue the job even if no node of the cluster as it is could run it (for nodes still to join)");
  command->add_option("--after", options.after,
                         "Start once these jobs succeeded (job ids, comma-separated or repeated); fails if one cannot")
      ->delimiter(',');
  command->add_option("--after-any", options.after_any, "Start once these jobs ended, however they ended")
      ->delimiter(',');
  command->add_option("--after-failed", options.after_failed,
                         "Start once these jobs ended without success (FAILED or STOPPED)")
      ->delimiter(',');
  command->add_option("--array", options.array,
                         "One job per index, each with AG_ARRAY_INDEX: 0-99, 1,3,5, 0-98:2, and %N for at most N "
                         "at once (0-99%8)");
  command->add_flag("--exclusive", options.exclusive, "No other job's tasks share this job's nodes");
  command->add_option("--queue", options.queue, "The queue to wait in: its nodes, priority and limits (ag queue list)");
  command->add_flag("--no-preempt", options.no_preempt,
                       "Never preempted by higher-priority jobs (an admin allows it: ag quota set --allow-no-preempt)");
  command->add_flag("--hold", options.hold, "Submit held: it waits until `ag release JOB`");
  command->add_option("--begin", options.begin,
                         "Start no earlier than: a time from now (10m, 2h, now+1d) or a UTC time "
                         "(2026-12-01T20:00:00, or 20:00 for the next one)");
  command->add_flag("--all-ranks", options.all_ranks, "Stream every task's output, each line prefixed [rank N] (default: task 0's)");
  command->add_flag("--no-wait", options.no_wait, "Print the job id and return at once");
  command->add_flag("-i,--stdin", options.interactive_stdin,
                    "Run task 0's command on this input once the gang is placed (with -t: on this terminal, "
                    "`ag submit -it -n 2 -- bash`); leaving it ends the job");
  command->add_flag("-t,--tty", options.interactive_tty, "With -i: task 0's command runs on a terminal that follows this one");
  command->add_option("command", options.command, "The command each task runs (after --)");
  return command;
}

std::optional<Error> check_submit_usage(const SubmitOptions& options) {
  if (options.command.empty()) {
    return invalid_argument(
        "no command given: put the command after --, e.g. ag submit --num-workers 2 -- python train.py");
  }
  for (const auto& kv : options.env) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) return invalid_argument("--env takes NAME=VALUE, got '" + kv + "'");
  }
  for (const auto& kv : options.constraints) {
    if (kv.find('=') == std::string::npos) return invalid_argument("--constraint takes KEY=VALUE, got '" + kv + "'");
  }
  if (options.working_dir.empty() && !options.excludes.empty()) {
    return invalid_argument("--exclude only applies with --working-dir");
  }
  if (options.interactive_stdin || options.interactive_tty) {
    if (options.no_wait || options.all_ranks) {
      return invalid_argument("-i/-t attach this terminal to task 0 until the command ends; drop --no-wait and --all-ranks");
    }
    if (!options.array.empty()) return invalid_argument("-i/-t run one job interactively, not an --array");
  }
  return std::nullopt;
}

std::string entrypoint_from_command(const std::vector<std::string>& command) {
  if (command.size() == 1) return command[0];
  std::string entrypoint;
  for (const auto& arg : command) entrypoint += (entrypoint.empty() ? "" : " ") + shell_quote(arg);
  return entrypoint;
}

std::string in_flag_terms(const std::string& message) {
  static const std::pair<const char*, const char*> kFlags[] = {
      {"num_workers", "--num-workers"},
      {"task_options.num_cpus", "--num-cpus"},
      {"task_options.num_gpus", "--num-gpus"},
      {"task_options.memory", "--memory"},
      {"runtime_env.env_vars", "--env"},
      {"runtime_env.python", "--python"},
      {"runtime_env.image", "--image"},
      {"runtime_env.mounts", "--mount"},
      {"entrypoint", "the command after --"},
      {"job_name", "--name"},
      {"max_retries", "--max-retries"},
      {"priority", "--priority"},
      {"timeout", "--timeout"},
      {"retry_delay", "--retry-delay"},
      {"retry_on", "--retry-on"},
      {"constraints", "--constraint"},
      {"placement", "--placement"},
      {"after", "--after"},
      {"after_any", "--after-any"},
      {"after_failed", "--after-failed"},
      {"begin_ms", "--begin"},
      {"queue", "--queue"},
      {"no_preempt", "--no-preempt"},
      {"array", "--array"},
  };
  const std::string prefix = "field '";
  if (message.rfind(prefix, 0) != 0) return message;
  const size_t end = message.find('\'', prefix.size());
  if (end == std::string::npos) return message;
  const std::string field = message.substr(prefix.size(), end - prefix.size());
  for (const auto& [name, flag] : kFlags) {
    const std::string rest = field.substr(0, std::strlen(name));
    if (rest == name && (field.size() == rest.size() || field[rest.size()] == '.' || field[rest.size()] == '[')) {
      return std::string(flag) + " (" + field + ")" + message.substr(end + 1);
    }
  }
  return message;
}

namespace {

// --retry-on as the REST field: "any", "node_lost" or a list of exit codes.
Result<nlohmann::json> retry_on_json(const std::string& text) {
  if (text == "any") return nlohmann::json("any");
  if (text == "node-lost" || text == "node_lost") return nlohmann::json("node_lost");
  nlohmann::json codes = nlohmann::json::array();
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    int code = 0;
    auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), code);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size()) {
      return invalid_argument("--retry-on takes any, node-lost or exit codes like 3,137; got '" + text + "'");
    }
    codes.push_back(code);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return codes;
}

}  // namespace

Result<api::JobSpec> spec_from_submit_options(const SubmitOptions& options, int64_t now_ms) {
  if (auto err = check_submit_usage(options)) return *err;
  api::JobSpec spec;
  spec.entrypoint = entrypoint_from_command(options.command);
  spec.num_workers = options.num_workers;
  if (options.num_cpus) spec.num_cpus = *options.num_cpus;
  if (options.num_gpus) spec.num_gpus = *options.num_gpus;
  if (options.memory_gb) spec.memory_bytes = static_cast<int64_t>(*options.memory_gb * (int64_t{1} << 30));
  for (const auto& kv : options.env) {
    size_t eq = kv.find('=');
    spec.runtime_env.env_vars[kv.substr(0, eq)] = kv.substr(eq + 1);  // a later --env NAME wins
  }
  spec.runtime_env.python_executable = options.python;
  spec.runtime_env.image = options.image;
  for (const auto& text : options.mounts) {
    // SOURCE:TARGET, then :ro or :rw (paths may hold no ':').
    std::vector<std::string> parts;
    for (size_t start = 0;;) {
      size_t colon = text.find(':', start);
      parts.push_back(text.substr(start, colon == std::string::npos ? std::string::npos : colon - start));
      if (colon == std::string::npos) break;
      start = colon + 1;
    }
    if (parts.size() < 2 || parts.size() > 3 || (parts.size() == 3 && parts[2] != "ro" && parts[2] != "rw")) {
      return invalid_argument("--mount takes SOURCE:TARGET or SOURCE:TARGET:ro (node path, container path), got '" +
                              text + "'");
    }
    spec.runtime_env.mounts.push_back({parts[0], parts[1], parts.size() == 3 && parts[2] == "ro"});
  }
  // --exclude only shapes the package the CLI builds; the head has no use for it.
  spec.name = options.name;
  spec.max_retries = options.max_retries;
  if (!options.priority.empty()) {
    spec.priority_set = true;
    if (auto level = api::priority_level(options.priority)) {
      spec.priority = *level;
    } else {
      int n = 0;
      auto [end, ec] = std::from_chars(options.priority.data(), options.priority.data() + options.priority.size(), n);
      if (ec != std::errc() || end != options.priority.data() + options.priority.size() || n < api::kMinPriority ||
          n > api::kMaxPriority) {
        return invalid_argument("--priority takes low, normal, high, urgent or a whole number from " +
                                std::to_string(api::kMinPriority) + " to " + std::to_string(api::kMaxPriority) +
                                "; got '" + options.priority + "'");
      }
      spec.priority = n;
    }
  }
  spec.timeout_s = options.timeout_s;
  spec.timeout_per_attempt = options.timeout_per_attempt;
  spec.hang_timeout_s = options.hang_timeout_s;
  spec.interactive = options.interactive_stdin || options.interactive_tty;
  spec.fail_on_hang = options.on_hang == "fail";
  spec.requeue_on_unhealthy = options.on_node_unhealthy == "requeue";
  spec.idle_gpu_timeout_s = options.idle_gpu_timeout_s;
  spec.stop_on_idle = options.on_idle == "stop";
  spec.hold_on_failure_s = options.hold_on_failure_s;
  spec.gpu_isolation = options.gpu_isolation;
  spec.allow_unschedulable = options.allow_unschedulable;
  for (const auto& kv : options.constraints) {
    const size_t eq = kv.find('=');
    spec.constraints[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  spec.after = options.after;
  spec.after_any = options.after_any;
  spec.after_failed = options.after_failed;
  spec.hold = options.hold;
  spec.exclusive = options.exclusive;
  spec.queue = options.queue;
  spec.no_preempt = options.no_preempt;
  if (!options.array.empty()) {
    auto array = api::parse_array_spec(options.array);
    if (!array.ok()) return invalid_argument("--array: " + array.error().message);
    spec.array = std::move(array.value());
  }
  if (!options.begin.empty()) {
    auto begin = parse_begin(options.begin, now_ms);
    if (!begin.ok()) return begin.error();
    spec.begin_ms = begin.value();
  }

  // The placement goes in as typed: main.cc lets only "pack" and "spread" through,
  // and anything else is refused by the parser in the head's words.
  if (options.retry_delay_s) spec.retry_delay_s = *options.retry_delay_s;
  nlohmann::json body = api::to_json(spec);
  body["placement"] = options.placement;
  if (!options.retry_on.empty()) {
    auto retry_on = retry_on_json(options.retry_on);
    if (!retry_on.ok()) return retry_on.error();
    body["retry_on"] = retry_on.value();
  }
  auto spec_checked = api::parse_job_spec(body);
  if (!spec_checked.ok()) return Error{spec_checked.error().code, in_flag_terms(spec_checked.error().message)};
  return spec_checked;
}

std::optional<std::string> working_dir_hint(const SubmitOptions& options, const std::string& last_lines,
                                            const std::function<bool(const std::string&)>& exists_here) {
  if (!options.working_dir.empty()) return std::nullopt;
  const bool not_found = last_lines.find("No such file") != std::string::npos ||
                         last_lines.find("can't open file") != std::string::npos ||
                         last_lines.find("not found") != std::string::npos;
  if (!not_found) return std::nullopt;
  std::istringstream words(entrypoint_from_command(options.command));
  for (std::string word; words >> word;) {
    if (word.front() == '-' || word.front() == '/' || word.front() == '~' || word.find('=') != std::string::npos) continue;
    if (word.rfind("./", 0) == 0) word.erase(0, 2);
    if (word.empty() || last_lines.find(word) == std::string::npos || !exists_here(word)) continue;
    return word + " is in this folder but not on the workers: add `--working-dir .` to send this folder with the job";
  }
  return std::nullopt;
}

}  // namespace ag::cli
