// Agent: the worker's side of the channel to the head. It dials the head, registers
// this node (with what still runs), keeps the channel alive with heartbeats, stops the
// node's tasks when the head is silent past its node timeout (fencing), reconnects with
// backoff when it drops, and turns head messages (api/protocol.h) into TaskLauncher
// calls. A launch is made ready by the LaunchPreparer; messages, output and exits go
// out through the LogShipper. Owner's (io) thread only.
//
//   dial -> register{resources, running, exited} -> registered -> launch/kill ... -> (drop) -> backoff -> dial
//
// Its collaborators come from the worker daemon (worker_daemon.cc), so unit tests run
// it over a fake dialer, launcher, packages and clock (tests/unit/worker/agent_test.cc).
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "api/protocol.h"
#include "api/task_environment.h"
#include "common/resources.h"
#include "common/result.h"
#include "common/timers.h"
#include "net/ws_connection.h"
#include "worker/agent_config.h"
#include "worker/container_engine.h"
#include "worker/head_dialer.h"
#include "worker/launch_preparer.h"
#include "worker/log_shipper.h"
#include "worker/package_cache.h"
#include "worker/task_launcher.h"

namespace ag::worker {


class Agent {
 public:
  struct Deps {
    Timers& timers;
    HeadDialer& head;
    TaskLauncher& launcher;
    PackageProvider& packages;
    ImageProvider& images;
    std::function<api::NodeUsage()> sample_usage;
    std::function<std::vector<int>()> busy_ports;  // held ports of the master-port range
    std::function<void()> exit;                    // the agent is done: stop the daemon
    // `ag exec`: run a command beside a task (worker/exec_session.h); unset: refused.
    std::function<void(const api::ExecOpen&)> open_exec = nullptr;
    // `ag stack`: the stacks of a task's Python processes (worker/stack_dumps.h), given
    // to `done` on the io thread; unset: refused.
    std::function<void(const api::StackRequest&, std::function<void(api::StackReport)> done)> take_stacks = nullptr;
    // The node's failing health report while it is not healthy again (worker/
    // health_checks.h), carried by each registration; unset: always healthy.
    std::function<std::optional<api::HealthReport>()> unhealthy = nullptr;
    // An admin cleared the node's UNHEALTHY mark: forget the failures held.
    std::function<void()> health_cleared = nullptr;
  };
  // `on_first_result` is called once: ok after the first registration, or the first
  // failure (the agent keeps retrying unless the failure is kUnauthenticated).
  Agent(Deps deps, AgentConfig config, std::function<void(const Status&)> on_first_result);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  void start();
  // Kills all tasks and closes the channel; calls deps.exit once they have ended.
  void shutdown(int64_t grace_ms);
  // Why the agent gave up, if it did: the head refused its token or its protocol
  // version, or (kUnavailable) no head answered at start. The daemon exits non-zero.
  const std::optional<Error>& gave_up() const { return gave_up_; }
  // Tells the head how the node's health checks went (dropped while no head listens:
  // the next registration carries the node's health).
  void report_health(const api::HealthReport& report) { shipper_.send(report); }

 private:
  void dial();
  void on_connected(std::shared_ptr<net::WsConnection> channel);
  void on_message(const std::string& text);
  void on_registered(const api::Registered& registered);
  void on_refused(const api::ErrorMessage& refusal);
  void on_closed(const std::string& reason);
  void retry_later();
  void heartbeat();
  // Fencing: (re)starts the lease, which stops this node's tasks once the head has not
  // been heard (any message) for its node timeout.
  void renew_lease();
  // ag pull: the image now, its progress and end to the head.
  void handle_pull(const api::Pull& pull);
  void handle_kill(const api::Kill& kill);
  // True (and said in the log) for a registration, launch or kill from a head older
  // than the newest this node has heard from: heads sharing a store fence each other by
  // epoch. A stale registration drops the channel and moves on to the next head.
  bool stale(int64_t epoch, const api::HeadMessage& message);
  void handle_exit_ack(const api::TaskKey& task);
  // Starts a task whose launch is ready; reports task_started or the start error.
  void start_task(const api::TaskKey& task, Result<LaunchSpec> spec);
  void report_start_error(const api::TaskKey& id, const std::string& error);
  void report_first(const Status& status);
  void stop_daemon();
  void on_task_exit(const api::TaskKey& id, const api::TaskExit& exit);

  Deps deps_;
  AgentConfig config_;
  std::function<void(const Status&)> on_first_result_;
  std::shared_ptr<net::WsConnection> channel_;
  LaunchPreparer preparer_;
  LogShipper shipper_;
  int64_t node_timeout_ms_ = 10000;  // the head's, learnt at registration
  int64_t newest_epoch_ = 0;         // of the heads that registered this node
  // Whether this node's tasks were stopped for want of the head (until it registers again).
  bool fenced_ = false;
  bool ever_registered_ = false;
  bool stopping_ = false;
  bool exited_ = false;
  std::optional<Error> gave_up_;
  int64_t backoff_ms_ = 250;
  struct Timer {
    Timers::Id retry = 0, heartbeat = 0, lease = 0;
  } timers_;
};

}  // namespace ag::worker
