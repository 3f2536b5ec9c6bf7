// The HTTP side of authentication: where a request carries its credential, the
// dashboard's session cookie, the CSRF rule, and token files. Which credential is
// whose, and what it may do, is the head's (head/auth/access_control.h).
//
// Two ways a request carries a credential:
//   - "Authorization: Bearer <token>": the CLI, the SDK, workers, Prometheus.
//   - the dashboard's session cookie, set by the sign-in endpoint after the browser
//     sent a user token once. The cookie holds a random session id the head keeps
//     server-side (so signing out ends it), not the token.
// A cookie rides along on requests that other sites make the browser send, so a
// cookie-authenticated request that changes state must also pass passes_csrf_check().
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.h"
#include "net/http_types.h"

namespace ag::net {

// The token of an "Authorization: Bearer <token>" header, or "" without one.
std::string_view bearer_token(const HttpRequest& request);

// The value of cookie `name` in the request's Cookie header, or "" when absent.
std::string cookie_value(const HttpRequest& request, const std::string& name);

// How long a dashboard sign-in lasts.
inline constexpr int64_t kSessionCookieLifetimeS = 7 * 24 * 3600;

// A Set-Cookie header value that signs the browser in with session `value` for
// kSessionCookieLifetimeS: HttpOnly (page scripts cannot read it), SameSite=Strict
// (other sites' requests do not carry it), Path=/.
std::string session_set_cookie(const std::string& name, const std::string& value);

// A Set-Cookie header value that removes the session cookie (sign-out).
std::string session_clear_cookie(const std::string& name);

// POST, PUT, PATCH and DELETE (and anything unknown): methods that may change state.
bool is_state_changing(const std::string& method);

// For a cookie-authenticated state-changing request: true when it comes from the
// head's own pages. A foreign Origin always fails; otherwise the request needs an
// Origin equal to the Host's origin or the "X-AG-CSRF" header, which a cross-site page
// cannot add without a CORS preflight the head never grants.
bool passes_csrf_check(const HttpRequest& request);

// Reads the token file at `path`, or creates it (mode 0600, never through a link)
// with a new random token starting with `prefix` when absent. An existing file is
// used only when this user made it: not a link, not another user's, unreadable to
// others (kPermissionDenied otherwise). Errors: kInternal when it cannot be written.
Result<std::string> load_or_create_token(const std::string& path, const std::string& prefix);

// Replaces the file at `path` with `token` (mode 0600; written aside and renamed, so
// a reader sees the old token or the new one). Errors: kInternal.
Status write_token_file(const std::string& path, const std::string& token);

// Reads a token file. Errors: kNotFound / kInternal naming the path.
Result<std::string> read_token_file(const std::string& path);

// Reads a token file a user handed over (`--token-file`), refusing one that other users
// can read or that belongs to someone else, as ssh does with keys. Errors:
// kPermissionDenied saying what to change, kNotFound / kInvalidArgument / kInternal
// naming the path.
Result<std::string> read_private_token_file(const std::string& path);

}  // namespace ag::net
