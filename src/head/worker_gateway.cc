#include "head/worker_gateway.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "api/protocol.h"
#include "net/auth.h"

namespace ag::head {
namespace {
using nlohmann::json;

net::HttpResponse json_error(int status, const std::string& message) {
  return {status, "application/json", json{{"error", message}}.dump()};
}

// The "busy_ports" of a register or heartbeat message (none when absent).
std::set<int> busy_ports_of(const json& msg) {
  std::set<int> ports;
  if (!msg.contains("busy_ports") || !msg["busy_ports"].is_array()) return ports;
  for (const auto& port : msg["busy_ports"]) {
    if (port.is_number_integer()) ports.insert(port.get<int>());
  }
  return ports;
}

// How a task ended, from a task_exited message (or an entry of a register's "exited").
TaskExit parse_exit(const json& m) {
  TaskExit exit;
  if (m.contains("exit_code") && !m["exit_code"].is_null()) exit.exit_code = m["exit_code"].get<int>();
  if (m.contains("signal") && !m["signal"].is_null()) exit.signal = m["signal"].get<int>();
  if (m.contains("start_error")) exit.start_error = m["start_error"].get<std::string>();
  if (m.contains("lost")) exit.lost = m["lost"].get<std::string>();
  return exit;
}

void send_error_and_close(const std::shared_ptr<net::WsConnection>& channel, const std::string& message) {
  channel->send(json{{"type", "error"}, {"message", message}}.dump(), false);
  channel->close();
}
}  // namespace

WorkerGateway::WorkerGateway(Deps deps, WorkerGatewayConfig config)
    : deps_(deps), config_(config), expiry_timer_(deps.io) {}

void WorkerGateway::start() { schedule_expiry(); }

void WorkerGateway::schedule_expiry() {
  // Failure detection is the one place a timer belongs: silence has no event.
  // Checked often enough that a silent node is declared dead within a quarter second
  // of its timeout; the check is a walk over the node table.
  int64_t period = std::clamp<int64_t>(config_.node_timeout_ms / 4, 50, 250);
  expiry_timer_.expires_after(std::chrono::milliseconds(period));
  expiry_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    for (const auto& id : deps_.nodes.expire(deps_.clock.steady_ms(), config_.node_timeout_ms)) {
      spdlog::warn("node {} missed heartbeats for {} ms: marked DEAD", id, config_.node_timeout_ms);
      deps_.jobs.on_node_dead(id);
    }
    schedule_expiry();
  });
}

std::optional<net::HttpResponse> WorkerGateway::check_upgrade(const net::HttpRequest& request) const {
  if (request.path != api::kWorkerConnectPath) {
    return json_error(404, "no WebSocket endpoint at " + request.path);
  }
  if (!net::has_valid_token(request, deps_.token)) {
    spdlog::warn("refused a worker join from {}: missing or wrong cluster token", request.remote_address);
    return json_error(401, "missing or wrong cluster token; pass the token printed by `ag start-head` with --token");
  }
  return std::nullopt;
}

void WorkerGateway::on_connection(std::shared_ptr<net::WsConnection> channel) {
  auto node_id = std::make_shared<std::string>();
  std::weak_ptr<net::WsConnection> weak = channel;
  channel->start(
      [this, weak, node_id](std::string data, bool binary) {
        if (auto ch = weak.lock()) on_message(ch, node_id.get(), data, binary);
      },
      [this, weak, node_id](const std::string& reason) {
        if (node_id->empty()) return;
        spdlog::info("node {} disconnected: {}", *node_id, reason);
        auto ch = weak.lock();
        deps_.nodes.disconnected(*node_id, ch.get());
      });
}

void WorkerGateway::on_message(const std::shared_ptr<net::WsConnection>& channel, std::string* node_id,
                               const std::string& data, bool binary) {
  if (node_id->empty()) {
    if (binary) return send_error_and_close(channel, "the first message must be a register message");
    return on_register(channel, node_id, data);
  }
  Node* node = deps_.nodes.find(*node_id);
  if (!node || node->channel != channel) return;  // superseded by a newer channel
  node->last_heartbeat_steady_ms = deps_.clock.steady_ms();
  if (binary) {
    std::string_view payload;
    auto header = api::decode_log_frame(data, &payload);
    if (!header) {
      spdlog::warn("malformed log frame from node {}", *node_id);
      return;
    }
    LogKey key{header->job_id, header->attempt, header->task_index};
    Status s = deps_.logs.append(key, header->offset, payload);
    if (!s && s.error().code == ErrorCode::kConflict) {
      spdlog::debug("{}", s.error().message);  // bytes still to come from the worker's resend
    } else if (!s) {
      spdlog::error("log of {} task {}: {}", header->job_id, header->task_index, s.error().message);
      // Said once per log in the job's own events, not only in the head's log file.
      if (log_errors_reported_.insert(key).second) {
        deps_.jobs.report_problem(header->job_id, "output of task " + std::to_string(header->task_index) +
                                                      " (attempt " + std::to_string(header->attempt) +
                                                      ") could not be stored: " + s.error().message +
                                                      "; the worker keeps its own copy");
      }
    }
    return;
  }
  json msg = json::parse(data, nullptr, false);
  if (!msg.is_object() || !msg.contains("type")) {
    spdlog::warn("malformed message from node {}", *node_id);
    return;
  }
  try {
    std::string type = msg.at("type").get<std::string>();
    if (type == "heartbeat") {
      if (msg.contains("usage") && msg["usage"].is_object()) {
        const json& u = msg["usage"];
        UsageSample sample;
        sample.time_ms = deps_.clock.now_ms();
        sample.cpu_percent = u.value("cpu_percent", 0.0);
        sample.memory_used_bytes = u.value("memory_used_bytes", int64_t{0});
        for (const auto& g : u.value("gpus", json::array())) {
          sample.gpus.push_back({g.value("index", int64_t{0}), g.value("utilization_percent", int64_t{0}),
                                 g.value("memory_used_bytes", int64_t{0}), g.value("memory_total_bytes", int64_t{0})});
        }
        deps_.nodes.record_usage(*node_id, std::move(sample));
      }
      if (Node* node = deps_.nodes.find(*node_id); node && msg.contains("busy_ports")) {
        node->busy_ports = busy_ports_of(msg);
      }
      return;
    }
    std::string job_id = msg.at("job_id").get<std::string>();
    int attempt = msg.at("attempt").get<int>();
    int task_index = msg.at("task_index").get<int>();
    if (type == "task_started") {
      deps_.jobs.on_task_started(job_id, attempt, task_index, msg.at("pid").get<int64_t>());
    } else if (type == "task_exited") {
      deps_.jobs.on_task_exited(job_id, attempt, task_index, parse_exit(msg));
      channel->send(json{{"type", "exit_ack"}, {"job_id", job_id}, {"attempt", attempt},
                         {"task_index", task_index}}.dump(), false);
    } else {
      spdlog::warn("unknown message type '{}' from node {}", type, *node_id);
    }
  } catch (const json::exception& e) {
    spdlog::warn("bad message from node {}: {}", *node_id, e.what());
  }
}

void WorkerGateway::on_register(const std::shared_ptr<net::WsConnection>& channel, std::string* node_id,
                                const std::string& text) {
  json msg = json::parse(text, nullptr, false);
  Node node;
  std::vector<ReportedTask> running;
  std::vector<std::pair<ReportedTask, TaskExit>> exited;  // the exit itself is resent later
  try {
    if (msg.at("type").get<std::string>() != "register") throw std::runtime_error("not a register message");
    node.node_id = msg.at("node_id").get<std::string>();
    node.address = msg.at("address").get<std::string>();
    node.hostname = msg.value("hostname", "");
    const json& res = msg.at("resources");
    node.total.cpu_millis = res.at("cpu_millis").get<int64_t>();
    node.total.memory_bytes = res.at("memory_bytes").get<int64_t>();
    node.gpu_ids = res.at("gpu_ids").get<std::vector<int>>();
    node.total.gpus = static_cast<int64_t>(node.gpu_ids.size());
    node.busy_ports = busy_ports_of(msg);
    for (const auto& r : msg.value("running", json::array())) {
      running.push_back({r.at("job_id").get<std::string>(), r.at("attempt").get<int>(),
                         r.at("task_index").get<int>(), r.at("pid").get<int64_t>()});
    }
    for (const auto& e : msg.value("exited", json::array())) {
      exited.push_back({ReportedTask{e.at("job_id").get<std::string>(), e.at("attempt").get<int>(),
                                     e.at("task_index").get<int>(), 0},
                        parse_exit(e)});
    }
  } catch (const std::exception& e) {
    return send_error_and_close(channel, std::string("bad register message: ") + e.what());
  }
  if (node.node_id.empty() || node.node_id.size() > 64) {
    return send_error_and_close(channel, "bad register message: node_id must be 1-64 characters");
  }
  *node_id = node.node_id;
  node.channel = channel;
  node.state = NodeState::kAlive;
  node.registered_ms = deps_.clock.now_ms();
  node.last_heartbeat_steady_ms = deps_.clock.steady_ms();
  const Node& added = deps_.nodes.upsert(std::move(node));
  spdlog::info("node {} registered: {} CPUs, {} MiB memory, {} GPUs, {} running task(s)", added.label(),
               added.total.cpu_millis / 1000.0, added.total.memory_bytes >> 20, added.total.gpus, running.size());
  channel->send(json{{"type", "registered"}, {"node_id", added.node_id},
                     {"node_timeout_ms", config_.node_timeout_ms}}.dump(), false);
  // Ask for the output the head missed while the channel was down. For tasks that
  // ended meanwhile the worker sends the missing bytes and then the exit again, so
  // the head records the end only once the log is whole.
  auto resume = [&](const ReportedTask& task) {
    int64_t have = deps_.logs.size({task.job_id, task.attempt, task.task_index});
    channel->send(json{{"type", "log_resume"}, {"job_id", task.job_id}, {"attempt", task.attempt},
                       {"task_index", task.task_index}, {"offset", have}}.dump(), false);
  };
  for (const auto& task : running) resume(task);
  for (const auto& [task, exit] : exited) resume(task);
  std::vector<ReportedTask> ended;
  for (const auto& [task, _] : exited) ended.push_back(task);
  deps_.jobs.on_node_registered(added.node_id, running, ended);
}

}  // namespace ag::head
