#include "head/head_daemon.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <filesystem>

#include "common/clock.h"
#include "common/descriptors.h"
#include "common/ids.h"
#include "common/memory.h"
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
#include "api/log_stream.h"
#include "head/gateway/worker_gateway.h"
#include "net/asio_timers.h"
#include "net/auth.h"
#include "net/http_server.h"
#include "net/tls.h"

namespace ag::head {
namespace {
// A working_dir package no job has used for this long is removed.
constexpr int64_t kPackageRetentionS = int64_t{7} * 24 * 3600;
constexpr int64_t kJobRetentionSweepMs = 10 * 60 * 1000;
}  // namespace

int run_head(const HeadConfig& config, const std::function<void(const Status&, const std::string&)>& on_ready) {
  // Everything the head writes (its database holds jobs' env_vars, its logs the jobs'
  // output) is for its own user only.
  ::umask(077);
  keep_freed_memory();  // pages of logs, built and freed many times a second
  const uint64_t descriptors = raise_descriptor_limit();
  std::error_code fs_error;
  std::filesystem::create_directories(config.data_dir, fs_error);
  if (fs_error) {
    on_ready(internal_error("cannot create data dir " + config.data_dir + ": " + fs_error.message()), "");
    return 1;
  }
  // The first admin's token; `ag` on this machine reads it through the session.
  auto token = net::load_or_create_token(config.data_dir + "/token", "agu_");
  if (!token.ok()) {
    on_ready(token.error(), "");
    return 1;
  }
  auto store = store::SqliteStore::open(config.data_dir + "/head.db");
  if (!store.ok()) {
    on_ready(store.error(), "");
    return 1;
  }

  boost::asio::io_context io(1);
  SystemClock clock;
  net::AsioTimers timers(io);
  AccessControl access({*store.value(), timers, clock});
  if (Status s = access.recover(); !s) {
    on_ready(s, "");
    return 1;
  }
  // The join token `ag start-head` prints, kept beside the admin's; made again when
  // it is missing or was revoked.
  std::optional<std::string> new_join_token;
  const std::string join_path = config.data_dir + "/join-token";
  struct stat join_stat {};
  const bool join_file_existed = ::lstat(join_path.c_str(), &join_stat) == 0;
  auto join_token = net::load_or_create_token(join_path, "agj_");
  if (!join_token.ok()) {
    on_ready(join_token.error(), "");
    return 1;
  }
  if (access.authenticate_token(join_token.value()).kind != Principal::Kind::kJoin) {
    new_join_token = join_token.value();
    if (join_file_existed) {  // revoked, or another head's: never brought back
      new_join_token = "agj_" + random_hex(24);
      if (Status s = net::write_token_file(join_path, *new_join_token); !s) {
        on_ready(s, "");
        return 1;
      }
    }
  }
  if (Status s = access.bootstrap(token.value(), new_join_token); !s) {
    on_ready(s, "");
    return 1;
  }
  NodeRegistry nodes;
  LogStore logs(config.data_dir + "/logs", 128, &timers, &clock);
  logs.set_max_log_bytes(config.max_task_log_bytes);
  JobConfig job_config;
  job_config.kill_grace_ms = config.kill_grace_ms;
  job_config.preempt_grace_ms = config.preempt_grace_ms;
  job_config.usage_half_life_ms = config.usage_half_life_ms;
  JobLayer jobs({timers, *store.value(), nodes, nodes, logs, clock}, job_config);
  jobs.policy.set_groups_of([&access](const std::string& user) { return groups_of(access, user); });
  if (Status s = jobs.recover(); !s) {
    on_ready(s, "");
    return 1;
  }
  AuditLog audit(*store.value(), jobs.table);
  if (Status s = audit.recover(); !s) {
    on_ready(s, "");
    return 1;
  }
  WorkerGateway gateway({timers, nodes, jobs, logs, clock, access, audit}, WorkerGatewayConfig{config.node_timeout_ms});
  PackageStore packages(config.data_dir + "/packages", config.max_package_bytes, config.package_store_bytes);
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
  dashboard::Metrics metrics({jobs, nodes, logs});
  dashboard::EventHub live_events({io, jobs, nodes, clock});
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
  gateway.on_pull_update(
      [&pulls](const std::string& node_id, const api::PullUpdate& update) { pulls.update(node_id, update); });
  ApiRoutes routes({io, jobs, nodes, logs, packages, access, audit, gateway, clock, dashboard, pulls});

  net::ServerHandlers handlers;
  handlers.on_request = [&routes, &metrics](const net::HttpRequest& req, net::Respond respond) {
    net::Respond counted = metrics.count_request(req, std::move(respond));
    routes.handle(req, std::move(counted));
  };
  handlers.body_limit = [&config](const std::string& method, const std::string& target) -> size_t {
    if (method == "PUT" && target.rfind("/api/packages/", 0) == 0) return static_cast<size_t>(config.max_package_bytes);
    return config.max_body_bytes;
  };
  handlers.plan_body = [&routes](const net::HttpRequest& req) { return routes.plan_body(req); };
  handlers.check_upgrade = [&gateway](const net::HttpRequest& req) { return gateway.check_upgrade(req); };
  handlers.on_websocket = [&gateway](const std::shared_ptr<net::WsConnection>& ch, const net::HttpRequest& req) {
    gateway.on_connection(ch, req);
  };
  handlers.raw_protocol = api::kLogStreamProtocol;
  handlers.on_raw_upgrade = [&gateway](net::RawUpgrade upgrade) { gateway.on_log_stream(std::move(upgrade)); };
  net::HttpServer api_server(io, handlers, config.max_body_bytes);
  net::HttpServer dashboard_server(io, handlers, config.max_body_bytes);
  if (!config.insecure) {
    char host[256] = {0};
    ::gethostname(host, sizeof host - 1);
    std::vector<std::string> names{config.node_ip, host, "localhost", "127.0.0.1", "::1"};
    names.insert(names.end(), config.advertise.begin(), config.advertise.end());
    auto identity = net::ensure_cluster_tls(config.data_dir + "/tls", names);
    if (!identity.ok()) {
      on_ready(identity.error(), "");
      return 1;
    }
    Status api_tls = api_server.enable_tls(identity.value(), true);
    auto dashboard_identity = config.tls_cert.empty() ? identity : net::load_tls_identity(config.tls_cert, config.tls_key);
    if (!dashboard_identity.ok()) {
      on_ready(dashboard_identity.error(), "");
      return 1;
    }
    Status dashboard_tls = dashboard_server.enable_tls(dashboard_identity.value(), true);
    for (const Status* s : {&api_tls, &dashboard_tls}) {
      if (!*s) {
        on_ready(*s, "");
        return 1;
      }
    }
    routes.set_tls(identity->ca_pem);
    spdlog::info("TLS on both ports; cluster CA {}", identity->ca_fingerprint);
  } else {
    spdlog::warn("TLS is off (--insecure): tokens and data travel in clear text to and from other machines");
  }
  if (Status s = api_server.listen(config.node_ip, static_cast<uint16_t>(config.port)); !s) {
    on_ready(s, "");
    return 1;
  }
  if (Status s = dashboard_server.listen(config.node_ip, static_cast<uint16_t>(config.dashboard_port)); !s) {
    on_ready(s, "");
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
  on_ready({}, token.value());
  io.run();
  store.value()->flush();
  spdlog::info("head stopped");
  return 0;
}

}  // namespace ag::head
