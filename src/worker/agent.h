// Agent: the worker's side of the channel to the head. It dials the head, registers
// this node (with what still runs), keeps the channel alive with heartbeats,
// reconnects with backoff when it drops, and turns head messages into TaskRunner
// calls and task events into messages. Io thread only.
//
//   dial -> register{resources, running} -> registered -> launch/kill ... -> (drop) -> backoff -> dial
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/resources.h"
#include "common/result.h"
#include "net/http_client.h"
#include "net/ws_connection.h"
#include "worker/package_cache.h"
#include "worker/task_runner.h"
#include "worker/usage_sampler.h"

namespace ag::worker {

struct AgentConfig {
  net::Endpoint head;
  std::string token;
  std::string node_id;
  std::string node_ip;
  std::string hostname;
  Resources resources;
  std::vector<int> gpu_ids;
  std::string data_dir;
  int64_t heartbeat_ms = 1000;
  int64_t max_backoff_ms = 5000;
  int64_t package_cache_bytes = int64_t{10} << 30;
  std::string cgroup_root;  // per-task control groups go here; "" where there are none
};

class Agent {
 public:
  // `on_first_result` is called once: ok after the first registration, or the first
  // failure (the agent keeps retrying unless the failure is kUnauthenticated).
  Agent(boost::asio::io_context& io, AgentConfig config, std::function<void(const Status&)> on_first_result);

  void start();
  // Kills all tasks and closes the channel.
  void shutdown(int64_t grace_ms);

 private:
  void dial();
  void on_connected(std::shared_ptr<net::WsConnection> channel);
  void on_message(const std::string& text);
  void on_closed(const std::string& reason);
  void retry_later();
  void heartbeat();
  void handle_launch(const std::string& text);
  // Starts a task whose working dir is ready; reports task_started or the start error.
  void start_task(LaunchSpec spec);
  void report_start_error(const TaskId& id, const std::string& error);
  // A directory with `python` and `python3` links to `executable`, for PATH.
  Result<std::string> python_shim(const std::string& executable);
  void resend_log(const TaskId& id, int64_t from_offset);
  void send(const std::string& text);
  void report_first(const Status& status);

  void on_task_output(const TaskId& id, int64_t offset, std::string_view data);
  void on_task_exit(const TaskId& id, const ExitStatus& exit);
  static nlohmann::json exit_report(const TaskId& id, const ExitStatus& exit);

  boost::asio::io_context& io_;
  AgentConfig config_;
  std::function<void(const Status&)> on_first_result_;
  TaskRunner runner_;
  PackageCache packages_;
  UsageSampler usage_;
  std::shared_ptr<net::WsConnection> channel_;
  bool registered_ = false;
  int64_t node_timeout_ms_ = 10000;  // the head's, learnt at registration
  bool stopping_ = false;
  int64_t backoff_ms_ = 250;
  boost::asio::steady_timer retry_timer_;
  boost::asio::steady_timer heartbeat_timer_;
  // Exit reports the head has not acknowledged yet; resent after a reconnect.
  std::map<TaskId, std::string> unacked_exits_;
  // Tasks running in an unpacked working_dir package; their job directory is released
  // when their exit is acknowledged.
  std::set<TaskId> package_tasks_;
};

}  // namespace ag::worker
