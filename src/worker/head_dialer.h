// HeadDialer: how the agent opens a channel to the head, and with which credential.
// The product's dials the head's WebSocket endpoint with the node's credential
// (worker/node_credential.h); unit tests hand out fake channels.
#pragma once

#include <functional>
#include <memory>

#include "common/result.h"
#include "net/ws_client.h"
#include "net/ws_connection.h"
#include "worker/head_addresses.h"
#include "worker/log_stream.h"
#include "worker/node_credential.h"

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
  // The head it reached does not lead: the next dial starts at the next head.
  virtual void skip() {}
  // Keeps the node's own credential (from `registered`) for every later dial.
  virtual Status adopt_credential(const std::string& credential) = 0;
  // What to tell the user when the head refuses the token for good.
  virtual std::string refused_hint() const = 0;
  // Opens the log stream (worker/log_stream.h) once registered; `done` runs on the
  // owner's thread. A dialer without one says kNotFound (output then goes in frames).
  virtual void dial_log_stream(LogStreamDone done) {  // NOLINT(performance-unnecessary-value-param): overridden to keep it
    done(Error{ErrorCode::kNotFound, "this dialer opens no log stream"});
  }
};

// Dials GET /api/workers/connect on the head with the node's credential, from
// `bind_address`. With several heads, a dial that fails tries the next (or the leader a
// standby named) before it reports the failure: each head once per dial.
class WsHeadDialer final : public HeadDialer {
 public:
  WsHeadDialer(boost::asio::io_context& io, HeadAddresses& heads, NodeCredential& credential, std::string bind_address);
  void dial(Done done) override;
  std::string describe() const override { return heads_.describe(); }
  void skip() override { heads_.next(); }
  Status adopt_credential(const std::string& credential) override { return credential_.adopt(credential); }
  std::string refused_hint() const override;
  void dial_log_stream(LogStreamDone done) override;

 private:
  void attempt(size_t tried, Done done);

  boost::asio::io_context& io_;
  HeadAddresses& heads_;
  NodeCredential& credential_;
  net::WsDialOptions options_;
};

}  // namespace ag::worker
