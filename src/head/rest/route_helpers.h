// What the head's REST routes share: JSON answers (invalid UTF-8 from task output
// replaced, never an exception), error answers in one shape, and query parameters
// read with a 400 that names the parameter and its range.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "common/result.h"
#include "net/http_types.h"

namespace ag::head {

net::HttpResponse json_response(int status, const nlohmann::json& body);
net::HttpResponse error_response(int status, const std::string& message);
net::HttpResponse error_response(const Error& error);

// Reads an optional integer query parameter into `out`; returns false after answering
// 400 on bad input.
bool query_int(const net::HttpRequest& req, const std::string& name, int64_t min, int64_t max, int64_t* out,
               net::Respond& respond);

}  // namespace ag::head
