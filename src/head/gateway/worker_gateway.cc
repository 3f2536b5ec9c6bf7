#include "head/gateway/worker_gateway.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "api/job_spec.h"
#include "api/log_frame.h"
#include "api/log_stream.h"
#include "head/logs/log_stream_reader.h"
#include "net/http_server.h"
#include "common/overloaded.h"
#include "net/auth.h"

namespace ag::head {
namespace {

using Verdict = LogStreamReader::Verdict;

constexpr int64_t kLogRetryMs = 1000;
// What a node may say about why it is unhealthy (the rest is cut).
constexpr size_t kMaxHealthReasonBytes = 2048;

net::HttpResponse json_error(int status, const std::string& message) {
  return {status, "application/json", nlohmann::json{{"error", message}}.dump()};
}

std::string lowercase(std::string text) {
  for (auto& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

void send(ChannelTraffic& traffic, const std::shared_ptr<net::WsConnection>& channel, const api::HeadMessage& message) {
  std::string text = api::encode(message);
  traffic.sent(message, text.size());
  channel->send(std::move(text), false);
}

// A message the node may not send (about another node's task): said to the node and
// in the head's log; nothing changes.
void refuse(ChannelTraffic& traffic, const std::shared_ptr<net::WsConnection>& channel, const std::string& node_id,
            const Error& error) {
  spdlog::warn("refused a message from node {}: {}", node_id, error.message);
  send(traffic, channel, api::ErrorMessage{"the head refused a message: " + error.message});
}

void send_error_and_close(ChannelTraffic& traffic, const std::shared_ptr<net::WsConnection>& channel,
                          const std::string& message) {
  send(traffic, channel, api::ErrorMessage{message});
  channel->close();
}

}  // namespace

WorkerGateway::WorkerGateway(Deps deps, WorkerGatewayConfig config) : deps_(deps), config_(config) {}

WorkerGateway::~WorkerGateway() {
  // Their handlers point here: closed, a reader's pending wait ends without calling them.
  for (auto& [node_id, stream] : streams_) stream.reader->close();
}

void WorkerGateway::start() { schedule_expiry(); }

void WorkerGateway::schedule_expiry() {
  // Failure detection is the one place a timer belongs: silence has no event.
  // Checked often enough that a silent node is declared dead within a quarter second
  // of its timeout; the check is a walk over the node table.
  int64_t period = std::clamp<int64_t>(config_.node_timeout_ms / 4, 50, 250);
  deps_.timers.start(period, [this] {
    for (const auto& id : deps_.nodes.expire(deps_.clock.steady_ms(), config_.node_timeout_ms)) {
      spdlog::warn("node {} missed heartbeats for {} ms: marked DEAD", id, config_.node_timeout_ms);
      deps_.jobs.controller.on_node_dead(id);
    }
    schedule_expiry();
  });
}

std::optional<net::HttpResponse> WorkerGateway::check_upgrade(const net::HttpRequest& request) const {
  auto upgrade = request.headers.find("upgrade");
  bool raw = upgrade != request.headers.end() && lowercase(upgrade->second) == api::kLogStreamProtocol;
  if (request.path == api::kWorkerLogsPath && raw) return check_log_stream(request);
  if (request.path != api::kWorkerConnectPath || raw) {
    return json_error(404, "no " + std::string(raw ? api::kLogStreamProtocol : "WebSocket") + " endpoint at " +
                               request.path);
  }
  Principal who = deps_.access.authenticate_token(net::bearer_token(request));
  if (who.kind == Principal::Kind::kNone) {
    spdlog::warn("refused a worker join from {}: {}", request.remote_address, who.refusal);
    return json_error(401, "the head refused the token: " + who.refusal +
                               "; start the worker with a join token (`ag start-head` prints one, `ag token create "
                               "--join` makes more): `ag start-worker --head-node HOST:PORT --token-file FILE`");
  }
  if (who.kind == Principal::Kind::kUser && !who.is_admin()) {
    spdlog::warn("refused a worker join from {}: user {} is not an admin", request.remote_address, who.name);
    return json_error(403, "user " + who.name + "'s token cannot register a node; use a join token (`ag token create --join`)");
  }
  return std::nullopt;
}

std::optional<net::HttpResponse> WorkerGateway::check_log_stream(const net::HttpRequest& request) const {
  Principal who = deps_.access.authenticate_token(net::bearer_token(request));
  if (who.kind == Principal::Kind::kNone) {
    spdlog::warn("refused a log stream from {}: {}", request.remote_address, who.refusal);
    return json_error(401, "the head refused the token: " + who.refusal);
  }
  if (who.kind != Principal::Kind::kNode) {
    spdlog::warn("refused a log stream from {}: not a node's credential", request.remote_address);
    return json_error(403, "a log stream is opened with a node's own credential (which a worker gets when it "
                           "registers), not a join or user token");
  }
  const Node* node = deps_.nodes.find(who.name);
  if (!node || !node->channel) {
    return json_error(409, "node " + who.name + " has no channel to the head; register it (" +
                               std::string(api::kWorkerConnectPath) + ") before opening its log stream");
  }
  return std::nullopt;
}

void WorkerGateway::on_log_stream(net::RawUpgrade&& upgrade) {
  // Checked again: the node may have gone between the check and the 101.
  Principal who = deps_.access.authenticate_token(net::bearer_token(upgrade.request));
  const Node* node = who.kind == Principal::Kind::kNode ? deps_.nodes.find(who.name) : nullptr;
  if (!node || !node->channel) return;  // the socket closes as `upgrade` goes
  const std::string node_id = who.name;
  // Made again if the last one could not be made or emptied (readers keep theirs).
  if (!splice_pipe_ || !splice_pipe_->ok()) splice_pipe_ = std::make_shared<SplicePipe>();
  auto reader = std::make_shared<LogStreamReader>(std::move(upgrade.stream), std::move(upgrade.leftover),
                                                  std::move(upgrade.held), stream_piece_, splice_pipe_);
  // One stream per node, tied to the channel it was opened under.
  if (auto old = streams_.find(node_id); old != streams_.end()) old->second.reader->close();
  streams_[node_id] = {reader, node->channel};
  spdlog::info("node {} opened its log stream", node_id);
  std::weak_ptr<LogStreamReader> weak = reader;
  // The node's current channel while this is its current stream, else null (the
  // stream is then closed: the worker opens another once it registers again).
  auto channel_of = [this, weak, node_id]() -> std::shared_ptr<net::WsConnection> {
    auto it = streams_.find(node_id);
    const Node* n = deps_.nodes.find(node_id);
    if (it == streams_.end() || it->second.reader != weak.lock() || !n || !n->channel ||
        n->channel != it->second.channel.lock()) {
      return nullptr;
    }
    return n->channel;
  };
  // Output from the stream: taken while it is the node's current stream (which keeps
  // the node alive like any message), the record dropped when the node may not send it.
  auto take_output = [this, channel_of, node_id](const api::TaskKey& task, const std::function<Status()>& store) {
    auto channel = channel_of();
    if (!channel) return Verdict::kClose;
    if (Node* n = deps_.nodes.find(node_id)) n->last_heartbeat_steady_ms = deps_.clock.steady_ms();
    return take_log_bytes(channel, node_id, task, store) ? Verdict::kTake : Verdict::kSkipRecord;
  };
  reader->start(LogStreamReader::Handlers{
      [this, take_output](const api::LogFrameHeader& at, std::string_view bytes) {
        return take_output(at.task, [&] { return deps_.logs.append(at.task, at.offset, bytes); });
      },
      [this, take_output](const api::LogFrameHeader& at, int pipe_fd, size_t bytes) {
        return take_output(at.task, [&] { return deps_.logs.append_from(at.task, at.offset, pipe_fd, bytes); });
      },
      [this, channel_of, node_id](std::string_view message) {
        auto channel = channel_of();
        if (!channel) return Verdict::kClose;
        on_message(channel, node_id, std::string(message), false);
        return Verdict::kTake;
      },
      [this, weak, node_id](const std::string& reason) {
        auto it = streams_.find(node_id);
        if (it == streams_.end() || it->second.reader != weak.lock()) return;
        spdlog::info("node {}'s log stream ended: {}", node_id, reason);
        streams_.erase(it);
      }});
}

void WorkerGateway::close_log_stream(const std::string& node_id) {
  auto it = streams_.find(node_id);
  if (it == streams_.end()) return;
  it->second.reader->close();
  streams_.erase(it);
}

void WorkerGateway::on_connection(const std::shared_ptr<net::WsConnection>& channel, const net::HttpRequest& request) {
  auto state = std::make_shared<ChannelState>();
  state->who = deps_.access.authenticate_token(net::bearer_token(request));
  state->from = request.remote_address;
  std::weak_ptr<net::WsConnection> weak = channel;
  channel->start(
      [this, weak, state](const std::string& data, bool binary) {
        auto ch = weak.lock();
        if (!ch || !acting()) return;
        if (state->node_id.empty() && !state->registering) {
          if (binary)
            return send_error_and_close(deps_.nodes.traffic(), ch, "the first message must be a register message");
          auto message = api::decode_worker_message(data);
          if (message.ok()) {
            deps_.nodes.traffic().received(message.value(), data.size());
          } else {
            deps_.nodes.traffic().received_unreadable(data.size());
          }
          if (!message.ok() && message.error().code == ErrorCode::kConflict) {
            // Another protocol version: retrying cannot help, so the worker gives up.
            spdlog::warn("refused a worker from {}: {}", state->from, message.error().message);
            send(deps_.nodes.traffic(), ch,
                 api::ErrorMessage{message.error().message + "; registration refused", true});
            return ch->close();
          }
          if (!message.ok())
            return send_error_and_close(deps_.nodes.traffic(), ch, "bad register message: " + message.error().message);
          auto* reg = std::get_if<api::Register>(&message.value());
          if (!reg)
            return send_error_and_close(deps_.nodes.traffic(), ch, "the first message must be a register message");
          return on_register(ch, state, std::move(*reg));
        }
        if (state->node_id.empty()) return;  // its registration is still being stored
        on_message(ch, state->node_id, data, binary);
      },
      [this, weak, state](const std::string& reason) {
        if (state->node_id.empty()) return;
        spdlog::info("node {} disconnected: {}", state->node_id, reason);
        auto ch = weak.lock();
        if (auto it = streams_.find(state->node_id); it != streams_.end() && it->second.channel.lock() == ch) {
          close_log_stream(state->node_id);
        }
        deps_.nodes.disconnected(state->node_id, ch.get());
      });
}

void WorkerGateway::on_message(const std::shared_ptr<net::WsConnection>& channel, const std::string& node_id_ref,
                               const std::string& data, bool binary) {
  const std::string* node_id = &node_id_ref;
  Node* node = deps_.nodes.find(*node_id);
  if (!node || node->channel != channel) return;  // superseded by a newer channel
  node->last_heartbeat_steady_ms = deps_.clock.steady_ms();
  if (binary) {
    deps_.nodes.traffic().received_log_frame(data.size());
    return on_log_frame(channel, *node_id, data);
  }
  auto message = api::decode_worker_message(data);
  if (message.ok()) deps_.nodes.traffic().received(message.value(), data.size());
  if (!message.ok()) {
    deps_.nodes.traffic().received_unreadable(data.size());
    spdlog::warn("bad message from node {}: {}", *node_id, message.error().message);
    return send(deps_.nodes.traffic(), channel,
                api::ErrorMessage{"the head could not accept a message: " + message.error().message});
  }
  std::visit(Overloaded{
                 [&](const api::Heartbeat& m) {
                   UsageSample sample;
                   sample.time_ms = deps_.clock.now_ms();
                   sample.cpu_percent = m.usage.cpu_percent;
                   sample.memory_used_bytes = m.usage.memory_used_bytes;
                   sample.gpus = m.usage.gpus;
                   deps_.nodes.record_usage(*node_id, std::move(sample));
                   // Only about tasks placed on this node: no node speaks for another's.
                   std::vector<JobUsage::Report> reports;
                   for (const auto& t : m.usage.tasks) {
                     if (!may_report(deps_.jobs, *node_id, t.task)) continue;
                     JobUsage::Report report{t};
                     const Job* job = deps_.jobs.table.find(t.task.job_id);
                     const auto& task = job->attempts[static_cast<size_t>(t.task.attempt)]
                                            .tasks[static_cast<size_t>(t.task.task_index)];
                     JobUsage::add_gpus(report, task.gpu_ids, m.usage.gpus);
                     reports.push_back(std::move(report));
                   }
                   job_usage_.record(reports, deps_.clock.now_ms());
                   if (Node* n = deps_.nodes.find(*node_id)) n->busy_ports = {m.busy_ports.begin(), m.busy_ports.end()};
                   send(deps_.nodes.traffic(), channel, api::HeartbeatAck{});
                 },
                 [&](const api::TaskStarted& m) {
                   Status s = deps_.jobs.controller.on_task_started(*node_id, m.task, m.pid);
                   if (!s && s.error().code == ErrorCode::kPermissionDenied)
                     refuse(deps_.nodes.traffic(), channel, *node_id, s.error());
                 },
                 [&](const api::TaskExited& m) {
                   Status s = deps_.jobs.controller.on_task_exited(*node_id, m.task, m.exit);
                   if (!s && s.error().code == ErrorCode::kPermissionDenied)
                     return refuse(deps_.nodes.traffic(), channel, *node_id, s.error());
                   // Not yet acknowledged while the head lacks bytes of its log: the
                   // worker keeps them, is asked for them again, and sends the exit
                   // again after them.
                   // The end is recorded at once (the job goes on; its resources are
                   // free), and an event says when its log is short meanwhile.
                   if (m.log_bytes > deps_.logs.size(m.task) && may_report(deps_.jobs, *node_id, m.task)) {
                     return retry_log(*node_id, m.task);
                   }
                   // Acknowledged once the log and the end are on disk (the worker lets
                   // go of the task then), and also when the head no longer knows the task.
                   std::weak_ptr<net::WsConnection> weak = channel;
                   deps_.logs.after_synced(m.task, [this, weak, task = m.task, node = *node_id, bytes = m.log_bytes] {
                     // A log that could not be made durable was emptied: taken again,
                     // and the exit, which comes again after it, acknowledged then.
                     if (bytes > deps_.logs.size(task) && may_report(deps_.jobs, node, task)) {
                       return retry_log(node, task);
                     }
                     // (The registry, whose traffic it is, outlives the writer.)
                     deps_.jobs.writer.after_durable([traffic = &deps_.nodes.traffic(), weak, task] {
                       if (auto ch = weak.lock()) send(*traffic, ch, api::ExitAck{task});
                     });
                   });
                 },
                 [&](const api::PullUpdate& m) {
                   if (on_pull_update_) on_pull_update_(*node_id, m);
                 },
                 [&](const api::StackReport& m) {
                   if (on_stack_report_) on_stack_report_(*node_id, m);
                 },
                 [&](const api::HealthReport& m) {
                   api::HealthReport report = m;
                   report.reason = report.reason.substr(0, kMaxHealthReasonBytes);
                   deps_.jobs.controller.on_node_health(*node_id, report);
                 },
                 [&](const api::TaskNote& m) {
                   if (!may_report(deps_.jobs, *node_id, m.task)) return;
                   deps_.jobs.controller.report_problem(m.task.job_id, m.text.substr(0, 300));
                 },
                 [&](const api::Register&) {
                   send(deps_.nodes.traffic(), channel,
                        api::ErrorMessage{"register is only accepted as the first message of a channel"});
                 },
                 [&](const api::ErrorMessage& m) { spdlog::warn("node {} reports an error: {}", *node_id, m.message); },
             },
             message.value());
}

void WorkerGateway::on_log_frame(const std::shared_ptr<net::WsConnection>& channel, const std::string& node_id,
                                 const std::string& frame) {
  std::string_view payload;
  auto header = api::decode_log_frame(frame, &payload);
  if (!header.ok()) {
    spdlog::warn("bad log frame from node {}: {}", node_id, header.error().message);
    return send(deps_.nodes.traffic(), channel,
                api::ErrorMessage{"the head could not accept a log frame: " + header.error().message});
  }
  take_log_bytes(channel, node_id, header->task,
                 [&] { return deps_.logs.append(header->task, header->offset, payload); });
}

bool WorkerGateway::take_log_bytes(const std::shared_ptr<net::WsConnection>& channel, const std::string& node_id,
                                   const api::TaskKey& key, const std::function<Status()>& store) {
  if (!acting()) return true;  // a head about to stand by writes nothing more
  // Output is taken only from the node the task runs on, and only for tasks the head
  // placed: no node writes into another's log, and no made-up key opens a file.
  if (Status allowed = may_report(deps_.jobs, node_id, key); !allowed) {
    refuse(deps_.nodes.traffic(), channel, node_id, allowed.error());
    return false;
  }
  Status s = store();
  if (s) return true;
  if (s.error().code == ErrorCode::kConflict) {
    spdlog::debug("{}", s.error().message);  // bytes before these are missing: asked for again
  } else {
    spdlog::error("log of {} task {}: {}", key.job_id, key.task_index, s.error().message);
    // Said once per log in the job's own events, not only in the head's log file.
    if (log_errors_reported_.insert(key).second) {
      deps_.jobs.controller.report_problem(key.job_id, "output of task " + std::to_string(key.task_index) + " (attempt " +
                                                std::to_string(key.attempt) + ") could not be stored: " +
                                                s.error().message +
                                                "; the worker keeps it and the head takes it again once it can");
    }
  }
  retry_log(node_id, key);
  return true;
}

void WorkerGateway::retry_log(const std::string& node_id, const api::TaskKey& key) {
  log_retries_[key] = node_id;
  if (log_retry_armed_) return;
  log_retry_armed_ = true;
  deps_.timers.start(kLogRetryMs, [this] {
    log_retry_armed_ = false;
    auto due = std::move(log_retries_);
    log_retries_.clear();
    for (const auto& [key, node_id] : due) {
      // A node that is away is asked at its next registration anyway.
      const Node* node = deps_.nodes.find(node_id);
      if (!node || !node->channel) continue;
      send(deps_.nodes.traffic(), node->channel, api::LogResume{key, deps_.logs.size(key)});
    }
  });
}

void WorkerGateway::on_register(const std::shared_ptr<net::WsConnection>& channel,
                                const std::shared_ptr<ChannelState>& state, api::Register message) {
  const Principal& who = state->who;
  const std::string id = message.node_id;  // a copy: `message` moves into a callback below
  if (message.labels.size() > api::kMaxNodeLabels) {
    return send_error_and_close(deps_.nodes.traffic(), channel,
                                "node " + id + " has " + std::to_string(message.labels.size()) + " labels; at most " +
                                    std::to_string(api::kMaxNodeLabels) + "; registration refused");
  }
  for (const auto& [key, value] : message.labels) {
    if (auto problem = api::label_problem(key, value)) {
      return send_error_and_close(deps_.nodes.traffic(), channel,
                                  "node label " + key.substr(0, 64) + ": " + *problem + "; registration refused");
    }
  }
  if (message.allowed_mounts.size() > api::kMaxAllowedMountPrefixes) {
    return send_error_and_close(deps_.nodes.traffic(), channel,
                                "node " + id + " allows " + std::to_string(message.allowed_mounts.size()) +
                                    " mount prefixes; at most " + std::to_string(api::kMaxAllowedMountPrefixes) +
                                    "; registration refused");
  }
  for (const auto& prefix : message.allowed_mounts) {
    if (std::string problem = api::mount_path_problem(prefix); !problem.empty()) {
      return send_error_and_close(deps_.nodes.traffic(), channel,
                                  "allowed mount prefix " + problem.substr(0, 300) + "; registration refused");
    }
  }
  if (who.kind == Principal::Kind::kNode) {
    // A node's own credential: its own id only, whether or not it is live.
    if (who.name != id) {
      spdlog::warn("refused a registration from {}: node {}'s credential used for node id {}", state->from, who.name, id);
      return send_error_and_close(
          deps_.nodes.traffic(), channel,
          "this node credential belongs to node " + who.name + ", not to node " + id + "; registration refused");
    }
    return complete_register(channel, *state, message, "");
  }
  // A join (or admin) token: only for a node id that is not live.
  const Node* existing = deps_.nodes.find(id);
  if (existing && existing->state != NodeState::kDead) {
    spdlog::warn("refused a registration from {} as live node {}: no node credential", state->from, existing->label());
    deps_.audit.record({deps_.clock.now_ms(), who.name, state->from, "register node " + id,
                        "refused: the node id is live"});
    return send_error_and_close(
        deps_.nodes.traffic(), channel,
        "node id " + id + " is already registered and live (" + existing->address +
            "); only that node's own credential can register it again. If this is a new machine, give it "
            "its own --data-dir; if it replaces that node, run `ag remove-node " +
            id + "` first");
  }
  state->registering = true;
  std::weak_ptr<net::WsConnection> weak = channel;
  deps_.access.issue_node_credential(id, [this, weak, state, message = std::move(message)](Result<std::string> credential) {
    state->registering = false;
    auto ch = weak.lock();
    if (!ch) return;
    if (!credential.ok()) {
      return send_error_and_close(
          deps_.nodes.traffic(), ch,
          "the head could not store this node's credential: " + credential.error().message + "; try again later");
    }
    deps_.audit.record({deps_.clock.now_ms(), state->who.name, state->from, "register node " + message.node_id,
                        "ok: node credential issued"});
    complete_register(ch, *state, message, credential.value());
  });
}

void WorkerGateway::complete_register(const std::shared_ptr<net::WsConnection>& channel, ChannelState& state,
                                      const api::Register& message, const std::string& credential) {
  std::string* node_id = &state.node_id;
  Node node;
  node.node_id = message.node_id;
  node.address = message.address;
  node.hostname = message.hostname;
  node.network_interface = message.network_interface.substr(0, 64);
  node.total.cpu_millis = message.cpu_millis;
  node.total.memory_bytes = message.memory_bytes;
  node.gpu_ids = message.gpu_ids;
  node.total.gpus = static_cast<int64_t>(node.gpu_ids.size());
  node.busy_ports = {message.busy_ports.begin(), message.busy_ports.end()};
  node.labels = message.labels;
  node.limits = message.limits.substr(0, 200);
  node.container_engine = message.container_engine.substr(0, 200);
  node.allowed_mounts = message.allowed_mounts;
  *node_id = node.node_id;
  node.channel = channel;
  node.state = NodeState::kAlive;
  node.registered_ms = deps_.clock.now_ms();
  node.last_heartbeat_steady_ms = deps_.clock.steady_ms();
  const Node& added = deps_.nodes.upsert(std::move(node));
  spdlog::info("node {} registered: {} CPUs, {} MiB memory, {} GPUs, {} running task(s)", added.label(),
               added.total.cpu_millis / 1000.0, added.total.memory_bytes >> 20, added.total.gpus,
               message.running.size());
  send(deps_.nodes.traffic(), channel,
       api::Registered{added.node_id, config_.node_timeout_ms, credential, config_.epoch});
  // Ask for the output the head missed while the channel was down. For tasks that
  // ended meanwhile the worker sends the missing bytes and then the exit again, so
  // the head normally records the end once the log is whole.
  // Only for tasks placed on this node: a made-up or foreign key opens no log (a
  // running one is killed by the reconciliation below; an ended one the head does
  // not know is acknowledged at once, so the worker lets go of it).
  std::vector<api::TaskKey> ended;
  for (const auto& task : message.running) {
    if (may_report(deps_.jobs, added.node_id, task.task)) {
      send(deps_.nodes.traffic(), channel, api::LogResume{task.task, deps_.logs.size(task.task)});
    }
  }
  for (const auto& exited : message.exited) {
    if (!may_report(deps_.jobs, added.node_id, exited.task)) {
      send(deps_.nodes.traffic(), channel, api::ExitAck{exited.task});
      continue;
    }
    send(deps_.nodes.traffic(), channel, api::LogResume{exited.task, deps_.logs.size(exited.task)});
    ended.push_back(exited.task);
  }
  deps_.jobs.controller.on_node_registered(added.node_id, message.running, ended);
  if (message.unhealthy) {
    api::HealthReport report = *message.unhealthy;
    report.reason = report.reason.substr(0, kMaxHealthReasonBytes);
    deps_.jobs.controller.on_node_health(added.node_id, report);
  }
}

}  // namespace ag::head

namespace ag::head {

void WorkerGateway::remove_node(const std::string& node_id, const std::function<void(Status)>& done) {
  if (!deps_.nodes.find(node_id) && !deps_.access.has_node_credential(node_id)) {
    return done(not_found("no node with id '" + node_id + "'; list nodes with `ag list-nodes`"));
  }
  deps_.access.revoke_node_credential(node_id, [this, node_id, done](const Result<bool>& revoked) {
    if (!revoked.ok()) return done(revoked.error());
    if (Node* node = deps_.nodes.find(node_id)) {
      spdlog::warn("node {} removed: its credential is revoked and its tasks are lost", node->label());
      if (deps_.nodes.mark_dead(node_id)) deps_.jobs.controller.on_node_dead(node_id);
      deps_.nodes.erase(node_id);
    }
    done({});
  });
}

}  // namespace ag::head
