#include "cli/exec_dial.h"

#include <nlohmann/json.hpp>

namespace ag::cli {

net::WsDialOptions exec_dial(const Connection& conn, const std::string& target) {
  net::WsDialOptions dial;
  dial.to = conn.endpoint;
  dial.target = target;
  dial.headers["Authorization"] = "Bearer " + conn.token;
  dial.timeout_ms = 30000;
  dial.refusal = exec_refusal;
  return dial;
}

Error exec_refusal(int status, const std::string& body) {
  const auto parsed = nlohmann::json::parse(body, nullptr, false);
  const std::string message = parsed.is_object() ? parsed.value("error", body) : body;
  const ErrorCode code = status == 400   ? ErrorCode::kInvalidArgument
                         : status == 401 ? ErrorCode::kUnauthenticated
                         : status == 403 ? ErrorCode::kPermissionDenied
                         : status == 404 ? ErrorCode::kNotFound
                         : status == 409 ? ErrorCode::kConflict
                                         : ErrorCode::kUnavailable;
  return {code, message.empty() ? "the head answered HTTP " + std::to_string(status) : message};
}

}  // namespace ag::cli
