#include "head/leader/standby_server.h"

#include <nlohmann/json.hpp>

#include "common/version.h"
#include "net/tls.h"

namespace ag::head {
namespace {

net::ServerHandlers handlers_for(const StandbyServer* server,
                                 net::HttpResponse (StandbyServer::*answer)(const net::HttpRequest&) const) {
  net::ServerHandlers handlers;
  handlers.on_request = [server, answer](const net::HttpRequest& request, net::Respond respond) {
    respond((server->*answer)(request));
  };
  // Workers' channels and log streams are refused with the same answer.
  handlers.check_upgrade = [server, answer](const net::HttpRequest& request) -> std::optional<net::HttpResponse> {
    return (server->*answer)(request);
  };
  handlers.on_websocket = [](const std::shared_ptr<net::WsConnection>&, const net::HttpRequest&) {};
  return handlers;
}

}  // namespace

StandbyServer::StandbyServer(boost::asio::io_context& io, std::string self_address)
    : self_(std::move(self_address)),
      api_(io, handlers_for(this, &StandbyServer::answer), 64 * 1024),
      dashboard_(io, handlers_for(this, &StandbyServer::answer), 64 * 1024) {}

Status StandbyServer::start(const net::TlsIdentity* tls, const std::string& bind_ip, int port,
                            int dashboard_port) {
  if (tls) {
    ca_pem_ = tls->ca_pem;
    if (Status s = api_.enable_tls(*tls, true); !s) return s;
    if (Status s = dashboard_.enable_tls(*tls, true); !s) return s;
  }
  if (Status s = api_.listen(bind_ip, static_cast<uint16_t>(port)); !s) return s;
  return dashboard_.listen(bind_ip, static_cast<uint16_t>(dashboard_port));
}

void StandbyServer::stop() {
  api_.stop();
  dashboard_.stop();
}

void StandbyServer::set_leader(const std::string& leader_address, int64_t epoch) {
  std::lock_guard lock(mu_);
  leader_ = leader_address;
  epoch_ = epoch;
  store_problem_.clear();
}

void StandbyServer::set_store_problem(const std::string& problem) {
  std::lock_guard lock(mu_);
  store_problem_ = problem;
}

net::HttpResponse StandbyServer::answer(const net::HttpRequest& request) const {
  std::lock_guard lock(mu_);
  // The cluster CA is public: workers and clients pinning it may fetch it from any head.
  if (request.method == "GET" && request.path == "/api/tls/ca" && !ca_pem_.empty()) {
    return {200, "application/x-pem-file", ca_pem_};
  }
  nlohmann::json body{{"standby", true}, {"leader", leader_}, {"epoch", epoch_}, {"head", self_}};
  if (request.method == "GET" && request.path == "/api/version") {
    const BuildInfo& info = build_info();
    body.update({{"version", info.version}, {"commit", info.commit}, {"role", "standby"}});
    return {200, "application/json", body.dump()};
  }
  std::string why = "this head (" + self_ + ") stands by: ";
  if (!store_problem_.empty()) {
    why += "it cannot reach the cluster's store (" + store_problem_ +
           "), and no head can lead until the store is back; running tasks go on meanwhile";
  } else if (leader_.empty()) {
    why += "no head leads right now (a takeover is under way); try again in a few seconds";
  } else {
    why += "the leader is " + leader_ + " (epoch " + std::to_string(epoch_) +
           "); send requests there (give the CLI and workers every head's address: h1:6379,h2:6379)";
  }
  body["error"] = why;
  return {503, "application/json", body.dump()};
}

}  // namespace ag::head
