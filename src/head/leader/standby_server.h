// StandbyServer: what a head that does not lead answers on its two ports while it waits
// for the lease. GET /api/version says who leads (role, leader, epoch); every other
// request but GET /api/tls/ca (the cluster CA, public), and every worker's connection,
// gets 503 naming the leader, so that the CLI,
// the SDK and workers given several head addresses go there:
//
//   {"error": "this head (10.0.0.4:6379) stands by; the leader is 10.0.0.1:6379 (epoch 3) ...",
//    "standby": true, "leader": "10.0.0.1:6379", "epoch": 3}
//
// Threads: constructed, started and stopped on the io thread; set_leader() and
// set_store_problem() from any (the head's lease poller).
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include "common/result.h"
#include "net/http_server.h"

namespace boost::asio {
class io_context;
}

namespace ag::head {

class StandbyServer {
 public:
  StandbyServer(boost::asio::io_context& io, std::string self_address);

  // Listens on both ports, with TLS unless `tls` is null.
  Status start(const net::TlsIdentity* tls, const std::string& bind_ip, int port, int dashboard_port);
  void stop();

  // What the answers say: the head that leads (empty: none now), or that the store
  // cannot be reached (which is then named instead).
  void set_leader(const std::string& leader_address, int64_t epoch);
  void set_store_problem(const std::string& problem);

 private:
  net::HttpResponse answer(const net::HttpRequest& request) const;

  const std::string self_;
  std::string ca_pem_;         // set by start(), before any request
  mutable std::mutex mu_;
  std::string leader_;         // guarded by mu_
  int64_t epoch_ = 0;          // guarded by mu_
  std::string store_problem_;  // guarded by mu_
  net::HttpServer api_, dashboard_;
};

}  // namespace ag::head
