// Authentication for every API call, dashboard page and worker join.
//
// Two ways to prove knowledge of the cluster token:
//   - "Authorization: Bearer <token>": the CLI, the SDK, workers, Prometheus.
//   - the dashboard's session cookie, set by the sign-in endpoint after the browser
//     sent the token once. The cookie holds an expiry and an HMAC of it keyed by the
//     token, not the token: it survives a head restart, dies with a new token, and a
//     leaked cookie does not reveal the token.
// A cookie rides along on requests that other sites make the browser send, so a
// cookie-authenticated request that changes state must also pass passes_csrf_check().
#pragma once

#include <cstdint>
#include <string>

#include "common/result.h"
#include "net/http_types.h"

namespace ag::net {

// True when the request carries `token` as "Authorization: Bearer <token>".
// Compares in constant time.
bool has_valid_token(const HttpRequest& request, const std::string& token);

// True when `candidate` equals `token` (constant time; false for an empty token).
bool token_matches(const std::string& candidate, const std::string& token);

enum class AuthMethod { kNone, kBearer, kCookie };

// How the request authenticates: a valid bearer token, a valid unexpired session
// cookie, or neither. `now_s` is Unix time in seconds.
AuthMethod authenticate(const HttpRequest& request, const std::string& token, int64_t now_s);

// How long a dashboard sign-in lasts.
inline constexpr int64_t kSessionCookieLifetimeS = 7 * 24 * 3600;

// The session cookie's name. It is derived from the token, so that several heads on
// one host (cookies are shared across ports) each keep their own cookie.
std::string session_cookie_name(const std::string& token);

// A Set-Cookie header value that signs the browser in until now_s +
// kSessionCookieLifetimeS: HttpOnly (page scripts cannot read it), SameSite=Strict
// (other sites' requests do not carry it), Path=/.
std::string session_set_cookie(const std::string& token, int64_t now_s);

// A Set-Cookie header value that removes the session cookie (sign-out).
std::string session_clear_cookie(const std::string& token);

// POST, PUT, PATCH and DELETE (and anything unknown): methods that may change state.
bool is_state_changing(const std::string& method);

// For a cookie-authenticated state-changing request: true when it comes from the
// head's own pages. A foreign Origin always fails; otherwise the request needs an
// Origin equal to the Host's origin or the "X-AG-CSRF" header, which a cross-site page
// cannot add without a CORS preflight the head never grants.
bool passes_csrf_check(const HttpRequest& request);

// Creates the cluster token file in `data_dir` (mode 0600) if absent and returns the
// token. Errors: kInternal when the file cannot be written or read.
Result<std::string> load_or_create_token(const std::string& data_dir);

// Reads a token file. Errors: kNotFound / kInternal naming the path.
Result<std::string> read_token_file(const std::string& path);

// Reads a token file a user handed over (`--token-file`), refusing one that other users
// can read or that belongs to someone else, as ssh does with keys. Errors:
// kPermissionDenied saying what to change, kNotFound / kInvalidArgument / kInternal
// naming the path.
Result<std::string> read_private_token_file(const std::string& path);

}  // namespace ag::net
