// Plain HTTP request/response values shared by the server, the client and the route
// handlers, so that no module but net/ sees Boost.Beast.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace ag::net {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // as sent: path plus query
  std::string path;    // decoded path without the query
  std::map<std::string, std::string> query;  // decoded query parameters
  std::map<std::string, std::string> headers;  // lowercase names
  std::string body;
  std::string remote_address;

  // The header's value, or "" when absent. `name` must be lowercase.
  const std::string& header(const std::string& name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

// Completes a request. Call exactly once, on the server's io thread; calling it after
// the client went away is harmless.
using Respond = std::function<void(HttpResponse)>;

// Splits "a/b?x=1&y=%20" into a decoded path and query map. Returns false for a
// malformed percent-encoding.
bool parse_target(const std::string& target, std::string* path,
                  std::map<std::string, std::string>* query);

// Percent-encodes a query value.
std::string url_encode(const std::string& value);

}  // namespace ag::net
