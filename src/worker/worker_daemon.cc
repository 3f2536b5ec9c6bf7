#include "worker/worker_daemon.h"

#include <fcntl.h>
#include <sys/file.h>

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <malloc.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "api/protocol.h"
#include "common/descriptors.h"
#include "common/ids.h"
#include "common/scheduling.h"
#include "common/version.h"
#include "net/asio_timers.h"
#include "worker/agent.h"
#include "worker/busy_ports.h"
#include "worker/gpu_watch.h"
#include "worker/nvml.h"
#include "worker/head_dialer.h"
#include "worker/network_interface.h"
#include "worker/package_cache.h"
#include "worker/task_runner.h"
#include "worker/usage_sampler.h"
#include "worker/resource_detector.h"
#include "worker/container_engine.h"
#include "worker/exec_session.h"
#include "worker/stack_dumps.h"
#include "worker/task_cgroup.h"
#include "worker/task_limits.h"
#include "worker/task_accounts.h"

extern char** environ;

namespace ag::worker {
namespace {

// The fewest descriptors a worker starts with: its event loop, signals, timers, the
// channel and log stream to the head, and a few for each running task.
constexpr uint64_t kWorkerMinDescriptors = 128;

// The node id survives restarts of the agent so that a restarted worker is the same node.
Result<std::string> load_or_create_node_id(const std::string& data_dir) {
  std::string path = data_dir + "/node_id";
  std::ifstream in(path);
  std::string id;
  if (in && std::getline(in, id) && !id.empty()) return id;
  id = new_node_id();
  std::ofstream out(path);
  out << id << "\n";
  if (!out) return internal_error("cannot write " + path);
  return id;
}

// The agent's own environment, handed down to its tasks (less its AG_* settings).
api::Environment own_environment() {
  std::vector<std::string> entries;
  for (char** e = environ; *e; ++e) entries.emplace_back(*e);
  return api::environment_from_entries(entries);
}

std::string hostname() {
  char buf[256] = {0};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

}  // namespace

int run_worker(const WorkerConfig& config, const std::function<void(const Status&, const std::string&)>& on_ready) {
  // Before anything else opens one: its event loop, signals and timers need a few, and
  // each running task's log and supervisor more.
  if (auto descriptors = claim_descriptors("the worker", kWorkerMinDescriptors); !descriptors.ok()) {
    on_ready(descriptors.error(), "");
    return 1;
  }
  // The agent, and the task supervisors it starts (they inherit it); tasks get the
  // usual policy back (worker/task_start.h).
  if (std::string why = yield_to_tasks(); !why.empty()) spdlog::warn("the agent preempts tasks as it wakes: {}", why);
  auto head_list = net::parse_endpoints(config.head_address, 6379);
  if (!head_list.ok()) {
    on_ready(head_list.error(), "");
    return 1;
  }
  for (auto& head : head_list.value()) head.ca_pem = config.head_ca_pem;
  HeadAddresses heads(head_list.value());
  std::error_code fs_error;
  std::filesystem::create_directories(config.data_dir, fs_error);
  if (fs_error) {
    on_ready(internal_error("cannot create data dir " + config.data_dir + ": " + fs_error.message()), "");
    return 1;
  }
  // Tasks' collectives are told the interface that holds the node's address: an address
  // on none of this machine's interfaces cannot be reached here, so nothing starts.
  auto find_interface = [node_ip = config.node_ip, wanted = config.network_interface] {
    return interface_for_address(local_interface_addresses(), node_ip, wanted);
  };
  auto network_interface = find_interface();
  if (!network_interface.ok()) {
    on_ready(network_interface.error(), "");
    return 1;
  }
  auto node_id = load_or_create_node_id(config.data_dir);
  if (!node_id.ok()) {
    on_ready(node_id.error(), "");
    return 1;
  }
  std::string task_user_note;
  auto accounts = TaskAccounts::open(config.data_dir, config.task_user, &task_user_note);
  if (!accounts.ok()) {
    on_ready(accounts.error(), "");
    return 1;
  }
  if (auto task_user = accounts.value()->representative()) {
    if (Status s = open_path_to_task_user(config.data_dir, *task_user); !s) {
      on_ready(s, "");
      return 1;
    }
    // Tasks of other accounts reach their folders (work/, packages/jobs/, homes/)
    // through the data dir, which they may cross but not list; everything else stays
    // closed.
    for (const auto& [dir, mode] : {std::pair{std::string(""), 0711}, {"/work", 0711}, {"/packages", 0711},
                                   {"/packages/jobs", 0711}, {"/homes", 0711}, {"/tasks", 0700},
                                   {"/packages/archives", 0700}}) {
      std::string path = config.data_dir + dir;
      std::filesystem::create_directories(path, fs_error);
      if (::chmod(path.c_str(), static_cast<mode_t>(mode)) != 0) {
        on_ready(internal_error("cannot set the mode of " + path + ": " + std::strerror(errno)), "");
        return 1;
      }
    }
  }
  spdlog::info("{}", task_user_note);
  // Orphaned grandchildren of tasks are re-parented to this process, so they are
  // reaped here and stay findable for kills.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);

  AgentConfig agent_config;
  agent_config.node_id = node_id.value();
  agent_config.node_ip = config.node_ip;
  agent_config.network_interface = network_interface.value();
  agent_config.find_network_interface = find_interface;
  agent_config.hostname = hostname();
  agent_config.data_dir = config.data_dir;
  agent_config.inherited_env = own_environment();
  // A debugging switch: task output in frames on the channel, as for an older head.
  if (const char* stream = std::getenv("AG_WORKER_LOG_STREAM"); stream && std::string(stream) == "off") {
    agent_config.log_stream = false;
  }
  std::string no_cgroups;
  const std::string cgroup_root = prepare_cgroup_root(node_id.value(), &no_cgroups);
  if (cgroup_root.empty()) {
    spdlog::info("task control groups: not available here ({}); tasks are followed by process group and task "
                 "marker instead",
                 no_cgroups);
  } else {
    spdlog::info("task control groups: {}", cgroup_root);
  }
  LimitRoots limit_roots;
  if (config.enforce_limits) {
    limit_roots = prepare_limit_roots(node_id.value(), cgroup_root);
  } else {
    limit_roots.summary = "not enforced: the worker runs with --no-task-limits";
  }
  agent_config.limits = limit_roots.summary;
  spdlog::log(config.enforce_limits && (limit_roots.memory.empty() || limit_roots.cpu.empty()) ? spdlog::level::warn
                                                                                              : spdlog::level::info,
              "task limits (task_options.memory, num_cpus): {}", limit_roots.summary);
  double cpus = config.num_cpus.value_or(detect_cpus());
  agent_config.resources.cpu_millis = static_cast<int64_t>(std::llround(cpus * 1000));
  agent_config.resources.memory_bytes = config.memory_bytes.value_or(detect_memory_bytes());
  std::string why_no_gpus;
  auto gpus = detect_gpus(&why_no_gpus);
  int gpu_count = config.num_gpus.value_or(static_cast<int>(gpus.size()));
  for (int i = 0; i < gpu_count; ++i) agent_config.gpu_ids.push_back(i);
  agent_config.resources.gpus = gpu_count;
  agent_config.labels = config.labels;
  agent_config.allowed_mounts = config.allowed_mounts;
  std::string why_no_engine;
  std::optional<ContainerEngine> engine = detect_container_engine(config.container_engine, &why_no_engine);
  if (engine) {
    spdlog::info("container engine: {} ({}); jobs may mount {}", engine->summary(), engine->path,
                 config.allowed_mounts.empty() ? std::string("nothing (--allow-mount)")
                                               : fmt::format("{}", fmt::join(config.allowed_mounts, ", ")));
  } else {
    spdlog::info("no container engine: {}; jobs with an image will not be placed here", why_no_engine);
  }
  agent_config.wait_for_head = config.wait_for_head;
  // For tests only: claim another worker protocol version, to see the head refuse it
  // (tests/integration/test_install.py). Nothing else reads it.
  if (const char* claimed = std::getenv("AG_TEST_WORKER_PROTOCOL"); claimed && *claimed) {
    agent_config.protocol_version = std::atoi(claimed);
    spdlog::warn("AG_TEST_WORKER_PROTOCOL: claiming worker protocol version {} (for tests only)",
                 agent_config.protocol_version);
  }
  char cpus_text[32];
  std::snprintf(cpus_text, sizeof cpus_text, "%g", cpus);
  std::string summary = std::string(cpus_text) + " CPUs, " + std::to_string(agent_config.resources.memory_bytes >> 20) +
                        " MiB memory, " + std::to_string(gpu_count) + " GPUs";
  spdlog::info("{}: worker {} at {} ({}): {}{}", version_line(), node_id.value(), config.node_ip,
               agent_config.network_interface, summary, gpus.empty() ? " (" + why_no_gpus + ")" : "");

  // One agent per data dir: the lock is held for the agent's life (the kernel lets go
  // of it however the agent ends), so a second one is refused, naming the first.
  std::string pid_file = config.data_dir + "/agent.pid";
  const int lock_fd = ::open((config.data_dir + "/agent.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd < 0 || ::flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    std::string holder;
    std::ifstream(pid_file) >> holder;
    on_ready(Error{ErrorCode::kConflict, "another worker agent" + (holder.empty() ? "" : " (pid " + holder + ")") +
                                             " already runs with data dir " + config.data_dir +
                                             "; stop it first (`ag stop`), or give this one its own --data-dir"},
             "");
    return 1;
  }
  // Task supervisors watch this file: while it names a live agent, their tasks are
  // looked after; once no agent has run for the node timeout, they end their tasks.
  std::ofstream(pid_file) << ::getpid() << "\n";

  // `ag exec` output passes through in pieces of up to 256 KiB, one allocation each:
  // from the heap, not a fresh mapping the kernel zeroes and takes back each time.
  ::mallopt(M_MMAP_THRESHOLD, 1 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 4 << 20);
  boost::asio::io_context io(1);
  auto runner = TaskRunner::create(io, config.data_dir, cgroup_root, limit_roots);
  if (!runner.ok()) {
    on_ready(runner.error(), "");
    return 1;
  }
  if (accounts.value()->switches()) runner.value()->run_tasks_as(accounts.value().get());
  auto stack_dumps = StackDumps::create(io, config.data_dir);
  if (!stack_dumps.ok()) {
    on_ready(stack_dumps.error(), "");
    return 1;
  }
  runner.value()->arm_stacks_with(stack_dumps.value().get());
  net::AsioTimers timers(io);
  auto credential = NodeCredential::load(config.data_dir, config.token);
  if (!credential.ok()) {
    on_ready(credential.error(), "");
    return 1;
  }
  WsHeadDialer dialer(io, heads, *credential.value(), config.node_ip);
  PackageCacheConfig package_config{config.data_dir + "/packages", config.package_cache_bytes,
                                    [&heads] { return heads.current(); },
                                    [cred = credential.value().get()] { return cred->token(); },
                                    accounts.value()->switches() ? accounts.value().get() : nullptr};
  package_config.unpack.max_ratio = config.max_unpack_ratio;
  PackageCache packages(io, package_config);
  ContainerImages images(io, engine);
  UsageSampler usage;
  Agent::Deps deps{timers,
                   dialer,
                   *runner.value(),
                   packages,
                   images,
                   [&usage, &runner] {
                     api::NodeUsage node = usage.sample();
                     std::vector<std::pair<api::TaskKey, int64_t>> pids;
                     std::map<int64_t, std::string> cgroups;
                     for (const auto& task : runner.value()->running()) {
                       pids.emplace_back(task.id, task.pid);
                       if (!task.cgroup.empty()) cgroups[task.pid] = task.cgroup;
                     }
                     node.tasks = usage.sample_tasks(pids, cgroups);
                     return node;
                   },
                   [] { return busy_ports(api::kMasterPortFirst, api::kMasterPortLast); },
                   [&io] { io.stop(); }};
  ExecSessions exec({io, *runner.value(), [&heads] { return heads.current(); },
                     [cred = credential.value().get()] { return cred->token(); }});
  deps.open_exec = [&exec](const api::ExecOpen& request) { exec.open(request); };
  deps.take_stacks = [&runner, &stack_dumps](const api::StackRequest& request,
                                             std::function<void(api::StackReport)> done) {
    auto target = runner.value()->exec_target(request.task);
    if (!target.ok()) return done(api::StackReport{request.request, request.task, false, "", target.error().message});
    stack_dumps.value()->take(request, target.value().processes, std::move(done));
  };
  // Node health: the admin's checks (--health-check) and the GPUs' own (NVML); a
  // registration carries a GPU fault first, as it lasts until an admin resumes the node.
  std::unique_ptr<HealthChecks> health;
  std::unique_ptr<GpuWatch> gpu_watch;
  Agent* agent_ptr = nullptr;
  if (!config.health.commands.empty()) {
    health = std::make_unique<HealthChecks>(io, timers, config.health, [&agent_ptr](const api::HealthReport& report) {
      if (report.healthy) {
        spdlog::info("health checks pass again: the node is healthy");
      } else {
        spdlog::warn("node unhealthy: {}", report.reason);
      }
      if (agent_ptr) agent_ptr->report_health(report);
    });
  }
  if (const Nvml* nvml = Nvml::get(); nvml && !gpus.empty()) {
    gpu_watch = std::make_unique<GpuWatch>(timers, *nvml, [&agent_ptr](const api::HealthReport& report) {
      if (agent_ptr) agent_ptr->report_health(report);
    });
  }
  deps.health_cleared = [&health, &gpu_watch] {
    spdlog::info("an admin cleared this node's UNHEALTHY mark");
    if (health) health->clear();
    if (gpu_watch) gpu_watch->clear();
  };
  deps.unhealthy = [&health, &gpu_watch]() -> std::optional<api::HealthReport> {
    if (gpu_watch && gpu_watch->unhealthy()) return gpu_watch->unhealthy();
    return health ? health->unhealthy() : std::nullopt;
  };
  bool ready_reported = false;
  Agent agent(std::move(deps), agent_config, [&](const Status& status) {
    ready_reported = true;
    // Who tasks run as is said where the worker was started, not only in its log.
    on_ready(status, "node " + node_id.value() + " (" + config.node_ip + "): " + summary + "\n  " + task_user_note);
  });
  // SIGTERM, SIGINT: stop every task, then exit (`ag stop`, `systemctl stop`).
  // SIGUSR2: exit now and leave the tasks running for the next agent, which adopts them
  // (`systemctl restart`: the unit's RestartKillSignal); their supervisor ends them if
  // no agent comes back within the node timeout.
  bool leaving = false;
  boost::asio::signal_set signals(io, SIGTERM, SIGINT, SIGUSR2);
  signals.async_wait([&](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    if (sig == SIGUSR2) {
      spdlog::info("received SIGUSR2: exiting; the {} running task(s) go on for the next agent to adopt",
                   runner.value()->running().size());
      leaving = true;
      io.stop();
      return;
    }
    spdlog::info("received signal {}: stopping all tasks, then exiting", sig);
    agent.shutdown(config.stop_grace_ms);
  });
  agent_ptr = &agent;
  agent.start();
  if (health) health->start();
  if (gpu_watch) gpu_watch->start();
  io.run();
  if (leaving) {
    spdlog::info("worker exited, its tasks left running");
    return 0;
  }
  std::filesystem::remove(pid_file, fs_error);
  runner.value()->finish(2000);
  // Empty once every task has ended and the supervisor has gone.
  if (!limit_roots.unified) {
    remove_cgroup(limit_roots.memory);
    remove_cgroup(limit_roots.cpu);
  } else {
    remove_cgroup(limit_roots.home);
  }
  remove_cgroup(cgroup_root);
  spdlog::info("worker stopped");
  if (!agent.gave_up()) return 0;
  return agent.gave_up()->code == ErrorCode::kUnavailable ? 1 : kExitRefused;
}

}  // namespace ag::worker
