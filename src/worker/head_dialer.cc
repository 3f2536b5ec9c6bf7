#include "worker/head_dialer.h"

#include "api/protocol.h"

namespace ag::worker {

WsHeadDialer::WsHeadDialer(boost::asio::io_context& io, net::Endpoint head, const std::string& token,
                           std::string bind_address)
    : io_(io) {
  options_.to = std::move(head);
  options_.target = api::kWorkerConnectPath;
  options_.headers["Authorization"] = "Bearer " + token;
  options_.bind_address = std::move(bind_address);
}

void WsHeadDialer::dial(Done done) { net::ws_dial(io_, options_, std::move(done)); }

}  // namespace ag::worker
