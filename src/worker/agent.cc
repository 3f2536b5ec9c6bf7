#include "worker/agent.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>

#include "common/dir_spread.h"
#include "common/overloaded.h"

namespace ag::worker {
namespace {

std::string describe(const api::TaskExit& exit) {
  if (exit.signal) return "signal " + std::to_string(*exit.signal);
  if (!exit.lost.empty()) return exit.lost;
  return "exit code " + std::to_string(exit.exit_code.value_or(-1));
}

}  // namespace

Agent::Agent(Deps deps, AgentConfig config, std::function<void(const Status&)> on_first_result)
    : deps_(std::move(deps)),
      config_(std::move(config)),
      on_first_result_(std::move(on_first_result)),
      preparer_({deps_.launcher, deps_.packages, deps_.images}, config_),
      shipper_({deps_.timers, deps_.head, deps_.launcher}, config_.log_stream) {
  deps_.launcher.set_events(
      {[this](const api::TaskKey& id) { shipper_.task_output(id); },
       [this](const api::TaskKey& id, const api::TaskExit& exit) { on_task_exit(id, exit); }});
}

Agent::~Agent() = default;

void Agent::start() {
  // Working folders of tasks without a working_dir package, one per task.
  std::error_code ec;
  std::filesystem::create_directories(config_.data_dir + "/work", ec);
  // Kept after their tasks (what a task leaves in its working folder is the user's):
  // no churn to keep away from, and a folder beside its siblings is several times
  // cheaper to make (earlier versions spread them).
  spread_subdirectories(config_.data_dir + "/work", false);
  // Tasks a previous agent left behind: running ones are adopted (and listed in the
  // registration), ended ones are reported once the head is reached.
  for (const auto& r : deps_.launcher.recover()) {
    preparer_.adopted(r.id);
    if (r.exit) shipper_.recovered_exit(r.id, *r.exit);
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
  timers_.retry = deps_.timers.start(delay, [this] {
    timers_.retry = 0;
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
  shipper_.connected(channel_);
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
  reg.exited = shipper_.unacknowledged_exits();
  reg.busy_ports = deps_.busy_ports();
  if (deps_.unhealthy) reg.unhealthy = deps_.unhealthy();
  channel_->send(api::encode(reg), false);
}

void Agent::on_closed(const std::string& reason) {
  channel_.reset();
  shipper_.disconnected();
  if (stopping_) return;
  spdlog::warn("lost the channel to the head at {} ({}); reconnecting", deps_.head.describe(), reason);
  backoff_ms_ = 250;
  retry_later();
}

void Agent::heartbeat() {
  timers_.heartbeat = deps_.timers.start(config_.heartbeat_ms, [this] {
    timers_.heartbeat = 0;
    if (stopping_) return;
    deps_.launcher.check();
    shipper_.send(api::Heartbeat{deps_.sample_usage(), deps_.busy_ports()});
    heartbeat();
  });
}

void Agent::renew_lease() {
  // The head declares this node dead once it has heard nothing for its node timeout,
  // and may then run its gangs again elsewhere; two copies of a rank must never run,
  // so this node stops its tasks as soon as it has heard nothing for that long.
  if (timers_.lease) deps_.timers.cancel(timers_.lease);
  timers_.lease = deps_.timers.start(node_timeout_ms_ + 1, [this] {
    timers_.lease = 0;
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
  auto message = api::decode_head_message(text);
  // A head older than the newest leader this node has heard from is not the head: what
  // it says neither keeps this node's tasks alive nor reaches them.
  if (message.ok()) {
    const int64_t epoch = std::visit(Overloaded{[](const api::Registered& m) { return m.epoch; },
                                                [](const api::Launch& m) { return m.epoch; },
                                                [](const api::Kill& m) { return m.epoch; },
                                                [this](const auto&) { return newest_epoch_; }},
                                     message.value());
    if (stale(epoch, message.value())) return;
  }
  if (ever_registered_) renew_lease();
  if (!message.ok()) {
    spdlog::warn("bad message from the head: {}", message.error().message);
    // A launch that cannot be understood must still end its task, never strand it.
    if (auto task = api::task_key_of(text, "launch")) {
      report_start_error(*task, "the worker could not read the launch message: " + message.error().message);
    } else {
      shipper_.send(api::ErrorMessage{"the worker could not accept a message: " + message.error().message});
    }
    return;
  }
  std::visit(Overloaded{
                 [&](const api::Registered& m) { on_registered(m); },
                 [&](api::Launch& m) {
                   preparer_.prepare(
                       std::move(m), node_timeout_ms_,
                       [this](const api::TaskKey& id, const std::string& text) { shipper_.send(api::TaskNote{id, text}); },
                       [this](const api::TaskKey& id, Result<LaunchSpec> spec) { start_task(id, std::move(spec)); });
                 },
                 [&](const api::Kill& m) { handle_kill(m); },
                 [&](const api::LogResume& m) { shipper_.resume(m.task, m.offset); },
                 [&](const api::ExitAck& m) { handle_exit_ack(m.task); },
                 [&](const api::HeartbeatAck&) {},
                 [&](const api::Pull& m) { handle_pull(m); },
                 [&](const api::ExecOpen& m) {
                   if (deps_.open_exec) return deps_.open_exec(m);
                   shipper_.send(api::ErrorMessage{"this worker does not run commands beside tasks (`ag exec`)"});
                 },
                 [&](const api::StackRequest& m) {
                   if (!deps_.take_stacks) {
                     return shipper_.send(api::StackReport{m.request, m.task, false, "", "this worker does not take stacks"});
                   }
                   deps_.take_stacks(m, [this](api::StackReport report) { shipper_.send(std::move(report)); });
                 },
                 [&](const api::HealthCleared&) {
                   if (deps_.health_cleared) deps_.health_cleared();
                 },
                 [&](const api::ErrorMessage& m) { on_refused(m); },
             },
             message.value());
}

bool Agent::stale(int64_t epoch, const api::HeadMessage& message) {
  // Epoch 0 is a lone head's (no store shared, nobody to fence off).
  if (epoch == 0 || epoch >= newest_epoch_) return false;
  if (std::holds_alternative<api::Registered>(message)) {
    // A head that lost its lease and has not noticed yet: find the one that leads.
    spdlog::warn("the head at {} is of epoch {}, older than the {} this node has seen; trying the others",
                 deps_.head.describe(), epoch, newest_epoch_);
    deps_.head.skip();
    if (channel_) channel_->close();
  } else {
    spdlog::warn("ignored a {} from a head of epoch {}: a head of epoch {} leads now",
                 std::holds_alternative<api::Launch>(message) ? "launch" : "kill", epoch, newest_epoch_);
  }
  return true;
}

void Agent::on_registered(const api::Registered& m) {
  newest_epoch_ = std::max(newest_epoch_, m.epoch);
  ever_registered_ = true;
  fenced_ = false;
  node_timeout_ms_ = m.node_timeout_ms;
  renew_lease();
  if (!m.node_credential.empty()) {
    // The join token is done with: from now on the node is known by its own.
    if (Status s = deps_.head.adopt_credential(m.node_credential); !s) {
      spdlog::error("could not keep this node's credential ({}); the worker will need a join token again after a "
                    "restart",
                    s.error().message);
    }
  }
  backoff_ms_ = 250;
  spdlog::info("registered with the head at {} as {}", deps_.head.describe(), config_.node_id);
  shipper_.registered();
  // A check that failed while the registration was on its way was not heard: say it again.
  if (deps_.unhealthy) {
    if (auto unhealthy = deps_.unhealthy()) shipper_.send(*unhealthy);
  }
  report_first({});
}

void Agent::on_refused(const api::ErrorMessage& m) {
  spdlog::error("the head refused this worker: {}", m.message);
  if (shipper_.is_registered()) return;
  Error refusal{ErrorCode::kPermissionDenied, "the head refused this worker: " + m.message};
  report_first(refusal);
  if (m.final) {
    spdlog::error("giving up: the head will refuse this worker the same way every time");
    gave_up_ = refusal;
    stopping_ = true;
    if (channel_) channel_->close();
    stop_daemon();
  }
}

void Agent::handle_kill(const api::Kill& kill) {
  if (deps_.launcher.runs(kill.task) || shipper_.unacknowledged(kill.task)) {
    deps_.launcher.kill(kill.task, kill.grace_ms);
    return;
  }
  // Nothing runs under that id here (its launch never arrived, or it ended and the
  // head already has the exit): say so, so that a stop never waits on it forever.
  api::TaskExit exit;
  exit.lost = "the worker does not run this task";
  shipper_.send(api::TaskExited{kill.task, exit});
}

void Agent::handle_exit_ack(const api::TaskKey& task) {
  shipper_.acknowledged(task);
  deps_.launcher.forget(task);
  preparer_.finished(task);
}

void Agent::handle_pull(const api::Pull& pull) {
  const std::string id = pull.pull_id;
  if (std::string problem = api::image_reference_problem(pull.image); !problem.empty()) {
    return shipper_.send(api::PullUpdate{id, "", true, "image '" + pull.image.substr(0, 200) + "' " + problem});
  }
  deps_.images.prepare(
      pull.image, [this, id](const std::string& progress) { shipper_.send(api::PullUpdate{id, progress, false, ""}); },
      [this, id](const Result<ImageConfig>& config) {
        shipper_.send(api::PullUpdate{id, "", true, config.ok() ? "" : config.error().message});
      });
}

void Agent::report_start_error(const api::TaskKey& id, const std::string& error) {
  spdlog::warn("task {} could not start: {}", id.to_string(), error);
  api::TaskExit exit;
  exit.start_error = error;
  shipper_.start_failed(id, exit);
}

void Agent::start_task(const api::TaskKey& task, Result<LaunchSpec> spec) {
  if (!spec.ok()) return report_start_error(task, spec.error().message);
  auto pid = deps_.launcher.launch(spec.value());
  if (!pid.ok()) return report_start_error(task, pid.error().message);
  spdlog::info("started task {} as pid {}", task.to_string(), pid.value());
  shipper_.send(api::TaskStarted{task, pid.value()});
  shipper_.task_started(task);
}

void Agent::on_task_exit(const api::TaskKey& id, const api::TaskExit& exit) {
  spdlog::info("task {} ended: {}", id.to_string(), describe(exit));
  shipper_.task_exited(id, exit);
  if (stopping_ && deps_.launcher.idle()) stop_daemon();
}

void Agent::shutdown(int64_t grace_ms) {
  stopping_ = true;
  for (Timers::Id id : {timers_.retry, timers_.heartbeat, timers_.lease}) {
    if (id) deps_.timers.cancel(id);
  }
  shipper_.stop();
  deps_.launcher.kill_all(grace_ms);
  if (deps_.launcher.idle()) {
    if (channel_) channel_->close();
    stop_daemon();
  }
}

}  // namespace ag::worker
