#include "head/head_daemon.h"

#include <spdlog/spdlog.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

#include "common/clock.h"
#include "common/descriptors.h"
#include "common/ids.h"
#include "common/memory.h"
#include "common/scheduling.h"
#include "common/version.h"
#include "head/auth/access_control.h"
#include "head/auth/audit_log.h"
#include "head/rest/api_routes.h"
#include "head/dashboard/dashboard_routes.h"
#include "head/dashboard/event_hub.h"
#include "head/dashboard/metrics.h"
#include "head/jobs/job_layer.h"
#include "head/logs/log_store.h"
#include "head/nodes/node_registry.h"
#include "head/packages/package_store.h"
#include "head/store/sqlite_store.h"
#include "head/store/postgres_store.h"
#include "head/leader/fenced_channel.h"
#include "head/leader/leader_lease.h"
#include "head/leader/restart.h"
#include "head/leader/standby_server.h"
#include "api/log_stream.h"
#include "head/gateway/worker_gateway.h"
#include "net/asio_timers.h"
#include "net/auth.h"
#include "net/http_server.h"
#include "api/exec_protocol.h"
#include "head/events/node_events.h"
#include "head/exec/idle_gpu_watch.h"
#include "head/export/log_exporter.h"
#include "head/exec/exec_relay.h"
#include "head/exec/hang_watch.h"
#include "head/rest/exec_routes.h"
#include "net/tls.h"

namespace ag::head {
namespace {
// A working_dir package no job has used for this long is removed.
constexpr int64_t kPackageRetentionS = int64_t{7} * 24 * 3600;
constexpr int64_t kJobRetentionSweepMs = 10 * 60 * 1000;
// The store's record of which cluster it belongs to (ADR 0008).
constexpr const char* kClusterIdKey = "cluster_id";
// Descriptors: what the head keeps for itself (its store, logs, listening sockets, and
// the connections kept for clients on this machine), the least it starts with, and the
// limit below which it warns how many workers it has room for.
constexpr uint64_t kHeadOwnDescriptors = 128;
constexpr uint64_t kHeadMinDescriptors = 256;
constexpr uint64_t kHeadAmpleDescriptors = 4096;

// What both kinds of head set up before they lead or stand by: the tokens and the TLS
// identity (every head's certificate signed by the one cluster CA in the state dir).
struct Identity {
  std::string admin_token;
  std::optional<net::TlsIdentity> tls;  // nullopt with --insecure
  std::string cluster_id;               // heads sharing a store: the shared dir's
};

// Holds an exclusive lock on `path` (made if missing) while it lives: heads starting
// together on one shared dir make its CA and tokens once.
class FileLock {
 public:
  explicit FileLock(const std::string& path) : fd_(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600)) {
    if (fd_ >= 0) (void)::flock(fd_, LOCK_EX);
  }
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_;
};

Result<Identity> make_identity(const HeadConfig& config) {
  const std::string& state = config.state_dir();
  std::optional<FileLock> lock;
  if (!config.shared_dir.empty()) lock.emplace(state + "/.setup-lock");
  Identity out;
  // The first admin's token; `ag` on this machine reads it through the session.
  auto token = net::load_or_create_token(state + "/token", "agu_");
  if (!token.ok()) return token.error();
  out.admin_token = token.value();
  if (!config.shared_dir.empty()) {
    auto id = net::load_or_create_token(state + "/cluster-id", "agc_");
    if (!id.ok()) return id.error();
    out.cluster_id = id.value();
  }
  if (!config.insecure) {
    char host[256] = {0};
    ::gethostname(host, sizeof host - 1);
    std::vector<std::string> names{config.node_ip, host, "localhost", "127.0.0.1", "::1"};
    names.insert(names.end(), config.advertise.begin(), config.advertise.end());
    auto tls = net::ensure_cluster_tls(state + "/tls", names, config.data_dir + "/tls");
    if (!tls.ok()) return tls.error();
    out.tls = tls.value();
  }
  return out;
}

int run_leader(const HeadConfig& config, store::KvStore& store, const LeaderLease* lease, const Identity& identity,
               const std::function<void(const Status&)>& on_ready);

// Calls `on_ready` once, whichever part of the head is ready first.
class ReadyOnce {
 public:
  ReadyOnce(const OnHeadReady& on_ready, std::string admin_token) : on_ready_(on_ready), token_(std::move(admin_token)) {}
  void operator()(const Status& status, bool standby = false, const std::string& leader = "") {
    if (called_) return;
    called_ = true;
    on_ready_(status, HeadStarted{token_, leader, standby});
  }
  bool called() const { return called_; }

 private:
  const OnHeadReady& on_ready_;
  std::string token_;
  bool called_ = false;
};

// The lease's holder: the head's address, and a nonce telling this run of it from the
// next.
std::string lease_holder(const std::string& address) { return address + " " + random_hex(6); }
std::string holder_address(const std::string& holder) { return holder.substr(0, holder.find(' ')); }

Status check_cluster(store::KvStore& store, const std::string& cluster_id, const HeadConfig& config) {
  auto stored = store.get(store::kMetaTable, kClusterIdKey);
  if (!stored.ok()) return stored.error();
  if (stored.value() && *stored.value() != cluster_id) {
    return Error{ErrorCode::kConflict,
                 "the store belongs to another cluster (" + *stored.value() + ") than --shared-dir " +
                     config.shared_dir + " (" + cluster_id +
                     "): one store serves one cluster; give this cluster a database of its own, or the other "
                     "cluster's --shared-dir"};
  }
  return {};
}

// Heads sharing a PostgreSQL store: stand by until this head takes the lease, then lead
// until it is lost (restart_as_standby) or the head is told to stop.
int run_shared(const HeadConfig& config, const Identity& identity, ReadyOnce& ready) {
  const bool restarted = std::getenv(kRestartedEnv) != nullptr;
  ::unsetenv(kRestartedEnv);
  const store::PostgresOptions options{config.store_url, config.store_password};
  std::unique_ptr<store::PostgresStore> store;
  if (!restarted) {  // the first start says at once what is wrong with --store
    auto opened = store::PostgresStore::open(options);
    if (!opened.ok()) {
      ready(Error{opened.error().code, "--store: " + opened.error().message});
      return 1;
    }
    store = std::move(opened.value());
    if (Status s = check_cluster(*store, identity.cluster_id, config); !s) {
      ready(s);
      return 1;
    }
  }
  std::unique_ptr<LeaderLease> lease;
  const std::string holder = lease_holder(config.address);
  const int64_t poll_ms = std::clamp<int64_t>(config.leader_lease_ms / 3, 100, 1000);
  {
    boost::asio::io_context io(1);
    StandbyServer standby(io, config.address);
    std::mutex mu;
    std::condition_variable wake;
    bool done = false;  // guarded by mu
    bool leads = false;
    std::optional<Error> fatal;
    bool stop_requested = false;  // SIGTERM or SIGINT; guarded by mu
    // The first outcome wins: leading, a fatal error, or being told to stop.
    auto finish = [&](bool lead, std::optional<Error> error) {
      {
        std::lock_guard lock(mu);
        if (done) return;
        done = true;
        leads = lead;
        fatal = std::move(error);
      }
      boost::asio::post(io, [&io] { io.stop(); });
    };
    // The poller: opens the store when it could not, checks it is this cluster's, tries
    // to take the lease, and says who leads.
    std::thread poller([&] {
      std::unique_lock lock(mu);
      while (!done) {
        lock.unlock();
        if (!store) {
          auto opened = store::PostgresStore::open(options);
          if (opened.ok()) {
            store = std::move(opened.value());
          } else if (opened.error().code == ErrorCode::kConflict) {
            return finish(false, opened.error());
          } else {
            standby.set_store_problem(opened.error().message);
          }
        }
        if (store) {
          if (!lease) lease = std::make_unique<LeaderLease>(*store, holder, config.leader_lease_ms);
          Status cluster = check_cluster(*store, identity.cluster_id, config);
          if (!cluster && cluster.error().code == ErrorCode::kConflict) return finish(false, cluster.error());
          auto taken = cluster ? lease->try_acquire() : Result<bool>(cluster.error());
          if (taken.ok() && taken.value()) return finish(true, std::nullopt);
          auto state = taken.ok() ? store->read_lease() : Result<store::LeaseState>(taken.error());
          if (state.ok()) {
            standby.set_leader(state->live ? holder_address(state->holder) : "", state->epoch);
          } else {
            standby.set_store_problem(state.error().message);
          }
        }
        lock.lock();
        wake.wait_for(lock, std::chrono::milliseconds(poll_ms), [&] { return done; });
      }
    });
    boost::asio::signal_set signals(io, SIGTERM, SIGINT);
    signals.async_wait([&](const boost::system::error_code& ec, int sig) {
      if (ec) return;
      spdlog::info("received signal {}: shutting down", sig);
      {
        std::lock_guard lock(mu);
        stop_requested = true;
        done = true;
      }
      wake.notify_all();
      io.stop();
    });
    // Answer as a standby unless this head leads within a moment.
    boost::asio::steady_timer grace(io, std::chrono::milliseconds(poll_ms));
    grace.async_wait([&](const boost::system::error_code& ec) {
      {
        std::lock_guard lock(mu);
        if (ec || done) return;
      }
      if (Status s = standby.start(identity.tls ? &*identity.tls : nullptr, config.node_ip, config.port, config.dashboard_port); !s) {
        finish(false, s.error());
        return;
      }
      spdlog::info("{}: head standing by at {} (lease {} ms)", version_line(), config.address, config.leader_lease_ms);
      ready({}, true, "");
    });
    io.run();
    {
      std::lock_guard lock(mu);
      done = true;
    }
    wake.notify_all();
    poller.join();
    standby.stop();
    if (fatal) {
      spdlog::error("{}", fatal->message);
      ready(*fatal);
      return 1;
    }
    if (stop_requested || !leads) {
      if (leads) lease->release();  // took it as it was told to stop: hand it on at once
      return 0;
    }
  }
  store->fence(holder, lease->epoch());
  lease->start([](const std::string& why) { restart_as_standby(why); });
  spdlog::info("this head leads the cluster (epoch {})", lease->epoch());
  auto recorded = store->get(store::kMetaTable, kClusterIdKey);
  if (recorded.ok() && !recorded.value()) {
    auto result = std::make_shared<Status>();
    store->write({{store::kMetaTable, kClusterIdKey, identity.cluster_id}}, [result](Status s) { *result = s; });
    store->flush();
    if (!*result) restart_as_standby("cannot record the cluster in the store: " + result->error().message);
  }
  Status failed;
  const int code = run_leader(config, *store, lease.get(), identity, [&](const Status& s) {
    if (!s && ready.called()) failed = s;  // after a start that was reported
    ready(s);
  });
  // A head that could not lead once it was running (its store failed it while
  // recovering, a port went) stands by again rather than leave the cluster a head short.
  if (!failed) restart_as_standby("it could not start leading: " + failed.error().message);
  lease->release();  // stopped on purpose: a standby takes over now, not after the lease
  return code;
}

}  // namespace

int run_head(const HeadConfig& config, const OnHeadReady& on_ready) {
  // Everything the head writes (its database holds jobs' env_vars, its logs the jobs'
  // output) is for its own user only.
  ::umask(077);
  keep_freed_memory();  // pages of logs, built and freed many times a second
  if (std::string why = yield_to_tasks(); !why.empty()) spdlog::warn("the head preempts tasks as it wakes: {}", why);
  if (auto descriptors = claim_descriptors("the head", kHeadMinDescriptors); !descriptors.ok()) {
    on_ready(descriptors.error(), {});
    return 1;
  }
  for (const std::string& dir : {config.data_dir, config.shared_dir}) {
    std::error_code fs_error;
    if (!dir.empty()) std::filesystem::create_directories(dir, fs_error);
    if (fs_error) {
      on_ready(internal_error("cannot create " + dir + ": " + fs_error.message()), {});
      return 1;
    }
  }
  auto identity = make_identity(config);
  if (!identity.ok()) {
    on_ready(identity.error(), {});
    return 1;
  }
  ReadyOnce ready(on_ready, identity->admin_token);
  if (!config.store_url.empty()) return run_shared(config, identity.value(), ready);
  auto store = store::SqliteStore::open(config.data_dir + "/head.db");
  if (!store.ok()) {
    ready(store.error());
    return 1;
  }
  return run_leader(config, *store.value(), nullptr, identity.value(), [&ready](const Status& s) { ready(s); });
}

namespace {

// Leads: recovers the store's state and runs the job layer, gateway and routes.
int run_leader(const HeadConfig& config, store::KvStore& store, const LeaderLease* lease, const Identity& identity,
               const std::function<void(const Status&)>& on_ready) {
  const uint64_t descriptors = raise_descriptor_limit();
  if (descriptors < kHeadAmpleDescriptors) {
    spdlog::warn("the head may open only {} files (RLIMIT_NOFILE): room for about {} workers (two connections "
                 "each) beside its clients; for more, raise LimitNOFILE= in its systemd unit or `ulimit -n` where "
                 "it starts",
                 descriptors, (descriptors - kHeadOwnDescriptors) / 2);
  }
  const std::string& state = config.state_dir();

  boost::asio::io_context io(1);
  SystemClock clock;
  net::AsioTimers timers(io);
  AccessControl access({store, timers, clock});
  if (Status s = access.recover(); !s) {
    on_ready(s);
    return 1;
  }
  // The join token `ag start-head` prints, kept beside the admin's; made again when
  // it is missing or was revoked.
  std::optional<std::string> new_join_token;
  const std::string join_path = state + "/join-token";
  struct stat join_stat {};
  const bool join_file_existed = ::lstat(join_path.c_str(), &join_stat) == 0;
  auto join_token = net::load_or_create_token(join_path, "agj_");
  if (!join_token.ok()) {
    on_ready(join_token.error());
    return 1;
  }
  if (access.authenticate_token(join_token.value()).kind != Principal::Kind::kJoin) {
    new_join_token = join_token.value();
    if (join_file_existed) {  // revoked, or another head's: never brought back
      new_join_token = "agj_" + random_hex(24);
      if (Status s = net::write_token_file(join_path, *new_join_token); !s) {
        on_ready(s);
        return 1;
      }
    }
  }
  if (Status s = access.bootstrap(identity.admin_token, new_join_token); !s) {
    on_ready(s);
    return 1;
  }
  NodeRegistry nodes;
  LogStore logs(state + "/logs", 128, &timers, &clock);
  logs.set_max_log_bytes(config.max_task_log_bytes);
  JobConfig job_config;
  job_config.kill_grace_ms = config.kill_grace_ms;
  job_config.preempt_grace_ms = config.preempt_grace_ms;
  job_config.usage_half_life_ms = config.usage_half_life_ms;
  // Heads sharing a store: nothing reaches a worker once this one is not sure it leads.
  const int64_t epoch = lease ? lease->epoch() : 0;
  std::function<bool()> acting;
  if (lease) acting = [lease] { return lease->acting(); };
  FencedChannel to_workers(nodes, epoch, acting ? acting : [] { return true; });
  JobLayer jobs({timers, store, nodes, to_workers, logs, clock}, job_config);
  jobs.policy.set_groups_of([&access](const std::string& user) { return groups_of(access, user); });
  // The cluster's event stream: the jobs' events (the job layer's) and the nodes'.
  NodeEvents node_events(store, jobs.cluster_events);
  if (Status s = node_events.recover(); !s) {
    on_ready(s);
    return 1;
  }
  if (Status s = jobs.recover(); !s) {
    on_ready(s);
    return 1;
  }
  nodes.on_event([&node_events](const Node& node, const std::string& type, const std::string& message) {
    node_events.record(node.node_id, type, message);
  });
  AuditLog audit(store, jobs.table);
  if (Status s = audit.recover(); !s) {
    on_ready(s);
    return 1;
  }
  WorkerGateway gateway({timers, nodes, jobs, logs, clock, access, audit}, WorkerGatewayConfig{config.node_timeout_ms, epoch, acting});
  PackageStore packages(state + "/packages", config.max_package_bytes, config.package_store_bytes);
  packages.set_in_use([&jobs](const std::string& hash) { return jobs.table.package_use(hash) == JobTable::PackageUse::kLiveJobs; });
  // Packages no job has used for a week go, checked now and every hour.
  std::function<void()> sweep_packages = [&] {
    if (int removed = packages.remove_unused(kPackageRetentionS)) {
      spdlog::info("removed {} working_dir package(s) no job used for a week", removed);
    }
    timers.start(3600 * 1000, sweep_packages);
  };
  sweep_packages();
  // Finished jobs past their retention go, checked now and every ten minutes (or at
  // half the retention, when that is shorter).
  std::function<void()> sweep_jobs = [&] {
    if (config.job_retention_ms <= 0) return;
    if (int deleted = jobs.retention.delete_finished_before(clock.now_ms() - config.job_retention_ms)) {
      spdlog::info("deleting {} job(s) that finished more than {} s ago", deleted, config.job_retention_ms / 1000);
    }
    timers.start(std::clamp<int64_t>(config.job_retention_ms / 2, 1000, kJobRetentionSweepMs), sweep_jobs);
  };
  sweep_jobs();
  const HeadRole role{config.address, epoch, lease ? lease->ttl_ms() : 0, lease ? "postgresql" : "sqlite"};
  dashboard::Metrics metrics({jobs, nodes, logs, store, role});
  dashboard::EventHub live_events({io, jobs, nodes, clock});
  metrics.add_renderer([&nodes](std::string& out) { nodes.traffic().render(out); });
  jobs.cluster_events.listen([&metrics](const ClusterEvent& event) { metrics.on_event(event); });
  jobs.events.add_observer([&metrics, &live_events](const Job& job) {
    metrics.on_job_changed(job);
    live_events.on_job_changed(job);
  });
  jobs.events.add_removal_observer([&metrics, &live_events](const std::string& job_id) {
    metrics.on_job_removed(job_id);
    live_events.on_job_removed(job_id);
  });
  dashboard::DashboardRoutes dashboard({access, audit, clock, metrics, live_events});
  ImagePulls pulls;
  StackTaker stacks(timers, nodes);
  gateway.on_stack_report(
      [&stacks](const std::string& node_id, const api::StackReport& report) { stacks.on_report(node_id, report); });
  HangWatch hangs({clock, timers, jobs, logs, gateway.job_usage(), stacks}, config.hang_timeout_s);
  hangs.start();
  // Every task line to JSON-lines files for a log shipper, when asked.
  std::unique_ptr<LogExporter> log_export;
  if (!config.log_export_dir.empty()) {
    LogExportConfig export_config;
    export_config.dir = config.log_export_dir;
    export_config.max_file_bytes = config.log_export_max_bytes;
    log_export = std::make_unique<LogExporter>(export_config, timers, jobs, logs,
                                               [&node_events](const std::string& type, const std::string& message) {
                                                 node_events.record("", type, message);
                                               });
    if (Status s = log_export->open(); !s) {
      on_ready(s);
      return 1;
    }
    jobs.events.add_observer([&log_export](const Job& job) { log_export->on_job_changed(job); });
    metrics.add_renderer([&log_export](std::string& out) { log_export->render_metrics(out); });
    log_export->start();
  }
  IdleGpuWatch idle_gpus({clock, timers, jobs, gateway.job_usage()}, config.idle_gpu_timeout_s);
  idle_gpus.start();
  gateway.on_pull_update(
      [&pulls](const std::string& node_id, const api::PullUpdate& update) { pulls.update(node_id, update); });
  // Webhooks: stored, and delivered from the event stream by their own threads.
  WebhookStore webhooks(store, timers);
  if (Status s = webhooks.recover(); !s) {
    on_ready(s);
    return 1;
  }
  WebhookDispatcher deliveries({clock, timers, jobs.cluster_events, webhooks, jobs, nodes,
                                std::string(identity.tls ? "https://" : "http://") + config.address + ":" +
                                    std::to_string(config.dashboard_port)});
  deliveries.start();
  ApiRoutes routes(
      {io, jobs, nodes, logs, packages, access, audit, gateway, clock, dashboard, pulls, role, stacks, webhooks, deliveries});

  // `ag exec` and `ag port-forward`: the client's WebSocket on /api/jobs/JOB/exec (or
  // /port-forward), the node's on /api/workers/exec/SESSION; every other upgrade is a
  // worker's channel.
  ExecRelay exec_relay({timers, access, nodes});
  ExecRoutes exec_routes({io, jobs, nodes, logs, packages, access, audit, gateway, clock, dashboard, pulls, role, stacks,
                          webhooks, deliveries},
                         exec_relay);
  net::ServerHandlers handlers;
  handlers.on_request = [&routes, &metrics, &exec_routes](const net::HttpRequest& req, net::Respond respond) {
    net::Respond counted = metrics.count_request(req, std::move(respond));
    if (ExecRoutes::is_exec_path(req.path)) return counted(exec_routes.without_upgrade(req));
    routes.handle(req, std::move(counted));
  };
  handlers.body_limit = [&config](const std::string& method, const std::string& target) -> size_t {
    if (method == "PUT" && target.rfind("/api/packages/", 0) == 0) return static_cast<size_t>(config.max_package_bytes);
    return config.max_body_bytes;
  };
  handlers.plan_body = [&routes](const net::HttpRequest& req) { return routes.plan_body(req); };
  const auto worker_exec = [](const std::string& path) { return path.rfind(api::kWorkerExecPath, 0) == 0; };
  handlers.check_upgrade = [&](const net::HttpRequest& req) {
    if (ExecRoutes::is_exec_path(req.path)) return exec_routes.check(req);
    if (worker_exec(req.path)) return exec_relay.check_worker(req);
    return gateway.check_upgrade(req);
  };
  handlers.on_websocket = [&](const std::shared_ptr<net::WsConnection>& ch, const net::HttpRequest& req) {
    if (ExecRoutes::is_exec_path(req.path)) return exec_routes.open(ch, req);
    if (worker_exec(req.path)) return exec_relay.on_worker(ch, req);
    gateway.on_connection(ch, req);
  };
  handlers.raw_protocol = api::kLogStreamProtocol;
  handlers.on_raw_upgrade = [&gateway](net::RawUpgrade upgrade) { gateway.on_log_stream(std::move(upgrade)); };
  net::HttpServer api_server(io, handlers, config.max_body_bytes);
  net::HttpServer dashboard_server(io, handlers, config.max_body_bytes);
  if (identity.tls) {
    auto cluster_identity = Result<net::TlsIdentity>(*identity.tls);
    Status api_tls = api_server.enable_tls(*identity.tls, true);
    auto dashboard_identity = config.tls_cert.empty() ? cluster_identity : net::load_tls_identity(config.tls_cert, config.tls_key);
    if (!dashboard_identity.ok()) {
      on_ready(dashboard_identity.error());
      return 1;
    }
    Status dashboard_tls = dashboard_server.enable_tls(dashboard_identity.value(), true);
    for (const Status* s : {&api_tls, &dashboard_tls}) {
      if (!*s) {
        on_ready(*s);
        return 1;
      }
    }
    routes.set_tls(identity.tls->ca_pem);
    spdlog::info("TLS on both ports; cluster CA {}", identity.tls->ca_fingerprint);
  } else {
    spdlog::warn("TLS is off (--insecure): tokens and data travel in clear text to and from other machines");
  }
  if (Status s = api_server.listen(config.node_ip, static_cast<uint16_t>(config.port)); !s) {
    on_ready(s);
    return 1;
  }
  if (Status s = dashboard_server.listen(config.node_ip, static_cast<uint16_t>(config.dashboard_port)); !s) {
    on_ready(s);
    return 1;
  }
  gateway.start();

  boost::asio::signal_set signals(io, SIGTERM, SIGINT);
  signals.async_wait([&](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    spdlog::info("received signal {}: shutting down", sig);
    api_server.stop();
    dashboard_server.stop();
    io.stop();
  });
  spdlog::info("{}: head listening on {}:{} (API) and {}:{} (dashboard), data dir {}, {} descriptors", version_line(),
               config.node_ip, config.port, config.node_ip, config.dashboard_port, config.data_dir, descriptors);
  on_ready({});
  io.run();
  store.flush();
  spdlog::info("head stopped");
  return 0;
}

}  // namespace
}  // namespace ag::head

