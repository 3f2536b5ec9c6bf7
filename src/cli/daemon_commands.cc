// ag start-head, ag start-worker, ag stop: starting daemons in the background (or in
// the foreground with --block) and stopping the ones this machine started.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <thread>

#include <spdlog/spdlog.h>

#include "api/container_spec.h"
#include "cli/commands.h"
#include "cli/store_url.h"
#include "common/descriptors.h"
#include "common/logging.h"
#include "common/private_dir.h"
#include "head/head_daemon.h"
#include "head/leader/restart.h"
#include "net/addresses.h"
#include "net/auth.h"
#include "net/http_client.h"
#include "net/tls.h"
#include "worker/worker_daemon.h"

namespace ag::cli {
namespace {

constexpr const char* kNotStoppable = "`ag stop` will not find this daemon; stop it by its pid";

// Session bookkeeping that fails leaves the daemon running: say what the user loses.
void warn_if_failed(const Status& status, const std::string& consequence) {
  if (!status) std::cerr << "warning: " << status.error().message << "; " << consequence << "\n";
}

// The session dir first (the data dirs default to folders in it), then the data dir;
// both private to this user.
Status make_data_dir(const std::string& dir) {
  if (Status s = ensure_private_dir(session_dir()); !s) return Error{s.error().code, "session dir: " + s.error().message};
  if (Status s = ensure_private_dir(dir); !s) {
    return Error{s.error().code, "data dir: " + s.error().message + " (or pass another --data-dir)"};
  }
  return {};
}

// Runs `body` as a background daemon. The daemon reports readiness with one line on a
// pipe ("OK <text>" or "ERR <message>"); the parent waits for it so that the command
// returns only once the daemon is serving, or says why it is not.
struct Launch {
  bool ok = false;
  int pid = 0;
  std::string text;
};

template <typename Body>
Launch daemonize(const std::string& log_path, double wait_s, Body body) {
  int fds[2];
  if (::pipe(fds) != 0) return {false, 0, std::string("cannot create a pipe: ") + std::strerror(errno) + descriptor_limit_hint(errno)};
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) {
    const int error = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return {false, 0, std::string("cannot start a process: ") + std::strerror(error) +
                          (error == EAGAIN ? " (this user's processes or the machine's are at their limit: see "
                                             "`ulimit -u`, kernel.pid_max and kernel.threads-max, and pids.max of "
                                             "the control group this runs in)"
                                           : "")};
  }
  if (pid == 0) {
    ::close(fds[0]);
    ::setsid();
    int devnull = ::open("/dev/null", O_RDWR);
    int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0640);
    ::dup2(devnull, 0);
    ::dup2(log >= 0 ? log : devnull, 1);
    ::dup2(log >= 0 ? log : devnull, 2);
    int report_fd = fds[1];
    auto report = [report_fd](bool ok, const std::string& text) {
      // One line on the pipe: the text's own line breaks travel as \x1e.
      std::string line = (ok ? "OK " : "ERR ") + text + "\n";
      std::replace(line.begin(), line.end() - 1, '\n', '\x1e');
      ssize_t ignored = ::write(report_fd, line.data(), line.size());
      (void)ignored;
      ::close(report_fd);
    };
    ::_exit(body(report));
  }
  ::close(fds[1]);
  std::string line;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
  char c;
  // Poll the pipe with a deadline: a worker that cannot reach the head keeps retrying
  // and may never write.
  ::fcntl(fds[0], F_SETFL, O_NONBLOCK);
  while (std::chrono::steady_clock::now() < deadline) {
    ssize_t n = ::read(fds[0], &c, 1);
    if (n == 1) {
      if (c == '\n') break;
      line.push_back(c);
    } else if (n == 0) {
      break;
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  ::close(fds[0]);
  std::replace(line.begin(), line.end(), '\x1e', '\n');
  if (line.rfind("OK ", 0) == 0) return {true, pid, line.substr(3)};
  if (line.rfind("ERR ", 0) == 0) return {false, pid, line.substr(4)};
  return {false, pid, ""};
}

// True while `pid` exists and is not a zombie waiting to be reaped.
bool process_alive(int pid) {
  if (::kill(pid, 0) != 0) return false;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] != 'Z';
}

// True when `pid` is still an AetherGrid daemon (and not a reused pid).
bool is_our_daemon(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline");
  std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return cmdline.find("start-head") != std::string::npos || cmdline.find("start-worker") != std::string::npos;
}

std::string absolute(const std::string& path) {
  return std::filesystem::absolute(path).lexically_normal().string();
}

// The --store options, checked and put in `config`; false (having said why) when they
// are wrong.
bool store_options(const StartHeadOptions& options, head::HeadConfig& config) {
  if (options.store.empty()) {
    for (const auto& [given, flag] : {std::pair{!options.shared_dir.empty(), "--shared-dir"},
                                      {!options.store_password_file.empty(), "--store-password-file"}}) {
      if (given) {
        std::cerr << "error: " << flag << " is for heads sharing a store: give --store postgresql://... too\n";
        return false;
      }
    }
    return true;
  }
  const std::string& url = options.store;
  if (std::string problem = store_url_problem(url); !problem.empty()) {
    std::cerr << "error: " << problem << "\n";
    return false;
  }
  if (options.shared_dir.empty()) {
    std::cerr << "error: --store needs --shared-dir DIR: a directory every head mounts (e.g. NFS), for the cluster "
                 "CA, the tokens, working_dir packages and task logs, so that a standby can take over (README, High "
                 "availability)\n";
    return false;
  }
  if (!options.store_password_file.empty()) {
    auto password = net::read_private_token_file(options.store_password_file);
    if (!password.ok()) {
      std::cerr << "error: --store-password-file: " << password.error().message << "\n";
      return false;
    }
    config.store_password = password.value();
  }
  config.store_url = url;
  config.shared_dir = absolute(options.shared_dir);
  config.leader_lease_ms = static_cast<int64_t>(options.leader_lease_s * 1000);
  // A worker that hears from no head for the node timeout stops its tasks; a takeover
  // takes up to the lease and a poll: the node timeout must outlast it.
  const int64_t takeover_ms = config.leader_lease_ms + 5000;
  if (config.node_timeout_ms < takeover_ms) {
    if (options.node_timeout_given) {
      std::cerr << "error: --node-timeout " << options.node_timeout_s << "s is shorter than a takeover (--leader-lease "
                << options.leader_lease_s << "s + 5s): workers would stop their tasks while a standby takes over; "
                << "give a --node-timeout of at least " << takeover_ms / 1000 << "s or a shorter --leader-lease\n";
      return false;
    }
    config.node_timeout_ms = std::max<int64_t>(config.node_timeout_ms, 2 * config.leader_lease_ms);
  }
  return true;
}

}  // namespace

int start_head(const StartHeadOptions& options) {
  head::HeadConfig config;
  config.node_ip = options.bind.empty() ? options.node_ip : options.bind;
  config.advertise = options.advertise;
  // What the join line and the dashboard link name: --node-ip-address, unless it is a
  // wildcard, or a loopback address (the default) while --bind opens other interfaces.
  const bool show_node_ip = !net::is_wildcard_address(options.node_ip) &&
                            (options.bind.empty() || !net::is_loopback_host(options.node_ip) ||
                             net::is_loopback_host(options.bind));
  const std::string shown = show_node_ip ? options.node_ip : net::advertised_address(options.advertise);
  if (shown != config.node_ip && std::find(config.advertise.begin(), config.advertise.end(), shown) == config.advertise.end()) {
    config.advertise.push_back(shown);  // in the head's certificate
  }
  config.port = options.port;
  config.dashboard_port = options.dashboard_port;
  config.data_dir = absolute(options.data_dir.empty() ? session_dir() + "/head" : options.data_dir);
  config.node_timeout_ms = static_cast<int64_t>(options.node_timeout_s * 1000);
  config.kill_grace_ms = static_cast<int64_t>(options.kill_grace_s * 1000);
  if (options.hang_timeout_s > 0) config.hang_timeout_s = options.hang_timeout_s;
  if (options.idle_gpu_timeout_s > 0) config.idle_gpu_timeout_s = options.idle_gpu_timeout_s;
  if (!options.log_export.empty()) config.log_export_dir = absolute(options.log_export);
  config.log_export_max_bytes = static_cast<int64_t>(options.log_export_max_mb * (1 << 20));
  config.usage_half_life_ms = static_cast<int64_t>(options.usage_half_life_days * 24 * 3600 * 1000);
  config.preempt_grace_ms = static_cast<int64_t>(options.preempt_grace_s * 1000);
  config.verbose = options.verbose;
  config.max_package_bytes = static_cast<int64_t>(options.max_package_mb * (1 << 20));
  config.package_store_bytes = static_cast<int64_t>(options.package_store_gb * (1 << 30));
  auto retention_s = parse_lifetime_s("--job-retention", options.job_retention);
  if (!retention_s.ok()) {
    std::cerr << "error: " << retention_s.error().message << "\n";
    return 2;
  }
  config.job_retention_ms = retention_s.value() * 1000;
  config.max_task_log_bytes = static_cast<int64_t>(options.max_task_log_mb * (1 << 20));
  if (config.package_store_bytes < config.max_package_bytes) {
    std::cerr << "error: --package-store-gb " << options.package_store_gb << " cannot hold one package of "
              << "--max-package-mb " << options.max_package_mb << "; give a larger store or a smaller package limit\n";
    return 2;
  }
  config.insecure = options.insecure;
  config.tls_cert = options.tls_cert;
  config.tls_key = options.tls_key;
  if (config.tls_cert.empty() != config.tls_key.empty()) {
    std::cerr << "error: give --tls-cert and --tls-key together\n";
    return 2;
  }
  if (!store_options(options, config)) return 2;
  if (Status s = make_data_dir(config.data_dir); !s) {
    std::cerr << "error: " << s.error().message << "\n";
    return 1;
  }
  std::string address = shown + ":" + std::to_string(options.port);
  config.address = address;
  const std::string state = config.state_dir();
  std::string dashboard = std::string(options.insecure ? "http://" : "https://") + shown + ":" +
                          std::to_string(options.dashboard_port);
  // The CLI and SDK on this machine reach a head on every interface over loopback.
  std::string local_address = net::is_wildcard_address(config.node_ip) ? "127.0.0.1:" + std::to_string(options.port) : address;

  auto announce = [&](const std::string& token, bool standby, int pid) {
    std::string ca_file = options.insecure ? "" : state + "/tls/ca.crt";
    warn_if_failed(write_session({local_address, dashboard, state, state + "/token", ca_file}),
                   "the CLI and SDK on this machine will not find the head by themselves");
    auto join = net::read_private_token_file(state + "/join-token");
    std::string pin;
    if (!options.insecure) {
      std::ifstream ca_in(ca_file);
      std::string ca_pem((std::istreambuf_iterator<char>(ca_in)), std::istreambuf_iterator<char>());
      auto fingerprint = net::certificate_fingerprint(ca_pem);
      if (fingerprint.ok()) pin = " --ca-fingerprint " + fingerprint.value();
    }
    // Under a systemd unit stdout is the journal, which more people may read than the
    // token files: there the lines name the files instead of the tokens.
    const bool to_journal = is_journal_stream(STDOUT_FILENO);
    std::cout << "AetherGrid head started at " << address << " (pid " << pid << ")"
              << (standby ? ", standing by: another head sharing the store leads; this one takes over if it stops" : "")
              << "\n  Dashboard and REST API: " << dashboard << "\n";
    if (!config.store_url.empty()) {
      std::cout << "  Store: " << config.store_url << " (lease " << options.leader_lease_s << "s); shared dir "
                << config.shared_dir << "\n";
    }
    if (!to_journal && options.insecure) {
      std::cout << "  Sign in to the dashboard (as admin): " << dashboard << "/?token=" << token << "\n";
    } else if (!to_journal) {
      // A browser does not trust the cluster's own CA: on this machine the dashboard also
      // answers plain HTTP; elsewhere the browser is told to trust the CA first.
      std::cout << "  Sign in on this machine (as admin): http://" << shown << ":" << options.dashboard_port
                << "/?token=" << token << "\n"
                << "  From other machines: " << dashboard << "/?token=... once the browser trusts the cluster CA "
                << "(ag tls ca-cert > aethergrid-ca.crt; README, Dashboard)\n";
    }
    std::cout << "  Admin token: " << state << "/token; add users with `ag user add NAME`\n"
              << "  Data dir: " << config.data_dir << "  (log: " << config.data_dir << "/head.log)\n\n"
              << "To add a worker on another machine, run there (the join token can only add nodes):\n";
    if (to_journal) {
      std::cout << "  (copy the join token from " << state << "/join-token into ~/.aethergrid-join-token, "
                << "mode 0600)\n";
    } else {
      std::cout << "  (umask 077; echo " << (join.ok() ? join.value() : "JOIN_TOKEN") << " > ~/.aethergrid-join-token)\n";
    }
    std::cout << "  ag start-worker --head-node " << address << " --token-file ~/.aethergrid-join-token" << pin << "\n\n"
              << (options.insecure ? "WARNING: TLS is off (--insecure): tokens and data travel in clear text between "
                                     "machines.\n\n"
                                   : "Users elsewhere pin the head once with `ag config --address " + address + pin +
                                         "`.\n\n")
              << "Open TCP ports " << options.port << " (workers, CLI, SDK) and " << options.dashboard_port
              << " (dashboard) on this machine to the workers and users.\n"
              << "Stop the daemons started here with `ag stop`.\n";
  };

  if (std::getenv(head::kRestartedEnv) != nullptr) {
    // A head that stopped leading, run again as a standby (head/leader/restart.h): already
    // in the background with its log open, and nothing to announce.
    init_logging({options.block ? config.data_dir + "/head.log" : "", true, options.verbose});
    return head::run_head(config, [](const Status& status, const head::HeadStarted&) {
      if (!status) spdlog::error("the head cannot go on: {}", status.error().message);
    });
  }
  if (options.block) {
    // In the foreground (a systemd unit): stderr (the journal) and the data dir's log.
    if (std::string problem = init_logging({config.data_dir + "/head.log", true, options.verbose}); !problem.empty()) {
      std::cerr << "warning: " << problem << "\n";
    }
    return head::run_head(config, [&](const Status& status, const head::HeadStarted& started) {
      if (!status) {
        std::cerr << "error: " << status.error().message << "\n";
        return;
      }
      warn_if_failed(record_daemon("head", ::getpid()), kNotStoppable);
      announce(started.admin_token, started.standby, ::getpid());
      std::cout.flush();
    });
  }
  Launch launch = daemonize(config.data_dir + "/head.log", 30, [&](auto report) {
    init_logging({"", true, options.verbose});  // stderr is the log file now
    return head::run_head(config, [&](const Status& status, const head::HeadStarted& started) {
      // Tokens hold no space: a standby's says so after one.
      report(status.ok(), status.ok() ? started.admin_token + (started.standby ? " standby" : "") : status.error().message);
    });
  });
  if (!launch.ok) {
    std::cerr << "error: the head did not start: "
              << (launch.text.empty() ? "no answer within 30 s; see " + config.data_dir + "/head.log" : launch.text)
              << "\n";
    if (launch.pid > 0 && process_alive(launch.pid)) ::kill(launch.pid, SIGTERM);
    return 1;
  }
  warn_if_failed(record_daemon("head", launch.pid), kNotStoppable);
  const size_t space = launch.text.find(' ');
  announce(launch.text.substr(0, space), space != std::string::npos, launch.pid);
  return 0;
}

int start_worker(const StartWorkerOptions& options) {
  worker::WorkerConfig config;
  config.head_address = options.head_node;
  config.node_ip = options.node_ip;
  config.network_interface = options.network_interface;
  config.num_cpus = options.num_cpus;
  config.num_gpus = options.num_gpus;
  config.wait_for_head = options.wait_for_head;
  config.enforce_limits = !options.no_task_limits;
  config.container_engine = options.container_engine;
  if (options.allowed_mounts.size() > api::kMaxAllowedMountPrefixes) {
    std::cerr << "error: --allow-mount: at most " << api::kMaxAllowedMountPrefixes << " folders, got "
              << options.allowed_mounts.size() << "\n";
    return 2;
  }
  for (const auto& prefix : options.allowed_mounts) {
    if (std::string problem = api::mount_path_problem(prefix); !problem.empty()) {
      std::cerr << "error: --allow-mount: " << problem << "\n";
      return 2;
    }
    config.allowed_mounts.push_back(prefix);
  }
  if (Status s = worker::HealthChecks::check_commands(options.health_checks); !s) {
    std::cerr << "error: " << s.error().message << "\n";
    return 2;
  }
  config.health.commands = options.health_checks;
  config.health.interval_ms = static_cast<int64_t>(options.health_interval_s * 1000);
  config.health.timeout_ms = static_cast<int64_t>(options.health_timeout_s * 1000);
  if (options.labels.size() > api::kMaxNodeLabels) {
    std::cerr << "error: --label: at most " << api::kMaxNodeLabels << " labels, got " << options.labels.size() << "\n";
    return 2;
  }
  for (const auto& label : options.labels) {
    const size_t eq = label.find('=');
    const std::string key = label.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : label.substr(eq + 1);
    auto problem = eq == std::string::npos ? std::optional<std::string>("it must be KEY=VALUE") : api::label_problem(key, value);
    if (problem) {
      std::cerr << "error: --label " << label << ": " << *problem << "\n";
      return 2;
    }
    config.labels[key] = value;
  }
  if (options.memory_gb) config.memory_bytes = static_cast<int64_t>(*options.memory_gb * (1ll << 30));
  config.stop_grace_ms = static_cast<int64_t>(options.kill_grace_s * 1000);
  config.package_cache_bytes = static_cast<int64_t>(options.package_cache_gb * (1ll << 30));
  config.max_unpack_ratio = options.max_unpack_ratio;
  config.verbose = options.verbose;
  config.task_user = options.task_user;
  config.data_dir = absolute(options.data_dir.empty() ? session_dir() + "/worker-" + options.node_ip : options.data_dir);
  auto head_eps = net::parse_endpoints(options.head_node, 6379);
  if (!head_eps.ok()) {
    std::cerr << "error: --head-node: " << head_eps.error().message << "\n";
    return 2;
  }
  config.token = options.token;
  if (!options.token_file.empty()) {
    if (!options.token.empty()) {
      std::cerr << "error: give --token-file or --token, not both\n";
      return 2;
    }
    auto token = net::read_private_token_file(options.token_file);
    if (!token.ok()) {
      std::cerr << "error: " << options.token_file_flag << ": " << token.error().message << "\n";
      return 2;
    }
    config.token = token.value();
  }
  if (config.token.empty()) {
    if (const char* env = std::getenv("AG_TOKEN"); env && *env) config.token = env;
  }
  if (config.token.empty()) {
    // A head started on this machine shares its join token through the session.
    if (auto session = read_session(); session && !session->data_dir.empty()) {
      if (auto token = net::read_private_token_file(session->data_dir + "/join-token"); token.ok()) {
        config.token = token.value();
      }
    }
  }
  // The head's CA: pinned now from --ca-fingerprint, pinned at an earlier join, the
  // session's (a head started here), or none for plain HTTP on loopback.
  if (!options.ca_fingerprint.empty() || !options.insecure) {
    if (Status s = make_data_dir(config.data_dir); !s) {
      std::cerr << "error: " << s.error().message << "\n";
      return 1;
    }
  }
  const std::string pinned_path = config.data_dir + "/head-ca.pem";
  const net::Endpoint& head_ep = head_eps->front();
  // Other machines' ranks reach this one at --node-ip-address (task 0's is MASTER_ADDR):
  // a loopback address is only right when the head, and so the cluster, is on this machine.
  if (!net::is_loopback_host(head_ep.host) && net::is_loopback_host(options.node_ip)) {
    std::cerr << "WARNING: --node-ip-address " << options.node_ip << " is a loopback address, but the head at "
              << options.head_node << " is on another machine: ranks on other nodes cannot reach this one there. "
              << "Pass this machine's address (e.g. --node-ip-address $(hostname -I | cut -d' ' -f1)).\n";
  }
  if (!options.insecure) {
    if (!options.ca_fingerprint.empty()) {
      // Any head of the cluster hands out its CA: the first that answers.
      auto ca = net::fetch_pinned_ca(head_ep, options.ca_fingerprint, 10000);
      for (size_t i = 1; i < head_eps->size() && !ca.ok() && ca.error().code == ErrorCode::kUnavailable; ++i) {
        ca = net::fetch_pinned_ca((*head_eps)[i], options.ca_fingerprint, 10000);
      }
      if (!ca.ok()) {
        std::cerr << "error: --ca-fingerprint: " << ca.error().message << "\n";
        return ca.error().code == ErrorCode::kInvalidArgument ? 2 : 1;
      }
      if (Status s = net::write_token_file(pinned_path, ca.value()); !s) {
        std::cerr << "error: " << s.error().message << "\n";
        return 1;
      }
      config.head_ca_pem = ca.value();
    } else if (std::ifstream pinned(pinned_path); pinned) {
      config.head_ca_pem.assign(std::istreambuf_iterator<char>(pinned), std::istreambuf_iterator<char>());
    } else {
      auto ca = head_ca_for(head_ep, false);
      if (!ca.ok()) {
        std::cerr << "error: " << ca.error().message << " (for a worker: --ca-fingerprint)\n";
        return 2;
      }
      config.head_ca_pem = ca.value();
    }
  }
  struct stat credential {};
  if (config.token.empty() && ::lstat((config.data_dir + "/node-credential").c_str(), &credential) != 0) {
    std::cerr << "error: no join token: pass --token-file FILE holding the join token `ag start-head` printed (or "
                 "make one with `ag token create --join`)\n";
    return 2;
  }
  if (Status s = make_data_dir(config.data_dir); !s) {
    std::cerr << "error: " << s.error().message << "\n";
    return 1;
  }
  std::string name = "worker-" + options.node_ip;

  if (options.block) {
    // In the foreground (a systemd unit): stderr (the journal) and the data dir's log.
    if (std::string problem = init_logging({config.data_dir + "/worker.log", true, options.verbose}); !problem.empty()) {
      std::cerr << "warning: " << problem << "\n";
    }
    warn_if_failed(record_daemon(name, ::getpid()), kNotStoppable);
    return worker::run_worker(config, [&](const Status& status, const std::string& summary) {
      if (status) std::cout << "AetherGrid worker joined the cluster at " << options.head_node << ": " << summary << "\n";
      else std::cerr << "warning: " << status.error().message << "\n";
      std::cout.flush();
    });
  }
  std::string log_path = config.data_dir + "/worker.log";
  Launch launch = daemonize(log_path, 10, [&](auto report) {
    init_logging({"", true, options.verbose});  // stderr is the log file now
    return worker::run_worker(config, [&](const Status& status, const std::string& summary) {
      report(status.ok(), status.ok() ? summary : status.error().message);
    });
  });
  if (launch.ok) {
    warn_if_failed(record_daemon(name, launch.pid), kNotStoppable);
    std::cout << "AetherGrid worker started (pid " << launch.pid << "), joined the cluster at " << options.head_node
              << ": " << launch.text << "\n  Log: " << log_path << "\n";
    return 0;
  }
  // Give the daemon a moment to exit if the error was final (wrong token).
  for (int i = 0; i < 50 && launch.pid > 0 && process_alive(launch.pid); ++i) {
    int status;
    if (::waitpid(launch.pid, &status, WNOHANG) == launch.pid) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (launch.pid > 0 && process_alive(launch.pid)) {
    warn_if_failed(record_daemon(name, launch.pid), kNotStoppable);
    std::cerr << "warning: " << (launch.text.empty() ? "the worker has not registered yet" : launch.text) << "\n"
              << "The worker (pid " << launch.pid << ") keeps retrying with backoff; its log: " << log_path
              << "\nStop it with `ag stop`.\n";
    return 0;
  }
  std::cerr << "error: the worker did not start: " << (launch.text.empty() ? "see " + log_path : launch.text) << "\n";
  return 1;
}

namespace {

// A worker daemon's data dir: the --data-dir it was started with, else the session's.
std::string worker_data_dir(const DaemonRecord& daemon) {
  std::ifstream in("/proc/" + std::to_string(daemon.pid) + "/cmdline", std::ios::binary);
  std::vector<std::string> args;
  for (std::string arg; std::getline(in, arg, '\0');) args.push_back(arg);
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--data-dir" && i + 1 < args.size()) return absolute(args[i + 1]);
    if (args[i].rfind("--data-dir=", 0) == 0) return absolute(args[i].substr(11));
  }
  return session_dir() + "/" + daemon.name;
}

// Tasks a worker runs now: task folders without an exit record yet.
int running_tasks(const std::string& data_dir) {
  int running = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(data_dir + "/tasks", ec)) {
    running += entry.is_directory(ec) && !std::filesystem::exists(entry.path() / "exit", ec);
  }
  return running;
}

}  // namespace

int stop_daemons(double timeout_s) {
  auto daemons = recorded_daemons();
  // Said first: `ag stop` ends this machine's daemons, and the tasks its workers run.
  int live = 0, tasks = 0;
  std::string names;
  for (const auto& d : daemons) {
    if (!process_alive(d.pid) || !is_our_daemon(d.pid)) continue;
    ++live;
    names += (names.empty() ? "" : ", ") + d.name;
    if (d.name != "head") tasks += running_tasks(worker_data_dir(d));
  }
  if (live > 0) {
    std::cerr << "stopping the " << live << " AetherGrid daemon(s) started from this machine (" << names << ")"
              << (tasks > 0 ? "; their " + std::to_string(tasks) + " running task(s) are stopped with them" : "")
              << "; to stop one job instead: ag stop-job JOB_ID\n";
  }
  // Workers first, so that they can report their tasks' ends to a head still running.
  std::stable_partition(daemons.begin(), daemons.end(), [](const DaemonRecord& d) { return d.name != "head"; });
  int stopped = 0;
  for (int phase = 0; phase < 2; ++phase) {
    std::vector<DaemonRecord> group;
    for (const auto& d : daemons) {
      if ((d.name == "head") == (phase == 1)) group.push_back(d);
    }
    // Only a live daemon of ours is signalled (and reported stopped); a record whose
    // process is gone, or whose pid now belongs to something else, is only removed.
    std::set<int> signalled;
    for (const auto& d : group) {
      if (process_alive(d.pid) && is_our_daemon(d.pid) && ::kill(d.pid, SIGTERM) == 0) signalled.insert(d.pid);
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    for (const auto& d : group) {
      if (!signalled.count(d.pid)) {
        std::filesystem::remove(d.pid_file);
        std::cout << d.name << " (pid " << d.pid << ") was not running; its record is removed\n";
        continue;
      }
      while (process_alive(d.pid) && std::chrono::steady_clock::now() < deadline) {
        int status;
        ::waitpid(d.pid, &status, WNOHANG);  // reaps it when it is our child (--block tests)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      if (process_alive(d.pid) && is_our_daemon(d.pid)) {
        std::cerr << "warning: " << d.name << " (pid " << d.pid << ") did not stop within " << timeout_s
                  << " s; killing it\n";
        ::kill(d.pid, SIGKILL);
      }
      std::filesystem::remove(d.pid_file);
      std::cout << "stopped " << d.name << " (pid " << d.pid << ")\n";
      ++stopped;
    }
  }
  if (stopped == 0) std::cout << "no AetherGrid daemons started from this machine were running (session " << session_dir() << ")\n";
  return 0;
}

}  // namespace ag::cli
