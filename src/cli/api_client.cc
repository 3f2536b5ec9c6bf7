#include "cli/api_client.h"

#include <algorithm>
#include <chrono>
#include <iostream>
#include <regex>
#include <set>
#include <thread>

#include "net/http_client.h"

namespace ag::cli {
namespace {

// What a server that is not an AetherGrid head (its answers are not our JSON errors)
// gets called, instead of printing its page.
Error not_a_head(const Connection& conn, int status) {
  return Error{ErrorCode::kUnavailable, conn.endpoint.to_string() + " answered but is not an AetherGrid head (HTTP " +
                                            std::to_string(status) +
                                            "); check the address (--address, ag config) and the port (the head's API "
                                            "port, 6379 by default)"};
}

Error from_response(const Connection& conn, const net::HttpResponse& res) {
  auto body = nlohmann::json::parse(res.body, nullptr, false);
  // Every error the head sends is {"error": ...}, but for answers without a body (HEAD).
  const bool ours = body.is_object() && body.contains("error") && body["error"].is_string();
  if (!ours && !res.body.empty()) return not_a_head(conn, res.status);
  std::string message = ours ? body["error"].get<std::string>() : "HTTP " + std::to_string(res.status);
  ErrorCode code = ErrorCode::kInternal;
  if (res.status == 401) {
    code = ErrorCode::kUnauthenticated;
    message = "the head at " + conn.endpoint.to_string() + " refused the request (HTTP 401): " + message +
              ". Pass your user token with --token-file FILE or AG_TOKEN_FILE (or --token / AG_TOKEN).";
  } else if (res.status == 403) {
    code = ErrorCode::kPermissionDenied;
    message = "refused (HTTP 403): " + message;
  } else if (res.status == 404) {
    code = ErrorCode::kNotFound;
  } else if (res.status == 400) {
    code = ErrorCode::kInvalidArgument;
  } else if (res.status == 409) {
    code = ErrorCode::kConflict;
  } else if (res.status == 503) {
    code = ErrorCode::kUnavailable;  // a standby head, or a store away: worth another try
  }
  return {code, message};
}

// A standby head's answer names the head that leads ({"standby": true, "leader": ...}).
std::optional<std::string> standby_names(const net::HttpResponse& res) {
  if (res.status != 503) return std::nullopt;
  auto body = nlohmann::json::parse(res.body, nullptr, false);
  if (!body.is_object() || !body.value("standby", false)) return std::nullopt;
  return body.value("leader", "");
}

// Runs `call` on the connection's head; when that one cannot be reached or stands by,
// on the cluster's other heads (the leader a standby named first), each once. The head
// that answered is the connection's from then on.
template <typename Call>
Result<net::HttpResponse> on_leader(const Connection& conn, const Call& call) {
  auto res = call(conn.endpoint);
  if (conn.heads.size() <= 1) return res;
  std::set<std::string> tried{conn.endpoint.to_string()};
  while (true) {
    std::optional<std::string> named;
    if (res.ok()) named = standby_names(res.value());
    const bool unreachable = !res.ok() && res.error().code == ErrorCode::kUnavailable;
    if (!unreachable && !named) return res;
    const net::Endpoint* next = nullptr;
    for (const auto& head : conn.heads) {
      if (tried.count(head.to_string())) continue;
      if (named && head.to_string() == *named) {
        next = &head;
        break;
      }
      if (!next) next = &head;
    }
    if (!next) return res;
    tried.insert(next->to_string());
    auto other = call(*next);
    const bool answered = other.ok() && !standby_names(other.value());
    if (answered) conn.endpoint = *next;
    if (answered || !res.ok() || other.ok()) res = std::move(other);
  }
}

}  // namespace

Result<net::HttpResponse> call_raw(const Connection& conn, const std::string& method, const std::string& target,
                                   int timeout_ms) {
  auto res = call_answer(conn, method, target, timeout_ms);
  if (!res.ok()) return res.error();
  if (res->status / 100 != 2) return from_response(conn, res.value());
  return res;
}

Result<net::HttpResponse> call_answer(const Connection& conn, const std::string& method, const std::string& target,
                                      int timeout_ms) {
  return on_leader(conn, [&](const net::Endpoint& to) {
    return net::http_call(to, method, target, "", conn.token, timeout_ms);
  });
}

Error answer_error(const Connection& conn, const net::HttpResponse& answer) { return from_response(conn, answer); }

Result<nlohmann::json> call_json(const Connection& conn, const std::string& method, const std::string& target,
                                 const std::string& body, int timeout_ms) {
  auto res = on_leader(conn, [&](const net::Endpoint& to) {
    return net::http_call(to, method, target, body, conn.token, timeout_ms);
  });
  if (!res.ok()) return res.error();
  if (res->status / 100 != 2) return from_response(conn, res.value());
  auto json = nlohmann::json::parse(res->body, nullptr, false);
  if (json.is_discarded()) return not_a_head(conn, res->status);
  return json;
}

Result<nlohmann::json> upload_json(const Connection& conn, const std::string& method, const std::string& target,
                                   std::string_view body, int timeout_ms,
                                   const std::function<void(size_t sent)>& progress) {
  auto res = on_leader(conn, [&](const net::Endpoint& to) {
    return net::http_upload(to, method, target, body, conn.token, timeout_ms, progress);
  });
  if (!res.ok()) return res.error();
  if (res->status / 100 != 2) return from_response(conn, res.value());
  auto json = nlohmann::json::parse(res->body, nullptr, false);
  if (json.is_discarded()) return internal_error("the head answered with something that is not JSON");
  return json;
}

std::string header_value(const net::HttpResponse& res, const std::string& name) {
  for (const auto& [k, v] : res.headers) {
    if (k == name) return v;
  }
  return "";
}

namespace {

// Calls `call` again with backoff while the head cannot be reached, for up to `window_s`.
template <typename Call>
auto retrying(const Call& call, double window_s) -> decltype(call()) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(window_s);
  auto delay = std::chrono::milliseconds(50);
  bool warned = false;
  for (;;) {
    auto result = call();
    if (result.ok() || result.error().code != ErrorCode::kUnavailable || std::chrono::steady_clock::now() > deadline) {
      return result;
    }
    if (!warned) {
      std::cerr << "warning: " << result.error().message << "; retrying for up to " << window_s << " s\n";
      warned = true;
    }
    std::this_thread::sleep_for(delay);
    delay = std::min(delay * 2, std::chrono::milliseconds(1000));
  }
}

}  // namespace

Result<nlohmann::json> call_json_retrying(const Connection& conn, const std::string& method, const std::string& target,
                                          const std::string& body, int timeout_ms, double window_s) {
  return retrying([&] { return call_json(conn, method, target, body, timeout_ms); }, window_s);
}

Result<net::HttpResponse> call_raw_retrying(const Connection& conn, const std::string& method,
                                            const std::string& target, int timeout_ms, double window_s) {
  return retrying([&] { return call_raw(conn, method, target, timeout_ms); }, window_s);
}

namespace {
bool json_errors = false;
}  // namespace

void set_json_errors(bool on) { json_errors = on; }

int usage_error(const std::string& message) {
  fail(Error{ErrorCode::kInvalidArgument, message});
  return 2;
}

std::string in_cli_terms(const std::string& message) {
  // The head names its query parameters; the CLI's user typed flags.
  static const std::regex range(R"(query parameter '(\w+)' must be a whole number between (-?\d+) and (-?\d+), got '(.*)')");
  std::smatch m;
  if (!std::regex_search(message, m, range)) return message;
  std::string flag = "--" + std::string(m[1]);
  std::replace(flag.begin(), flag.end(), '_', '-');
  const std::string said = m[1] == "task_index"
                               ? flag + ": the job has tasks " + std::string(m[2]) + "-" + std::string(m[3]) +
                                     " (got " + std::string(m[4]) + ")"
                               : flag + ": give a whole number from " + std::string(m[2]) + " to " +
                                     std::string(m[3]) + " (got " + std::string(m[4]) + ")";
  return m.prefix().str() + said + m.suffix().str();
}

int fail(const Error& error) {
  const std::string message = in_cli_terms(error.message);
  if (json_errors) std::cout << nlohmann::json{{"error", message}}.dump() << "\n";
  std::cerr << "error: " << message << "\n";
  return 1;
}

}  // namespace ag::cli
