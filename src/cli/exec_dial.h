// What `ag exec` and `ag port-forward` share: the WebSocket dial to a job's exec or
// port-forward route (api/exec_protocol.h) and the head's refusals in the CLI's terms.
#pragma once

#include <string>

#include "cli/session.h"
#include "common/result.h"
#include "net/ws_client.h"

namespace ag::cli {

// The dial to `target` (path and query) on the connection's head, with its token.
net::WsDialOptions exec_dial(const Connection& conn, const std::string& target);

// The head's answer other than 101 as an error: its message, coded by status.
Error exec_refusal(int status, const std::string& body);

}  // namespace ag::cli
