#include "worker/agent.h"

#include <spdlog/spdlog.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "api/protocol.h"
#include "common/dir_spread.h"
#include "common/env_expand.h"
#include "common/sha256.h"
#include "net/ws_client.h"
#include "worker/busy_ports.h"

extern char** environ;

namespace ag::worker {
namespace {
using nlohmann::json;

std::map<std::string, std::string> own_environment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string entry(*e);
    size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    std::string name = entry.substr(0, eq);
    // The daemon's own settings are not the task's business.
    if (name == "AG_TOKEN" || name.rfind("AG_", 0) == 0) continue;
    env[name] = entry.substr(eq + 1);
  }
  return env;
}
}  // namespace

Agent::Agent(boost::asio::io_context& io, AgentConfig config, std::function<void(const Status&)> on_first_result)
    : io_(io),
      config_(std::move(config)),
      on_first_result_(std::move(on_first_result)),
      runner_(io, config_.data_dir, config_.cgroup_root,
              RunnerCallbacks{[this](const TaskId& id, int64_t off, std::string_view d) { on_task_output(id, off, d); },
                              [this](const TaskId& id, const ExitStatus& e) { on_task_exit(id, e); }}),
      packages_(io, PackageCacheConfig{config_.data_dir + "/packages", config_.package_cache_bytes, config_.head,
                                       config_.token}),
      retry_timer_(io),
      heartbeat_timer_(io) {}

void Agent::start() {
  // Working folders of tasks without a working_dir package, one per task.
  std::error_code ec;
  std::filesystem::create_directories(config_.data_dir + "/work", ec);
  spread_subdirectories(config_.data_dir + "/work");
  // Tasks a previous agent left behind: running ones are adopted (and listed in the
  // registration), ended ones are reported once the head is reached.
  for (const auto& r : runner_.recover()) {
    if (packages_.retain(r.id.job_id)) package_tasks_.insert(r.id);
    if (!r.exit) continue;
    unacked_exits_[r.id] = exit_report(r.id, *r.exit).dump();
  }
  packages_.remove_unused();
  dial();
  heartbeat();
}

void Agent::report_first(const Status& status) {
  if (!on_first_result_) return;
  auto fn = std::move(on_first_result_);
  on_first_result_ = nullptr;
  fn(status);
}

void Agent::dial() {
  if (stopping_) return;
  net::WsDialOptions options;
  options.to = config_.head;
  options.target = api::kWorkerConnectPath;
  options.headers["Authorization"] = "Bearer " + config_.token;
  options.bind_address = config_.node_ip;
  net::ws_dial(io_, options, [this](Result<std::shared_ptr<net::WsConnection>> result) {
    if (stopping_) return;
    if (!result.ok()) {
      spdlog::warn("{}; retrying in {} ms", result.error().message, backoff_ms_);
      report_first(result.error());
      if (result.error().code == ErrorCode::kUnauthenticated) {
        spdlog::error("giving up: the cluster token is wrong");
        stopping_ = true;
        io_.stop();
        return;
      }
      return retry_later();
    }
    on_connected(std::move(result.value()));
  });
}

void Agent::retry_later() {
  retry_timer_.expires_after(std::chrono::milliseconds(backoff_ms_));
  backoff_ms_ = std::min(backoff_ms_ * 2, config_.max_backoff_ms);
  retry_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) dial();
  });
}

void Agent::on_connected(std::shared_ptr<net::WsConnection> channel) {
  channel_ = std::move(channel);
  std::weak_ptr<net::WsConnection> weak = channel_;
  channel_->start([this](std::string data, bool binary) { if (!binary) on_message(data); },
                  [this, weak](const std::string& reason) {
                    if (weak.lock() == channel_) on_closed(reason);
                  });
  json running = json::array();
  for (const auto& r : runner_.running()) {
    running.push_back({{"job_id", r.id.job_id}, {"attempt", r.id.attempt},
                       {"task_index", r.id.task_index}, {"pid", r.pid}});
  }
  json exited = json::array();
  for (const auto& [_, report] : unacked_exits_) exited.push_back(json::parse(report));
  json msg = {{"type", "register"},
              {"node_id", config_.node_id},
              {"address", config_.node_ip},
              {"hostname", config_.hostname},
              {"resources", {{"cpu_millis", config_.resources.cpu_millis},
                             {"memory_bytes", config_.resources.memory_bytes},
                             {"gpu_ids", config_.gpu_ids}}},
              {"running", running},
              {"exited", exited},
              {"busy_ports", busy_ports(api::kMasterPortFirst, api::kMasterPortLast)}};
  channel_->send(msg.dump(), false);
}

void Agent::on_closed(const std::string& reason) {
  channel_.reset();
  if (stopping_) return;
  spdlog::warn("lost the channel to the head at {} ({}); reconnecting", config_.head.to_string(), reason);
  registered_ = false;
  backoff_ms_ = 250;
  retry_later();
}

void Agent::send(const std::string& text) {
  if (channel_ && registered_) channel_->send(text, false);
}

void Agent::heartbeat() {
  heartbeat_timer_.expires_after(std::chrono::milliseconds(config_.heartbeat_ms));
  heartbeat_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopping_) return;
    runner_.check_supervisors();
    UsageSample u = usage_.sample();
    json gpus = json::array();
    for (const auto& g : u.gpus) {
      gpus.push_back({{"index", g.index}, {"utilization_percent", g.utilization_percent},
                      {"memory_used_bytes", g.memory_used_bytes}, {"memory_total_bytes", g.memory_total_bytes}});
    }
    send(json{{"type", "heartbeat"},
              {"usage", {{"cpu_percent", u.cpu_percent}, {"memory_used_bytes", u.memory_used_bytes}, {"gpus", gpus}}},
              {"busy_ports", busy_ports(api::kMasterPortFirst, api::kMasterPortLast)}}
             .dump());
    heartbeat();
  });
}

void Agent::on_message(const std::string& text) {
  json msg = json::parse(text, nullptr, false);
  if (!msg.is_object()) return;
  std::string type = msg.value("type", "");
  try {
    if (type == "registered") {
      registered_ = true;
      node_timeout_ms_ = msg.value("node_timeout_ms", node_timeout_ms_);
      backoff_ms_ = 250;
      spdlog::info("registered with the head at {} as {}", config_.head.to_string(), config_.node_id);
      report_first({});
    } else if (type == "launch") {
      handle_launch(text);
    } else if (type == "kill") {
      TaskId id{msg.at("job_id").get<std::string>(), msg.at("attempt").get<int>(), msg.at("task_index").get<int>()};
      if (runner_.output_offset(id) || unacked_exits_.count(id)) {
        runner_.kill(id, msg.at("grace_ms").get<int64_t>());
      } else {
        // Nothing runs under that id here (its launch never arrived, or it ended and the
        // head already has the exit): say so, so that a stop never waits on it forever.
        json reply = {{"type", "task_exited"}, {"job_id", id.job_id}, {"attempt", id.attempt},
                      {"task_index", id.task_index}, {"lost", "the worker does not run this task"}};
        send(reply.dump());
      }
    } else if (type == "log_resume") {
      resend_log({msg.at("job_id").get<std::string>(), msg.at("attempt").get<int>(), msg.at("task_index").get<int>()},
                 msg.at("offset").get<int64_t>());
    } else if (type == "exit_ack") {
      TaskId id{msg.at("job_id").get<std::string>(), msg.at("attempt").get<int>(), msg.at("task_index").get<int>()};
      unacked_exits_.erase(id);
      runner_.forget(id);
      if (package_tasks_.erase(id)) packages_.release(id.job_id);
    } else if (type == "error") {
      spdlog::error("the head refused this worker: {}", msg.value("message", ""));
    }
  } catch (const json::exception& e) {
    spdlog::warn("bad {} message from the head: {}", type, e.what());
    // A launch that cannot be understood must still end its task, never strand it.
    if (type == "launch" && msg.contains("job_id") && msg.contains("attempt") && msg.contains("task_index")) {
      json reply = {{"type", "task_exited"}, {"job_id", msg["job_id"]}, {"attempt", msg["attempt"]},
                    {"task_index", msg["task_index"]},
                    {"start_error", std::string("the worker could not read the launch message: ") + e.what()}};
      send(reply.dump());
    }
  }
}

void Agent::handle_launch(const std::string& text) {
  json msg = json::parse(text);
  LaunchSpec spec;
  spec.id = {msg.at("job_id").get<std::string>(), msg.at("attempt").get<int>(), msg.at("task_index").get<int>()};
  spec.entrypoint = msg.at("entrypoint").get<std::string>();
  spec.orphan_timeout_ms = node_timeout_ms_;
  spec.env = own_environment();
  for (auto& [k, v] : msg.at("env").items()) spec.env[k] = v.get<std::string>();
  // Output reaches the log as it is written, not when a buffer fills; a rank whose
  // peer died errors out instead of hanging in a collective.
  spec.env.try_emplace("PYTHONUNBUFFERED", "1");
  spec.env.try_emplace("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1");
  spec.env.try_emplace("NCCL_ASYNC_ERROR_HANDLING", "1");
  std::string python = msg.value("python_executable", "");
  if (!python.empty()) {
    // `python` and `python3` resolve to the asked interpreter, wherever they appear.
    auto shim = python_shim(python);
    if (!shim.ok()) return report_start_error(spec.id, shim.error().message);
    spec.env["PATH"] = shim.value() + (spec.env.count("PATH") ? ":" + spec.env["PATH"] : "");
  }
  // runtime_env.env_vars expand against the environment built so far.
  std::map<std::string, std::string> expanded;
  const json env_vars = msg.value("env_vars", json::object());
  for (const auto& [k, v] : env_vars.items()) {
    expanded[k] = expand_env_vars(v.get<std::string>(), spec.env);
  }
  for (auto& [k, v] : expanded) spec.env[k] = v;
  std::string package = msg.value("working_dir_hash", "");
  if (package.empty()) {
    spec.working_dir = config_.data_dir + "/work/" + spec.id.job_id + "." + std::to_string(spec.id.attempt) + "." +
                       std::to_string(spec.id.task_index);
    return start_task(std::move(spec));
  }
  packages_.prepare(spec.id.job_id, package, [this, spec, package](Result<std::string> dir) mutable {
    if (!dir.ok()) {
      return report_start_error(spec.id, "working_dir package sha256:" + package + ": " + dir.error().message);
    }
    spec.working_dir = dir.value();
    // Counted once per task: a repeated launch of the same task must not keep it.
    if (!package_tasks_.insert(spec.id).second) packages_.release(spec.id.job_id);
    start_task(std::move(spec));
  });
}

Result<std::string> Agent::python_shim(const std::string& executable) {
  if (executable.empty() || executable[0] != '/' || ::access(executable.c_str(), X_OK) != 0) {
    return invalid_argument("python executable '" + executable + "' not found on node " + config_.node_id + " (" +
                            config_.node_ip + ")" + (executable[0] != '/' ? ": give an absolute path" : ""));
  }
  std::string dir = config_.data_dir + "/python-shims/" + sha256_hex(executable).substr(0, 16);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  // Scripts rather than symlinks: a virtualenv's interpreter reached through a link in
  // another folder would not find its environment, and sys.executable would name the link.
  std::string quoted = "'";
  for (char c : executable) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  quoted += "'";
  for (const char* name : {"python", "python3"}) {
    std::string path = dir + "/" + name;
    std::string tmp = path + ".tmp";
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << "#!/bin/sh\nexec " << quoted << " \"$@\"\n";
      if (!out) return internal_error("cannot write " + tmp);
    }
    std::filesystem::permissions(tmp, std::filesystem::perms(0755), ec);
    std::filesystem::rename(tmp, path, ec);
    if (ec) return internal_error("cannot create " + path + ": " + ec.message());
  }
  return dir;
}

void Agent::report_start_error(const TaskId& id, const std::string& error) {
  spdlog::warn("task {} could not start: {}", id.to_string(), error);
  json reply = {{"type", "task_exited"}, {"job_id", id.job_id}, {"attempt", id.attempt},
                {"task_index", id.task_index}, {"start_error", error}};
  unacked_exits_[id] = reply.dump();
  send(reply.dump());
}

void Agent::start_task(LaunchSpec spec) {
  auto pid = runner_.launch(spec);
  if (!pid.ok()) return report_start_error(spec.id, pid.error().message);
  spdlog::info("started task {} as pid {}", spec.id.to_string(), pid.value());
  json reply = {{"type", "task_started"}, {"job_id", spec.id.job_id}, {"attempt", spec.id.attempt},
                {"task_index", spec.id.task_index}, {"pid", pid.value()}};
  send(reply.dump());
}

void Agent::resend_log(const TaskId& id, int64_t from_offset) {
  // Output written while the head was away is in the runner's own copy: send what the
  // head lacks, then (for a task that has ended) its exit, so the head sees the whole
  // log before the end of the task.
  std::optional<int64_t> live_end = runner_.output_offset(id);
  std::ifstream in(runner_.log_path(id), std::ios::binary);
  if (in) {
    in.seekg(from_offset);
    std::string chunk(64 * 1024, '\0');
    int64_t offset = from_offset;
    while (!live_end || offset < *live_end) {
      int64_t want = static_cast<int64_t>(chunk.size());
      if (live_end) want = std::min(want, *live_end - offset);
      in.read(chunk.data(), want);
      std::streamsize got = in.gcount();
      if (got <= 0) break;
      channel_->send(api::encode_log_frame({id.job_id, id.attempt, id.task_index, offset},
                                           std::string_view(chunk.data(), static_cast<size_t>(got))), true);
      offset += got;
    }
  }
  if (auto it = unacked_exits_.find(id); it != unacked_exits_.end()) channel_->send(it->second, false);
}

void Agent::on_task_output(const TaskId& id, int64_t offset, std::string_view data) {
  if (!channel_ || !registered_) return;
  channel_->send(api::encode_log_frame({id.job_id, id.attempt, id.task_index, offset}, data), true);
}

nlohmann::json Agent::exit_report(const TaskId& id, const ExitStatus& exit) {
  json report = {{"type", "task_exited"}, {"job_id", id.job_id}, {"attempt", id.attempt},
                 {"task_index", id.task_index},
                 {"exit_code", exit.exit_code ? json(*exit.exit_code) : json(nullptr)},
                 {"signal", exit.signal ? json(*exit.signal) : json(nullptr)}};
  if (!exit.lost.empty()) report["lost"] = exit.lost;
  return report;
}

void Agent::on_task_exit(const TaskId& id, const ExitStatus& exit) {
  spdlog::info("task {} ended: {}", id.to_string(),
               exit.signal ? "signal " + std::to_string(*exit.signal)
                           : (exit.lost.empty() ? "exit code " + std::to_string(exit.exit_code.value_or(-1)) : exit.lost));
  std::string report = exit_report(id, exit).dump();
  unacked_exits_[id] = report;
  send(report);
  if (stopping_ && runner_.idle()) io_.stop();
}

void Agent::shutdown(int64_t grace_ms) {
  stopping_ = true;
  retry_timer_.cancel();
  heartbeat_timer_.cancel();
  runner_.kill_all(grace_ms);
  if (runner_.idle()) {
    if (channel_) channel_->close();
    io_.stop();
  }
}

}  // namespace ag::worker
