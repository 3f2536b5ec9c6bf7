// Plain HTTP request/response values shared by the server, the client and the route
// handlers, so that no module but net/ sees Boost.Beast.
#pragma once

#include <functional>
#include <map>
#include <memory>
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

// A response body written piece by piece after the header went out (server-sent
// events). The connection is closed when the stream ends, so the body needs no length.
// Io thread only.
class HttpStream {
 public:
  virtual ~HttpStream() = default;
  // Queues bytes for the client. Returns false (and closes the stream) once the client
  // is gone or more than the stream's bound is queued unread: a stalled reader is
  // dropped rather than buffered without limit.
  virtual bool write(std::string data) = 0;
  virtual void close() = 0;
  virtual bool is_open() const = 0;
  // Called once, on the io thread but never from inside write() or close(), when the
  // stream ends for any reason.
  virtual void on_close(std::function<void()> closed) = 0;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  // Set for a streamed response: the server sends the status and headers (no body),
  // then hands the open stream to this callback, which keeps it for later writes.
  std::function<void(std::shared_ptr<HttpStream>)> on_stream;
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
