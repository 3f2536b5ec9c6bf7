#include "worker/head_dialer.h"

#include "api/protocol.h"

namespace ag::worker {

WsHeadDialer::WsHeadDialer(boost::asio::io_context& io, net::Endpoint head, NodeCredential& credential,
                           std::string bind_address)
    : io_(io), credential_(credential) {
  options_.to = std::move(head);
  options_.target = api::kWorkerConnectPath;
  options_.bind_address = std::move(bind_address);
}

void WsHeadDialer::dial(Done done) {
  options_.headers["Authorization"] = "Bearer " + credential_.token();
  net::ws_dial(io_, options_, std::move(done));
}

void WsHeadDialer::dial_log_stream(LogStreamDone done) {
  worker::dial_log_stream(io_, options_.to, options_.bind_address, credential_.token(), std::move(done));
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
