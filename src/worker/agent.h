// Agent: the worker's side of the channel to the head. It dials the head, registers
// this node (with what still runs), keeps the channel alive with heartbeats,
// reconnects with backoff when it drops, and turns head messages (api/protocol.h) into
// TaskLauncher calls and task events into messages. Owner's (io) thread only.
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
#include "worker/head_dialer.h"
#include "worker/log_stream.h"
#include "worker/container_engine.h"
#include "worker/package_cache.h"
#include "worker/task_launcher.h"

namespace ag::worker {

struct AgentConfig {
  std::string node_id;
  std::string node_ip;
  // The interface holding node_ip, named to tasks' collectives (GLOO_SOCKET_IFNAME, ...).
  std::string network_interface;
  // Finds it again (each time the agent registers: addresses move); empty: never.
  std::function<Result<std::string>()> find_network_interface;
  std::string hostname;
  Resources resources;
  std::vector<int> gpu_ids;
  std::map<std::string, std::string> labels;  // ag start-worker --label
  std::string limits;                         // which task caps this node enforces (task_limits.h)
  std::vector<std::string> allowed_mounts;    // node paths jobs may mount (--allow-mount)
  std::string data_dir;
  api::Environment inherited_env;  // the agent's own environment, handed down to tasks
  int64_t heartbeat_ms = 1000;
  // Grace between SIGTERM and SIGKILL when the node fences itself off (lost head).
  int64_t fence_grace_ms = 2000;
  int64_t max_backoff_ms = 5000;
  // The worker protocol version sent at registration (a test sets another one).
  int protocol_version = kWorkerProtocol;
  // Send task output on the log stream (worker/log_stream.h) when the head takes one;
  // otherwise (and with AG_WORKER_LOG_STREAM=off) in frames on the channel.
  bool log_stream = true;
  // Keep trying a head that cannot be reached at start (otherwise the agent gives up,
  // so that `ag start-worker` fails with the reason). Once joined it always retries.
  bool wait_for_head = false;
};

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

 private:
  void dial();
  void on_connected(std::shared_ptr<net::WsConnection> channel);
  void on_message(const std::string& text);
  void on_closed(const std::string& reason);
  void retry_later();
  void heartbeat();
  // Fencing: (re)starts the lease, which stops this node's tasks once the head has not
  // been heard (any message) for its node timeout.
  void renew_lease();
  void handle_launch(api::Launch launch);
  // ag pull: the image now, its progress and end to the head.
  void handle_pull(const api::Pull& pull);
  // The steps of a launch: the image (if any), the environment, the working dir.
  void launch_with_environment(const std::shared_ptr<api::Launch>& launch, LaunchSpec spec,
                               const api::Environment& base_env);
  void launch_in_working_dir(const std::shared_ptr<api::Launch>& launch, LaunchSpec spec);
  // Why the node cannot give the task these mounts ("" when it can).
  std::string mount_problem(const std::vector<api::Mount>& mounts) const;
  void handle_kill(const api::Kill& kill);
  void handle_exit_ack(const api::TaskKey& task);
  // Starts a task whose working dir is ready; reports task_started or the start error.
  void start_task(const LaunchSpec& spec);
  void report_start_error(const api::TaskKey& id, const std::string& error);
  // A directory with `python` and `python3` scripts that run `executable`, for PATH.
  // `on_node`: the interpreter is the node's own (checked here), not an image's.
  Result<std::string> python_shim(const std::string& executable, bool on_node);
  // Log flow: each task the head takes output from has a cursor (the next byte to send).
  // resume_log sets it where the head's copy ends; pump_logs sends while the channel has
  // room and is called again as it drains.
  void resume_log(const api::TaskKey& id, int64_t from_offset);
  void want_log(const api::TaskKey& id);
  void pump_logs();
  // pump_logs over the log stream: one record at a time, straight from the task's file.
  void pump_stream();
  // Once registered: opens the log stream, or settles on frames.
  void open_log_stream();
  // The task's output could not be read: tried again shortly.
  void retry_output(const api::TaskKey& id, const std::string& why);
  void send(const api::WorkerMessage& message);
  void report_first(const Status& status);
  void stop_daemon();

  void on_task_output(const api::TaskKey& id);
  void on_task_exit(const api::TaskKey& id, const api::TaskExit& exit);

  Deps deps_;
  AgentConfig config_;
  std::function<void(const Status&)> on_first_result_;
  std::shared_ptr<net::WsConnection> channel_;
  bool registered_ = false;
  int64_t node_timeout_ms_ = 10000;  // the head's, learnt at registration
  // Whether this node's tasks were stopped for want of the head (until it registers again).
  bool fenced_ = false;
  Timers::Id lease_timer_ = 0;
  bool ever_registered_ = false;
  bool stopping_ = false;
  bool exited_ = false;
  std::optional<Error> gave_up_;
  int64_t backoff_ms_ = 250;
  Timers::Id retry_timer_ = 0;
  Timers::Id heartbeat_timer_ = 0;
  // Exit reports the head has not acknowledged yet; resent after a reconnect.
  std::map<api::TaskKey, api::TaskExited> unacked_exits_;
  struct LogCursor {
    int64_t offset = 0;     // next byte to send
    bool exit_due = false;  // the task ended: its exit follows its last byte
    bool waiting = false;   // in log_ready_
  };
  std::map<api::TaskKey, LogCursor> log_cursors_;
  // The next task in turn that has a cursor (end() when none).
  std::map<api::TaskKey, LogCursor>::iterator next_ready();
  // At the end of an ended task's output: its exit (with its length when known), after
  // the output on the same path; the cursor goes.
  void send_exit_after_output(std::map<api::TaskKey, LogCursor>::iterator it, bool length_known);
  std::deque<api::TaskKey> log_ready_;  // tasks that may have output to send, in turn
  // How output and messages travel on this channel: decided after each registration.
  // While the stream is being opened, messages wait in held_messages_ and no output
  // is sent, so that everything keeps its order.
  enum class LogPath { kUndecided, kDialing, kStream, kFrames };
  LogPath log_path_ = LogPath::kUndecided;
  std::shared_ptr<LogStream> log_stream_;
  std::vector<std::string> held_messages_;
  Timers::Id log_batch_timer_ = 0;
  // Tasks running in an unpacked working_dir package; their job directory is released
  // when their exit is acknowledged.
  std::set<api::TaskKey> package_tasks_;
  std::map<std::string, std::string> last_note_;  // job -> the last pull progress it was told
};

}  // namespace ag::worker
