// Blocking HTTP client for the CLI and tests of the daemons: one request per call,
// bounded by a timeout.
#pragma once

#include <functional>
#include <string>
#include <vector>
#include <string_view>

#include "common/result.h"
#include "net/http_types.h"

namespace ag::net {

struct Endpoint {
  std::string host;
  uint16_t port = 0;
  // TLS, verifying the head's certificate against this CA (PEM) and its address.
  // Empty: plain HTTP (net/tls.h says when that is allowed).
  std::string ca_pem;
  // TLS without verifying anything: only to fetch the CA, whose fingerprint is then
  // checked (fetch_pinned_ca in net/tls.h).
  bool tls_unverified = false;
  // TLS to a service that is not the head (a webhook receiver): verified against
  // ca_pem when given, else the system's CAs (SSL_CERT_FILE, SSL_CERT_DIR honoured).
  bool service_tls = false;
  bool tls() const { return !ca_pem.empty() || tls_unverified || service_tls; }
  std::string to_string() const { return host + ":" + std::to_string(port); }
};

// Parses "HOST:PORT" or "http://HOST:PORT[/]". Errors: kInvalidArgument naming the text.
Result<Endpoint> parse_endpoint(const std::string& text, uint16_t default_port);

// Several heads of one cluster: "h1:6379,h2:6379" (at most kMaxHeadAddresses, no
// repeats). Errors: kInvalidArgument naming the address that is wrong.
inline constexpr size_t kMaxHeadAddresses = 8;
Result<std::vector<Endpoint>> parse_endpoints(const std::string& text, uint16_t default_port);

// Sends one request and reads the whole response. A token, when not empty, goes in
// "Authorization: Bearer". Errors: kUnavailable "cannot reach head at HOST:PORT: ..."
// when the connection fails or times out. HTTP error statuses are not errors here.
Result<HttpResponse> http_call(const Endpoint& to, const std::string& method,
                               const std::string& target, const std::string& body,
                               const std::string& token, int timeout_ms);

// Sends `body` (application/octet-stream) in pieces straight from the caller's memory,
// calling `progress` with the bytes sent so far after each piece (may be empty); reads
// the whole response. Errors: as http_call.
Result<HttpResponse> http_upload(const Endpoint& to, const std::string& method, const std::string& target,
                                 std::string_view body, const std::string& token, int timeout_ms,
                                 const std::function<void(size_t sent)>& progress);

// A POST of `body` (application/json) with `headers` added, to a service that is not the
// head (a webhook receiver): reads at most `max_answer_bytes` of the answer's body and
// drops the rest. Errors: kUnavailable "cannot reach HOST:PORT: why" (no such name,
// refused, timed out, a certificate that does not verify).
Result<HttpResponse> http_post(const Endpoint& to, const std::string& target, const std::string& body,
                               const std::vector<std::pair<std::string, std::string>>& headers, int timeout_ms,
                               size_t max_answer_bytes);

// The head's cluster CA (PEM), fetched over TLS without verification (nothing secret
// is sent) and kept only when its fingerprint is `fingerprint` ("sha256:..."). Errors:
// kPermissionDenied when the fingerprints differ (saying both), kUnavailable when the
// head cannot be reached, kInvalidArgument for a bad fingerprint.
Result<std::string> fetch_pinned_ca(Endpoint to, const std::string& fingerprint, int timeout_ms);

// Sends a GET and passes a 200 response's body to `on_data` piece by piece as it
// arrives (downloads too large for memory). Any other status's body, an error message,
// comes back in HttpResponse::body (its first 64 KiB). Errors: as http_call, or the
// first error `on_data` returns, which ends the download.
Result<HttpResponse> http_download(const Endpoint& to, const std::string& target, const std::string& token,
                                   int timeout_ms, const std::function<Status(const char*, size_t)>& on_data);

}  // namespace ag::net
