// Calls to the head's REST API from the CLI, with errors turned into messages.
#pragma once

#include <nlohmann/json.hpp>
#include <functional>
#include <string>
#include <string_view>

#include "cli/session.h"
#include "common/result.h"
#include "net/http_types.h"

namespace ag::cli {

// One call; a non-2xx answer becomes an Error carrying the head's message.
Result<nlohmann::json> call_json(const Connection& conn, const std::string& method, const std::string& target,
                                 const std::string& body = "", int timeout_ms = 30000);
// Same, for endpoints answering with raw bytes (logs); returns the whole response.
Result<net::HttpResponse> call_raw(const Connection& conn, const std::string& method, const std::string& target,
                                   int timeout_ms = 30000);
// Same, whatever the answer's status (the caller reads it; answer_error words it as
// the calls above do).
Result<net::HttpResponse> call_answer(const Connection& conn, const std::string& method, const std::string& target,
                                      int timeout_ms = 30000);
Error answer_error(const Connection& conn, const net::HttpResponse& answer);

// call_json for a large octet-stream body, sent in pieces without a copy; `progress`
// (may be empty) gets the bytes sent so far after each piece.
Result<nlohmann::json> upload_json(const Connection& conn, const std::string& method, const std::string& target,
                                   std::string_view body, int timeout_ms,
                                   const std::function<void(size_t sent)>& progress);

// call_json, retried with backoff while the head cannot be reached (it may be
// restarting), for up to `window_s`. Only for calls that are safe to repeat.
Result<nlohmann::json> call_json_retrying(const Connection& conn, const std::string& method, const std::string& target,
                                          const std::string& body, int timeout_ms, double window_s);

// The value of the response header `name` (as the head wrote it), or "".
std::string header_value(const net::HttpResponse& res, const std::string& name);

// call_raw, retried the same way.
Result<net::HttpResponse> call_raw_retrying(const Connection& conn, const std::string& method,
                                            const std::string& target, int timeout_ms, double window_s);

// The head's message in the CLI's terms: a query parameter it names becomes the flag
// the user typed ("query parameter 'task_index' must be ... between 0 and 1, got '5'"
// -> "--task-index: the job has tasks 0-1 (got 5)").
std::string in_cli_terms(const std::string& message);
// Prints "error: <message>" in the CLI's terms (to stderr; with set_json_errors also
// {"error": message} to stdout, so that -o json output is JSON whatever happens) and
// returns 1.
int fail(const Error& error);
// The same for a command line that cannot be run as given; returns 2.
int usage_error(const std::string& message);
void set_json_errors(bool on);

}  // namespace ag::cli
