#include "worker/agent.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/dir_spread.h"
#include "common/overloaded.h"
#include "common/sha256.h"

namespace ag::worker {
namespace {

// Task output travels in frames of up to kLogChunkBytes, read from the task's file
// only while fewer than kLogWindowBytes wait to be written to the head; once the
// channel is down to kLogLowWaterBytes reading goes on. A node's memory for output is
// thus bounded whatever its tasks write: the rest waits in their files.
constexpr int64_t kLogChunkBytes = 256 * 1024;
constexpr size_t kLogWindowBytes = 4 << 20;
constexpr size_t kLogLowWaterBytes = 1 << 20;
// New output is sent this long after the task wrote it, so that a task's many small
// writes travel as a few frames rather than one each.
constexpr int64_t kLogBatchMs = 5;
constexpr int64_t kLogRetryMs = 100;  // after a task's output could not be read
// On the log stream output goes from file to socket in the kernel: records are larger,
// and bound no memory here (the socket's buffer is the window).
constexpr int64_t kStreamRecordBytes = 4 << 20;

std::string describe(const api::TaskExit& exit) {
  if (exit.signal) return "signal " + std::to_string(*exit.signal);
  if (!exit.lost.empty()) return exit.lost;
  return "exit code " + std::to_string(exit.exit_code.value_or(-1));
}

}  // namespace

Agent::Agent(Deps deps, AgentConfig config, std::function<void(const Status&)> on_first_result)
    : deps_(std::move(deps)), config_(std::move(config)), on_first_result_(std::move(on_first_result)) {
  deps_.launcher.set_events(
      {[this](const api::TaskKey& id) { on_task_output(id); },
       [this](const api::TaskKey& id, const api::TaskExit& exit) { on_task_exit(id, exit); }});
}

Agent::~Agent() {
  if (log_stream_) log_stream_->close();  // its callbacks point here
}

void Agent::start() {
  // Working folders of tasks without a working_dir package, one per task.
  std::error_code ec;
  std::filesystem::create_directories(config_.data_dir + "/work", ec);
  spread_subdirectories(config_.data_dir + "/work");
  // Tasks a previous agent left behind: running ones are adopted (and listed in the
  // registration), ended ones are reported once the head is reached.
  for (const auto& r : deps_.launcher.recover()) {
    if (deps_.packages.retain(r.id.job_id)) package_tasks_.insert(r.id);
    if (r.exit) unacked_exits_[r.id] = api::TaskExited{r.id, *r.exit};
  }
  deps_.packages.remove_unused();
  dial();
  heartbeat();
}

void Agent::report_first(const Status& status) {
  if (!on_first_result_) return;
  auto fn = std::move(on_first_result_);
  on_first_result_ = nullptr;
  fn(status);
}

void Agent::stop_daemon() {
  if (exited_) return;
  exited_ = true;
  deps_.exit();
}

void Agent::dial() {
  if (stopping_) return;
  deps_.head.dial([this](Result<std::shared_ptr<net::WsConnection>> result) {
    if (stopping_) return;
    if (!result.ok()) {
      const Error& error = result.error();
      if (error.code == ErrorCode::kUnauthenticated || error.code == ErrorCode::kPermissionDenied) {
        // A refused token gets the dialer's advice; a refusal that explains itself
        // (a head that does not verify, a token of the wrong kind) stands alone.
        std::string hint = error.code == ErrorCode::kUnauthenticated ? "; " + deps_.head.refused_hint() : "";
        spdlog::error("giving up: {}{}", error.message, hint);
        gave_up_ = Error{error.code, error.message + hint};
        report_first(*gave_up_);
        stopping_ = true;
        stop_daemon();
        return;
      }
      if (!ever_registered_ && !config_.wait_for_head && error.code == ErrorCode::kUnavailable) {
        spdlog::error("giving up: {}", error.message);
        gave_up_ = Error{error.code, error.message + "; start the head first, check --head-node, or pass "
                                                     "--wait-for-head to keep trying until it answers"};
        report_first(*gave_up_);
        stopping_ = true;
        stop_daemon();
        return;
      }
      spdlog::warn("{}; retrying in {} ms", error.message, backoff_ms_);
      report_first(error);
      return retry_later();
    }
    on_connected(std::move(result.value()));
  });
}

void Agent::retry_later() {
  int64_t delay = backoff_ms_;
  backoff_ms_ = std::min(backoff_ms_ * 2, config_.max_backoff_ms);
  retry_timer_ = deps_.timers.start(delay, [this] {
    retry_timer_ = 0;
    dial();
  });
}

void Agent::on_connected(std::shared_ptr<net::WsConnection> channel) {
  channel_ = std::move(channel);
  std::weak_ptr<net::WsConnection> weak = channel_;
  channel_->start(
      [this](const std::string& data, bool binary) {
        if (!binary) on_message(data);
      },
      [this, weak](const std::string& reason) {
        if (weak.lock() == channel_) on_closed(reason);
      });
  channel_->on_drained(kLogLowWaterBytes, [this, weak] {
    if (weak.lock() == channel_) pump_logs();
  });
  if (config_.find_network_interface) {
    auto found = config_.find_network_interface();
    if (!found.ok()) {
      spdlog::warn("tasks keep network interface {}: {}", config_.network_interface, found.error().message);
    } else if (found.value() != config_.network_interface) {
      spdlog::info("the node address {} is now on network interface {} (was {})", config_.node_ip, found.value(),
                   config_.network_interface);
      config_.network_interface = found.value();
    }
  }
  api::Register reg;
  reg.protocol_version = config_.protocol_version;
  reg.node_id = config_.node_id;
  reg.address = config_.node_ip;
  reg.hostname = config_.hostname;
  reg.network_interface = config_.network_interface;
  reg.cpu_millis = config_.resources.cpu_millis;
  reg.memory_bytes = config_.resources.memory_bytes;
  reg.gpu_ids = config_.gpu_ids;
  reg.labels = config_.labels;
  reg.limits = config_.limits;
  reg.container_engine = deps_.images.engine().name.empty() ? "" : deps_.images.engine().summary();
  reg.allowed_mounts = config_.allowed_mounts;
  for (const auto& r : deps_.launcher.running()) reg.running.push_back({r.id, r.pid});
  for (const auto& [_, exited] : unacked_exits_) reg.exited.push_back(exited);
  reg.busy_ports = deps_.busy_ports();
  channel_->send(api::encode(reg), false);
}

void Agent::on_closed(const std::string& reason) {
  channel_.reset();
  if (log_stream_) log_stream_->close();
  log_stream_.reset();
  log_path_ = LogPath::kUndecided;
  held_messages_.clear();  // the next registration reports what still matters
  // The next head says where each log stands (log_resume) before any more is sent.
  log_cursors_.clear();
  log_ready_.clear();
  if (stopping_) return;
  spdlog::warn("lost the channel to the head at {} ({}); reconnecting", deps_.head.describe(), reason);
  registered_ = false;
  backoff_ms_ = 250;
  retry_later();
}

void Agent::send(const api::WorkerMessage& message) {
  if (!channel_ || !registered_) return;
  switch (log_path_) {
    case LogPath::kStream:
      return log_stream_->send_message(api::encode(message));
    case LogPath::kDialing:
      // Heartbeats keep the node alive meanwhile (they carry no order with the rest).
      if (std::holds_alternative<api::Heartbeat>(message)) return channel_->send(api::encode(message), false);
      return held_messages_.push_back(api::encode(message));
    case LogPath::kUndecided:
    case LogPath::kFrames:
      return channel_->send(api::encode(message), false);
  }
}

void Agent::open_log_stream() {
  if (!config_.log_stream) {
    log_path_ = LogPath::kFrames;
    return;
  }
  log_path_ = LogPath::kDialing;
  std::weak_ptr<net::WsConnection> weak = channel_;
  deps_.head.dial_log_stream([this, weak](Result<std::shared_ptr<LogStream>> result) {
    if (weak.lock() != channel_ || !channel_ || log_path_ != LogPath::kDialing) {
      // The channel it was for is gone.
      if (result.ok()) result.value()->close();
      return;
    }
    if (result.ok()) {
      log_stream_ = std::move(result.value());
      log_path_ = LogPath::kStream;
      log_stream_->on_failed([this, weak](const std::string& reason) {
        // What was on its way is lost with it: reconnecting makes the head say again
        // where each log stands, and the exits not acknowledged are reported again.
        spdlog::warn("lost the log stream to the head ({}); reconnecting", reason);
        if (auto channel = weak.lock(); channel && channel == channel_) channel->close();
      });
    } else {
      if (result.error().code == ErrorCode::kNotFound) {
        spdlog::info("{}; task output goes in frames on the channel", result.error().message);
      } else {
        spdlog::warn("{}; task output goes in frames on the channel", result.error().message);
      }
      log_path_ = LogPath::kFrames;
    }
    auto held = std::move(held_messages_);
    held_messages_.clear();
    for (auto& text : held) {
      if (log_path_ == LogPath::kStream) {
        log_stream_->send_message(std::move(text));
      } else {
        channel_->send(std::move(text), false);
      }
    }
    // Only now may a drained stream pull output: the held messages go first, in order.
    if (log_path_ == LogPath::kStream) log_stream_->on_drained([this] { pump_logs(); });
    pump_logs();
  });
}

void Agent::heartbeat() {
  heartbeat_timer_ = deps_.timers.start(config_.heartbeat_ms, [this] {
    heartbeat_timer_ = 0;
    if (stopping_) return;
    deps_.launcher.check();
    send(api::Heartbeat{deps_.sample_usage(), deps_.busy_ports()});
    heartbeat();
  });
}

void Agent::renew_lease() {
  // The head declares this node dead once it has heard nothing for its node timeout,
  // and may then run its gangs again elsewhere; two copies of a rank must never run,
  // so this node stops its tasks as soon as it has heard nothing for that long.
  if (lease_timer_) deps_.timers.cancel(lease_timer_);
  lease_timer_ = deps_.timers.start(node_timeout_ms_ + 1, [this] {
    lease_timer_ = 0;
    if (stopping_ || fenced_) return;
    fenced_ = true;
    if (deps_.launcher.idle()) return;
    spdlog::warn("nothing from the head for {} ms (its node timeout): stopping this node's tasks, which the head "
                 "retries elsewhere",
                 node_timeout_ms_);
    deps_.launcher.kill_all(config_.fence_grace_ms);
  });
}

void Agent::on_message(const std::string& text) {
  if (ever_registered_) renew_lease();
  auto message = api::decode_head_message(text);
  if (!message.ok()) {
    spdlog::warn("bad message from the head: {}", message.error().message);
    // A launch that cannot be understood must still end its task, never strand it.
    if (auto task = api::task_key_of(text, "launch")) {
      report_start_error(*task, "the worker could not read the launch message: " + message.error().message);
    } else {
      send(api::ErrorMessage{"the worker could not accept a message: " + message.error().message});
    }
    return;
  }
  std::visit(Overloaded{
                 [&](const api::Registered& m) {
                   registered_ = true;
                   ever_registered_ = true;
                   fenced_ = false;
                   node_timeout_ms_ = m.node_timeout_ms;
                   renew_lease();
                   if (!m.node_credential.empty()) {
                     // The join token is done with: from now on the node is known by its own.
                     if (Status s = deps_.head.adopt_credential(m.node_credential); !s) {
                       spdlog::error("could not keep this node's credential ({}); the worker will need a join token "
                                     "again after a restart",
                                     s.error().message);
                     }
                   }
                   backoff_ms_ = 250;
                   spdlog::info("registered with the head at {} as {}", deps_.head.describe(), config_.node_id);
                   open_log_stream();
                   report_first({});
                 },
                 [&](api::Launch& m) { handle_launch(std::move(m)); },
                 [&](const api::Kill& m) { handle_kill(m); },
                 [&](const api::LogResume& m) { resume_log(m.task, m.offset); },
                 [&](const api::ExitAck& m) { handle_exit_ack(m.task); },
                 [&](const api::HeartbeatAck&) {},
                 [&](const api::Pull& m) { handle_pull(m); },
                 [&](const api::ErrorMessage& m) {
                   spdlog::error("the head refused this worker: {}", m.message);
                   if (registered_) return;
                   Error refusal{ErrorCode::kPermissionDenied, "the head refused this worker: " + m.message};
                   report_first(refusal);
                   if (m.final) {
                     spdlog::error("giving up: the head will refuse this worker the same way every time");
                     gave_up_ = refusal;
                     stopping_ = true;
                     if (channel_) channel_->close();
                     stop_daemon();
                   }
                 },
             },
             message.value());
}

void Agent::handle_kill(const api::Kill& kill) {
  if (deps_.launcher.runs(kill.task) || unacked_exits_.count(kill.task)) {
    deps_.launcher.kill(kill.task, kill.grace_ms);
    return;
  }
  // Nothing runs under that id here (its launch never arrived, or it ended and the
  // head already has the exit): say so, so that a stop never waits on it forever.
  api::TaskExit exit;
  exit.lost = "the worker does not run this task";
  send(api::TaskExited{kill.task, exit});
}

void Agent::handle_exit_ack(const api::TaskKey& task) {
  unacked_exits_.erase(task);
  deps_.launcher.forget(task);
  if (package_tasks_.erase(task)) deps_.packages.release(task.job_id);
}

void Agent::handle_launch(api::Launch launch) {
  auto shared = std::make_shared<api::Launch>(std::move(launch));
  LaunchSpec spec;
  spec.id = shared->task;
  spec.entrypoint = shared->entrypoint;
  spec.orphan_timeout_ms = node_timeout_ms_;
  spec.limits = {shared->memory_limit_bytes, shared->cpu_limit_millis};
  spec.owner = shared->owner;
  if (shared->image.empty()) {
    // Who the task is (its account's HOME, USER, LOGNAME), not who the worker is: what
    // its variables expand against too.
    auto identity = deps_.launcher.identity(spec.owner);
    if (!identity.ok()) return report_start_error(spec.id, identity.error().message);
    if (identity.value().empty()) return launch_with_environment(shared, std::move(spec), config_.inherited_env);
    api::Environment env = config_.inherited_env;
    for (auto& [name, value] : identity.value()) env[name] = value;
    return launch_with_environment(shared, std::move(spec), env);
  }

  const std::string node = "node " + config_.node_id + " (" + config_.node_ip + ")";
  // Checked again here: these go into the engine's command line.
  if (std::string problem = api::image_reference_problem(shared->image); !problem.empty()) {
    return report_start_error(spec.id, "image '" + shared->image.substr(0, 200) + "' " + problem);
  }
  if (std::string problem = mount_problem(shared->mounts); !problem.empty()) {
    return report_start_error(spec.id, problem);
  }
  const std::string image = shared->image;
  deps_.images.prepare(
      image,
      [this, id = spec.id, node](const std::string& progress) {
        // Once per job: its tasks on this node wait for the same pull.
        std::string& last = last_note_[id.job_id];
        if (last == progress) return;
        last = progress;
        send(api::TaskNote{id, node + ": " + progress});
      },
      [this, shared, spec, node, image](Result<ImageConfig> config) mutable {
        last_note_.erase(spec.id.job_id);
        if (!config.ok()) {
          return report_start_error(spec.id, node + " cannot run image " + image + ": " + config.error().message);
        }
        ContainerTask container;
        container.engine = deps_.images.engine();
        container.node_id = config_.node_id;
        container.image = image;
        container.mounts = shared->mounts;
        spec.container = std::move(container);
        // The task's environment builds on the image's, not the node's.
        launch_with_environment(shared, std::move(spec), config.value().env);
      });
}

void Agent::handle_pull(const api::Pull& pull) {
  const std::string id = pull.pull_id;
  if (std::string problem = api::image_reference_problem(pull.image); !problem.empty()) {
    return send(api::PullUpdate{id, "", true, "image '" + pull.image.substr(0, 200) + "' " + problem});
  }
  deps_.images.prepare(
      pull.image, [this, id](const std::string& progress) { send(api::PullUpdate{id, progress, false, ""}); },
      [this, id](const Result<ImageConfig>& config) {
        send(api::PullUpdate{id, "", true, config.ok() ? "" : config.error().message});
      });
}

std::string Agent::mount_problem(const std::vector<api::Mount>& mounts) const {
  const std::string node = "node " + config_.node_id + " (" + config_.node_ip + ")";
  if (mounts.size() > api::kMaxMounts) return "more than " + std::to_string(api::kMaxMounts) + " mounts";
  if (std::string problem = api::mounts_problem(mounts); !problem.empty()) return "mounts: " + problem;
  for (const auto& m : mounts) {
    for (const std::string* path : {&m.source, &m.target}) {
      if (std::string problem = api::mount_path_problem(*path); !problem.empty()) return "mount path " + problem;
    }
    if (!api::allowing_prefix(m.source, config_.allowed_mounts)) {
      std::string allowed;
      for (const auto& prefix : config_.allowed_mounts) allowed += (allowed.empty() ? "" : ", ") + prefix;
      return "mount source " + m.source + " is not under a path " + node + " allows (" +
             (allowed.empty() ? "it allows none" : "it allows " + allowed) + "); start its worker with `--allow-mount " +
             m.source + "` (or a folder above it)";
    }
    struct stat st{};
    if (::stat(m.source.c_str(), &st) != 0) {
      return "mount source " + m.source + " does not exist on " + node + ": " + std::strerror(errno);
    }
  }
  return "";
}

void Agent::launch_with_environment(const std::shared_ptr<api::Launch>& launch, LaunchSpec spec,
                                    const api::Environment& base_env) {
  std::string shim;
  if (!launch->python_executable.empty()) {
    // `python` and `python3` resolve to the asked interpreter, wherever they appear.
    // In a container the interpreter is the image's: the shim is mounted there.
    auto dir = python_shim(launch->python_executable, !spec.container);
    if (!dir.ok()) return report_start_error(spec.id, dir.error().message);
    shim = dir.value();
    if (spec.container) spec.container->mounts.push_back({shim, shim, true});
  }
  auto env = api::worker_task_environment(base_env, launch->env, launch->env_vars, shim, config_.network_interface);
  if (!env.ok()) return report_start_error(spec.id, env.error().message);
  if (spec.container) {
    // The container's GPUs are numbered from 0 inside it.
    std::vector<int> visible;
    if (auto it = env.value().find("CUDA_VISIBLE_DEVICES"); it != env.value().end()) {
      std::stringstream ids(it->second);
      for (std::string id; std::getline(ids, id, ',');) {
        if (!id.empty() && std::all_of(id.begin(), id.end(), ::isdigit)) visible.push_back(std::stoi(id));
      }
    }
    GpuDevices gpus = gpu_devices(visible, nvidia_cdi_present(), nvidia_control_nodes());
    if (!visible.empty()) env.value()["CUDA_VISIBLE_DEVICES"] = gpus.visible;
    spec.container->devices = std::move(gpus.devices);
    spec.container->env = std::move(env.value());
    // The engine client's: the node's, less what tasks never get (credentials).
    auto client_env = api::worker_task_environment(config_.inherited_env, {}, {}, "");
    if (!client_env.ok()) return report_start_error(spec.id, client_env.error().message);
    spec.env = std::move(client_env.value());
  } else {
    spec.env = std::move(env.value());
  }
  launch_in_working_dir(launch, std::move(spec));
}

void Agent::launch_in_working_dir(const std::shared_ptr<api::Launch>& launch, LaunchSpec spec) {
  const std::string& package = launch->working_dir_hash;
  if (package.empty()) {
    spec.working_dir = config_.data_dir + "/work/" + spec.id.job_id + "." + std::to_string(spec.id.attempt) + "." +
                       std::to_string(spec.id.task_index);
    return start_task(spec);
  }
  deps_.packages.prepare(spec.id.job_id, package, spec.owner, [this, spec, package](Result<std::string> dir) mutable {
    if (!dir.ok()) {
      return report_start_error(spec.id, "working_dir package sha256:" + package + ": " + dir.error().message);
    }
    spec.working_dir = dir.value();
    // Counted once per task: a repeated launch of the same task must not keep it.
    if (!package_tasks_.insert(spec.id).second) deps_.packages.release(spec.id.job_id);
    start_task(spec);
  });
}

Result<std::string> Agent::python_shim(const std::string& executable, bool on_node) {
  if (executable.empty() || executable[0] != '/' || (on_node && ::access(executable.c_str(), X_OK) != 0)) {
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

void Agent::report_start_error(const api::TaskKey& id, const std::string& error) {
  spdlog::warn("task {} could not start: {}", id.to_string(), error);
  api::TaskExit exit;
  exit.start_error = error;
  api::TaskExited report{id, exit};
  unacked_exits_[id] = report;
  send(report);
}

void Agent::start_task(const LaunchSpec& spec) {
  auto pid = deps_.launcher.launch(spec);
  if (!pid.ok()) return report_start_error(spec.id, pid.error().message);
  spdlog::info("started task {} as pid {}", spec.id.to_string(), pid.value());
  send(api::TaskStarted{spec.id, pid.value()});
  if (registered_) {
    log_cursors_[spec.id] = LogCursor{};
    want_log(spec.id);
    pump_logs();
  }
}

void Agent::resume_log(const api::TaskKey& id, int64_t from_offset) {
  // From the head's end of the log on; for a task that has ended, its exit follows the
  // last byte again, so the head sees the whole log before the end of the task.
  LogCursor& cursor = log_cursors_[id];
  cursor.offset = from_offset;
  cursor.exit_due = cursor.exit_due || unacked_exits_.count(id) > 0;
  want_log(id);
  pump_logs();
}

void Agent::want_log(const api::TaskKey& id) {
  auto it = log_cursors_.find(id);
  if (it == log_cursors_.end() || it->second.waiting) return;
  it->second.waiting = true;
  log_ready_.push_back(id);
}

void Agent::pump_logs() {
  if (log_path_ == LogPath::kDialing || log_path_ == LogPath::kUndecided) return;
  if (log_path_ == LogPath::kStream) return pump_stream();
  // Round robin over the tasks with output to send, one chunk each, while the channel
  // has room: a task that writes much does not hold up the others.
  while (channel_ && registered_ && channel_->queued_bytes() < kLogWindowBytes) {
    auto it = next_ready();
    if (it == log_cursors_.end()) break;
    const api::TaskKey id = it->first;
    LogCursor& cursor = it->second;
    std::string frame = api::log_frame_prefix({id, cursor.offset}, kLogChunkBytes);
    auto chunk = deps_.launcher.read_output(id, cursor.offset, kLogChunkBytes, frame);
    if (chunk.ok() && chunk.value() > 0) {
      channel_->send(std::move(frame), true);
      cursor.offset += static_cast<int64_t>(chunk.value());
      want_log(id);
      continue;
    }
    if (!chunk.ok() && chunk.error().code != ErrorCode::kNotFound) {
      retry_output(id, chunk.error().message);
      continue;
    }
    // At the end of what the task wrote so far. An ended task's exit goes now, with its
    // length, and its cursor with it (the head asks again if it lacks bytes).
    if (cursor.exit_due) send_exit_after_output(it, chunk.ok());
  }
}

std::map<api::TaskKey, Agent::LogCursor>::iterator Agent::next_ready() {
  while (!log_ready_.empty()) {
    auto it = log_cursors_.find(log_ready_.front());
    log_ready_.pop_front();
    if (it == log_cursors_.end()) continue;
    it->second.waiting = false;
    return it;
  }
  return log_cursors_.end();
}

void Agent::send_exit_after_output(std::map<api::TaskKey, LogCursor>::iterator it, bool length_known) {
  if (auto exited = unacked_exits_.find(it->first); exited != unacked_exits_.end()) {
    api::TaskExited report = exited->second;
    if (length_known) report.log_bytes = it->second.offset;
    if (log_path_ == LogPath::kStream) {
      log_stream_->send_message(api::encode(report));
    } else {
      channel_->send(api::encode(report), false);
    }
  }
  log_cursors_.erase(it);
}

void Agent::pump_stream() {
  // As pump_logs, one record of up to kStreamRecordBytes per task in turn; the stream
  // takes the next once the socket has taken the last.
  while (registered_ && log_stream_ && !log_stream_->busy()) {
    auto it = next_ready();
    if (it == log_cursors_.end()) break;
    const api::TaskKey id = it->first;
    LogCursor& cursor = it->second;
    const int64_t size = deps_.launcher.output_size(id);
    if (size > cursor.offset) {
      int64_t length = std::min<int64_t>(size - cursor.offset, kStreamRecordBytes);
      Status sent = log_stream_->send_file({id, cursor.offset}, deps_.launcher.output_path(id), length);
      if (!sent) {
        if (sent.error().code == ErrorCode::kNotFound) {
          want_log(id);  // gone meanwhile: its exit goes without a length
        } else {
          retry_output(id, sent.error().message);
        }
        continue;
      }
      cursor.offset += length;
      want_log(id);
      continue;
    }
    if (cursor.exit_due) send_exit_after_output(it, size >= 0);
  }
}

void Agent::retry_output(const api::TaskKey& id, const std::string& why) {
  // The file is there but cannot be read now (out of descriptors, ...): try again
  // shortly rather than send an end without its output.
  spdlog::warn("output of task {} cannot be read: {}; trying again", id.to_string(), why);
  auto it = log_cursors_.find(id);
  if (it == log_cursors_.end()) return;
  it->second.waiting = true;
  deps_.timers.start(kLogRetryMs, [this, id] {
    if (auto again = log_cursors_.find(id); again != log_cursors_.end()) {
      again->second.waiting = false;
      want_log(id);
      pump_logs();
    }
  });
}

void Agent::on_task_output(const api::TaskKey& id) {
  want_log(id);
  if (log_batch_timer_) return;
  log_batch_timer_ = deps_.timers.start(kLogBatchMs, [this] {
    log_batch_timer_ = 0;
    pump_logs();
  });
}

void Agent::on_task_exit(const api::TaskKey& id, const api::TaskExit& exit) {
  spdlog::info("task {} ended: {}", id.to_string(), describe(exit));
  api::TaskExited report{id, exit};
  unacked_exits_[id] = report;
  if (auto it = log_cursors_.find(id); it != log_cursors_.end()) {
    // Sent once the rest of its output is.
    it->second.exit_due = true;
    want_log(id);
    pump_logs();
  } else {
    // Not being sent (the head has not said where its copy ends): the length tells the
    // head whether it lacks bytes, which it then asks for before acknowledging.
    report.log_bytes = deps_.launcher.output_size(id);
    unacked_exits_[id] = report;
    send(report);
  }
  if (stopping_ && deps_.launcher.idle()) stop_daemon();
}

void Agent::shutdown(int64_t grace_ms) {
  stopping_ = true;
  if (retry_timer_) deps_.timers.cancel(retry_timer_);
  if (heartbeat_timer_) deps_.timers.cancel(heartbeat_timer_);
  if (lease_timer_) deps_.timers.cancel(lease_timer_);
  if (log_batch_timer_) deps_.timers.cancel(log_batch_timer_);
  deps_.launcher.kill_all(grace_ms);
  if (deps_.launcher.idle()) {
    if (channel_) channel_->close();
    stop_daemon();
  }
}

}  // namespace ag::worker
