// HeadDialer: how the agent opens a channel to the head. The product's dials the
// head's WebSocket endpoint with the cluster token; unit tests hand out fake channels.
#pragma once

#include <functional>
#include <memory>

#include "common/result.h"
#include "net/ws_client.h"
#include "net/ws_connection.h"

namespace boost::asio {
class io_context;
}

namespace ag::worker {

class HeadDialer {
 public:
  using Done = std::function<void(Result<std::shared_ptr<net::WsConnection>>)>;
  virtual ~HeadDialer() = default;
  // Opens a channel; `done` runs on the owner's thread. Errors: kUnavailable (try
  // again later), kUnauthenticated (the head refused the token: final).
  virtual void dial(Done done) = 0;
  // "127.0.0.1:6379", for messages.
  virtual std::string describe() const = 0;
};

// Dials GET /api/workers/connect on the head with the cluster token, from `bind_address`.
class WsHeadDialer final : public HeadDialer {
 public:
  WsHeadDialer(boost::asio::io_context& io, net::Endpoint head, const std::string& token, std::string bind_address);
  void dial(Done done) override;
  std::string describe() const override { return options_.to.to_string(); }

 private:
  boost::asio::io_context& io_;
  net::WsDialOptions options_;
};

}  // namespace ag::worker
