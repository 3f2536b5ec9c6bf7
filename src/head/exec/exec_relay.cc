#include "head/exec/exec_relay.h"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <random>

#include "api/exec_protocol.h"
#include "net/auth.h"

namespace ag::head {
namespace {

std::string new_session_id() {
  static std::mt19937_64 random{std::random_device{}()};
  static const char* digits = "0123456789abcdef";
  std::string id = "exec_";
  for (int i = 0; i < 24; ++i) id.push_back(digits[random() % 16]);
  return id;
}

net::HttpResponse refusal(int status, const std::string& message) {
  return {status, "application/json", nlohmann::json{{"error", message}}.dump()};
}

void send_status(const std::shared_ptr<net::WsConnection>& ws, const std::string& error) {
  ws->send(api::exec_frame(api::ExecChannel::kStatus, api::encode_exec_status({std::nullopt, std::nullopt, error})),
           true);
  ws->close();
}

}  // namespace

struct ExecRelay::Session {
  std::string node_id;
  std::shared_ptr<net::WsConnection> client;
  std::shared_ptr<net::WsConnection> worker;
  std::string early;  // what the client sent before the node dialled back
  Timers::Id dial_back = 0;
};

ExecRelay::~ExecRelay() {
  for (auto& [_, session] : sessions_) {
    if (session->dial_back) deps_.timers.cancel(session->dial_back);
  }
}

std::optional<net::HttpResponse> ExecRelay::refuse_new() const {
  if (sessions_.size() < kMaxSessions) return std::nullopt;
  return refusal(503, std::to_string(kMaxSessions) + " exec sessions are open on this head; try again once some end");
}

void ExecRelay::open(const std::shared_ptr<net::WsConnection>& client, api::ExecOpen request,
                     const std::string& node_id) {
  request.session = new_session_id();
  const std::string id = request.session;
  auto session = std::make_shared<Session>();
  session->node_id = node_id;
  session->client = client;
  sessions_[id] = session;
  std::weak_ptr<Session> weak = session;
  client->start(
      [this, weak](std::string data, bool binary) {
        auto s = weak.lock();
        if (!s || !binary || data.empty()) return;
        if (data[0] != static_cast<char>(api::ExecChannel::kStdin) &&
            data[0] != static_cast<char>(api::ExecChannel::kResize)) {
          return;
        }
        if (s->worker) return relay(s->client, s->worker, std::move(data));
        // Held until the node dials back; the client is not read meanwhile past a bound.
        s->early += static_cast<char>(data.size() >> 24);
        s->early += static_cast<char>(data.size() >> 16);
        s->early += static_cast<char>(data.size() >> 8);
        s->early += static_cast<char>(data.size());
        s->early += data;
        if (s->early.size() > api::kExecHighWaterBytes) s->client->pause_reading();
      },
      [this, id](const std::string& reason) { end(id, "the client closed (" + reason + ")"); });
  if (!deps_.nodes.send(node_id, request)) {
    send_status(client, "node " + node_id + " is not connected to the head; try again once it is back (`ag list-nodes`)");
    return end(id, "the node is not connected");
  }
  session->dial_back = deps_.timers.start(kDialBackMs, [this, id, node_id] {
    auto it = sessions_.find(id);
    if (it == sessions_.end() || it->second->worker) return;
    it->second->dial_back = 0;
    send_status(it->second->client, "node " + node_id + " did not start the command within " +
                                        std::to_string(kDialBackMs / 1000) +
                                        " s (a worker older than this head cannot run `ag exec`)");
    end(id, "the node did not dial back");
  });
}

std::optional<net::HttpResponse> ExecRelay::check_worker(const net::HttpRequest& request) const {
  Principal who = deps_.access.authenticate_token(net::bearer_token(request));
  if (who.kind != Principal::Kind::kNode) {
    return refusal(401, "an exec session is opened with a node's own credential");
  }
  const std::string id = request.path.substr(std::string(api::kWorkerExecPath).size());
  auto it = sessions_.find(id);
  if (it == sessions_.end() || it->second->node_id != who.name || it->second->worker) {
    return refusal(404, "no exec session " + id + " waits for node " + who.name);
  }
  return std::nullopt;
}

void ExecRelay::on_worker(const std::shared_ptr<net::WsConnection>& worker, const net::HttpRequest& request) {
  const std::string id = request.path.substr(std::string(api::kWorkerExecPath).size());
  auto it = sessions_.find(id);
  if (check_worker(request) || it == sessions_.end()) return worker->close();
  auto session = it->second;
  session->worker = worker;
  if (session->dial_back) deps_.timers.cancel(session->dial_back);
  session->dial_back = 0;
  std::weak_ptr<Session> weak = session;
  worker->start(
      [weak](std::string data, bool binary) {
        auto s = weak.lock();
        if (!s || !binary || data.empty()) return;
        const char channel = data[0];
        if (channel == static_cast<char>(api::ExecChannel::kStdout) ||
            channel == static_cast<char>(api::ExecChannel::kStderr) ||
            channel == static_cast<char>(api::ExecChannel::kStatus)) {
          relay(s->worker, s->client, std::move(data));
        }
      },
      [this, id](const std::string& reason) { end(id, "the node closed (" + reason + ")"); });
  // What the client sent meanwhile, in order.
  for (size_t at = 0; at + 4 <= session->early.size();) {
    const auto* p = reinterpret_cast<const unsigned char*>(session->early.data() + at);
    const size_t size = (size_t{p[0]} << 24) | (size_t{p[1]} << 16) | (size_t{p[2]} << 8) | p[3];
    worker->send(session->early.substr(at + 4, size), true);
    at += 4 + size;
  }
  session->early.clear();
  session->client->resume_reading();
}

void ExecRelay::relay(const std::shared_ptr<net::WsConnection>& from, const std::shared_ptr<net::WsConnection>& to,
                      std::string data) {
  to->send(std::move(data), true);
  if (to->queued_bytes() <= api::kExecHighWaterBytes) return;
  // The receiving side is slow: read no more from the sender until it has caught up.
  from->pause_reading();
  std::weak_ptr<net::WsConnection> sender = from;
  to->on_drained(api::kExecHighWaterBytes / 2, [sender] {
    if (auto s = sender.lock()) s->resume_reading();
  });
}

void ExecRelay::end(const std::string& id, const std::string& why) {
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return;
  auto session = it->second;
  sessions_.erase(it);
  if (session->dial_back) deps_.timers.cancel(session->dial_back);
  spdlog::info("exec session {} on node {} ended: {}", id, session->node_id, why);
  // The other side goes too, once what is queued for it is written.
  if (session->client) session->client->close();
  if (session->worker) session->worker->close();
}

}  // namespace ag::head
