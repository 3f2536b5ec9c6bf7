// Dials a WebSocket server (the worker's channel to the head).
#pragma once

#include <boost/asio/io_context.hpp>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "common/result.h"
#include "net/http_client.h"
#include "net/ws_connection.h"

namespace ag::net {

struct WsDialOptions {
  Endpoint to;
  std::string target = "/";
  std::map<std::string, std::string> headers;  // e.g. Authorization
  std::string bind_address;                    // local source address; "" = any
  int timeout_ms = 5000;
  // Makes the error for an answer other than 101 (status, body); unset: the worker's
  // wording for its channel.
  std::function<Error(int status, const std::string& body)> refusal;
};

// Connects and performs the WebSocket handshake, then calls `done` on the io thread.
// Errors: kUnavailable (connection refused, timeout) or kUnauthenticated (the server
// answered 401), with the server's message when it sent one.
void ws_dial(boost::asio::io_context& io, const WsDialOptions& options,
             std::function<void(Result<std::shared_ptr<WsConnection>>)> done);

}  // namespace ag::net
