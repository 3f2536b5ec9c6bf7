// Plain HTTP request/response values shared by the server, the client and the route
// handlers, so that no module but net/ sees Boost.Beast.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/result.h"

namespace ag::net {

// Takes a request's body piece by piece as it arrives, instead of HttpRequest::body:
// an upload then never sits whole in memory. Io thread only.
class BodySink {
 public:
  virtual ~BodySink() = default;
  // The next piece of the body. An error stops the upload: the server reads no more
  // of it, hands the request on (the handler learns the error from its sink) and
  // closes the connection after the response.
  virtual Status write(const char* data, size_t size) = 0;
};

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // as sent: path plus query
  std::string path;    // decoded path without the query
  std::map<std::string, std::string> query;  // decoded query parameters
  std::map<std::string, std::string> headers;  // lowercase names
  std::string body;
  // Set, and `body` left empty, when the server streamed the body into a sink
  // (ServerHandlers::plan_body).
  std::shared_ptr<BodySink> body_sink;
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
  // When set, the body is this file's contents, sent from disk in pieces (packages,
  // logs): a client that reads slowly holds no copy of it in memory. Only the range
  // from body_file_offset, of body_file_length bytes (-1: to the end), when given.
  std::string body_file;
  int64_t body_file_offset = 0;
  int64_t body_file_length = -1;
  std::vector<std::pair<std::string, std::string>> headers;
  // Set for a streamed response: the server sends the status and headers (no body),
  // then hands the open stream to this callback, which keeps it for later writes.
  std::function<void(std::shared_ptr<HttpStream>)> on_stream;
};

// What to do with a request's body, decided once its header is in (see
// ServerHandlers::plan_body). Neither set: read it into HttpRequest::body.
struct BodyPlan {
  std::shared_ptr<BodySink> sink;       // stream the body into this sink
  std::optional<HttpResponse> refusal;  // discard the body unread and answer this
};

// Completes a request. Call exactly once, on the server's io thread; calling it after
// the client went away is harmless.
using Respond = std::function<void(HttpResponse)>;

// Splits "a/b?x=1&y=%20" into a decoded path and query map. Returns false for a

// Every value of the query parameter `name` in `target`, in order (a repeated parameter,
// as in ?command=ls&command=-l); undecodable ones are skipped.
std::vector<std::string> query_values(const std::string& target, const std::string& name);

// malformed percent-encoding.
bool parse_target(const std::string& target, std::string* path,
                  std::map<std::string, std::string>* query);

// Percent-encodes a query value.
std::string url_encode(const std::string& value);

}  // namespace ag::net
