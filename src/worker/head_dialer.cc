#include "worker/head_dialer.h"

#include <nlohmann/json.hpp>

#include "api/protocol.h"

namespace ag::worker {

namespace {

// The leader a standby head named in its 503 answer ({"standby": true, "leader": ...}),
// or "".
std::string leader_named(const std::string& message) {
  const size_t body = message.find('{');
  if (message.find("HTTP 503") == std::string::npos || body == std::string::npos) return "";
  auto doc = nlohmann::json::parse(message.substr(body), nullptr, false);
  if (!doc.is_object() || !doc.value("standby", false)) return "";
  return doc.value("leader", "");
}

}  // namespace

WsHeadDialer::WsHeadDialer(boost::asio::io_context& io, HeadAddresses& heads, NodeCredential& credential,
                           std::string bind_address)
    : io_(io), heads_(heads), credential_(credential) {
  options_.target = api::kWorkerConnectPath;
  options_.bind_address = std::move(bind_address);
}

void WsHeadDialer::dial(Done done) { attempt(0, std::move(done)); }

void WsHeadDialer::attempt(size_t tried, Done done) {
  options_.to = heads_.current();
  options_.headers["Authorization"] = "Bearer " + credential_.token();
  net::ws_dial(io_, options_, [this, tried, done = std::move(done)](Result<std::shared_ptr<net::WsConnection>> result) {
    if (result.ok() || result.error().code != ErrorCode::kUnavailable || heads_.size() == 1) return done(std::move(result));
    // Not this head: a standby (which names the leader) or one that does not answer.
    const std::string leader = leader_named(result.error().message);
    if (leader.empty() || leader == heads_.current().to_string() || !heads_.go_to(leader)) heads_.next();
    if (tried + 1 >= heads_.size()) return done(std::move(result));  // each tried once: the agent backs off
    attempt(tried + 1, done);
  });
}

void WsHeadDialer::dial_log_stream(LogStreamDone done) {
  worker::dial_log_stream(io_, heads_.current(), options_.bind_address, credential_.token(), std::move(done));
}

std::string WsHeadDialer::refused_hint() const {
  if (credential_.is_node_credential()) {
    return "the head no longer accepts this node's credential (the node was removed with `ag remove-node`, or the "
           "head's data was reset); to join again, delete " + credential_.path() +
           " and start the worker with a join token (`ag token create --join`)";
  }
  return "the join token is wrong, expired or revoked; get a new one with `ag token create --join` on the head";
}

}  // namespace ag::worker
