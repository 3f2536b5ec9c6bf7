// Token and session-cookie authentication, and the CSRF rule for cookie requests.
#include "net/auth.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace ag::net {
namespace {

constexpr int64_t kNow = 1'800'000'000;
const std::string kToken = "0123456789abcdef0123456789abcdef0123456789abcdef";

HttpRequest request_with(std::map<std::string, std::string> headers, std::string method = "GET") {
  HttpRequest req;
  req.method = std::move(method);
  req.path = "/api/jobs";
  req.headers = std::move(headers);
  return req;
}

// "name=value" of a Set-Cookie header value.
std::string cookie_pair(const std::string& set_cookie) { return set_cookie.substr(0, set_cookie.find(';')); }

TEST(Auth, BearerTokenAuthenticates) {
  EXPECT_EQ(authenticate(request_with({{"authorization", "Bearer " + kToken}}), kToken, kNow), AuthMethod::kBearer);
  EXPECT_EQ(authenticate(request_with({{"authorization", "Bearer wrong"}}), kToken, kNow), AuthMethod::kNone);
  EXPECT_EQ(authenticate(request_with({{"authorization", "Bearer "}}), "", kNow), AuthMethod::kNone);
  EXPECT_EQ(authenticate(request_with({}), kToken, kNow), AuthMethod::kNone);
}

TEST(Auth, SessionCookieAuthenticatesUntilItExpires) {
  std::string set_cookie = session_set_cookie(kToken, kNow);
  EXPECT_NE(set_cookie.find("HttpOnly"), std::string::npos);
  EXPECT_NE(set_cookie.find("SameSite=Strict"), std::string::npos);
  EXPECT_EQ(set_cookie.find(kToken), std::string::npos) << "the cookie must not carry the token";
  auto req = request_with({{"cookie", "other=1; " + cookie_pair(set_cookie) + "; more=2"}});
  EXPECT_EQ(authenticate(req, kToken, kNow), AuthMethod::kCookie);
  EXPECT_EQ(authenticate(req, kToken, kNow + kSessionCookieLifetimeS - 1), AuthMethod::kCookie);
  EXPECT_EQ(authenticate(req, kToken, kNow + kSessionCookieLifetimeS), AuthMethod::kNone);
  // A new token invalidates every session.
  EXPECT_EQ(authenticate(req, kToken + "x", kNow), AuthMethod::kNone);
}

TEST(Auth, ForgedOrMangledCookiesAreRefused) {
  std::string pair = cookie_pair(session_set_cookie(kToken, kNow));
  std::string name = pair.substr(0, pair.find('='));
  std::string value = pair.substr(pair.find('=') + 1);
  std::string mac = value.substr(value.find('.') + 1);
  for (const std::string& bad : {name + "=" + std::to_string(kNow + 999999999) + "." + mac,  // longer expiry
                                 name + "=" + value.substr(0, value.size() - 1) + "0",       // bad MAC
                                 name + "=" + mac, name + "=.", name + "=", name + "x=" + value}) {
    EXPECT_EQ(authenticate(request_with({{"cookie", bad}}), kToken, kNow), AuthMethod::kNone) << bad;
  }
}

TEST(Auth, CookieNamesDifferPerToken) {
  EXPECT_NE(session_cookie_name(kToken), session_cookie_name(kToken + "x"));
  EXPECT_NE(session_clear_cookie(kToken).find("Max-Age=0"), std::string::npos);
}

TEST(Auth, StateChangingMethods) {
  for (const char* m : {"POST", "PUT", "PATCH", "DELETE", "BREW"}) EXPECT_TRUE(is_state_changing(m)) << m;
  for (const char* m : {"GET", "HEAD", "OPTIONS"}) EXPECT_FALSE(is_state_changing(m)) << m;
}

TEST(Auth, CsrfCheckWantsTheSameOriginOrTheCustomHeader) {
  const std::string host = "127.0.0.1:8265";
  EXPECT_TRUE(passes_csrf_check(request_with({{"host", host}, {"origin", "http://" + host}}, "POST")));
  EXPECT_TRUE(passes_csrf_check(request_with({{"host", host}, {"origin", "https://" + host}}, "POST")));
  EXPECT_TRUE(passes_csrf_check(request_with({{"host", host}, {"x-ag-csrf", "1"}}, "POST")));
  EXPECT_FALSE(passes_csrf_check(request_with({{"host", host}}, "POST")));
  EXPECT_FALSE(passes_csrf_check(request_with({{"host", host}, {"origin", "http://evil.example"}}, "POST")));
  EXPECT_FALSE(passes_csrf_check(request_with({{"host", host}, {"origin", "http://127.0.0.1:6379"}}, "POST")));
  EXPECT_FALSE(passes_csrf_check(request_with({{"host", host}, {"origin", "null"}, {"x-ag-csrf", "1"}}, "POST")));
  EXPECT_FALSE(
      passes_csrf_check(request_with({{"host", host}, {"origin", "http://evil.example"}, {"x-ag-csrf", "1"}}, "POST")));
}

TEST(Auth, PrivateTokenFileMustBeThisUsersAndUnreadableToOthers) {
  std::string path = std::filesystem::temp_directory_path() / ("ag-token-test-" + std::to_string(::getpid()));
  {
    std::ofstream out(path);
    out << "sekrit\n";
  }
  ::chmod(path.c_str(), 0600);
  auto ok = read_private_token_file(path);
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(ok.value(), "sekrit");

  ::chmod(path.c_str(), 0640);
  auto shared = read_private_token_file(path);
  ASSERT_FALSE(shared.ok());
  EXPECT_EQ(shared.error().code, ErrorCode::kPermissionDenied);
  EXPECT_EQ(shared.error().message,
            "token file " + path + " can be read by other users (mode 0640); run `chmod 600 " + path + "`");

  ::chmod(path.c_str(), 0600);
  if (::geteuid() == 0 && ::chown(path.c_str(), 65534, 65534) == 0) {
    auto foreign = read_private_token_file(path);
    ASSERT_FALSE(foreign.ok());
    EXPECT_EQ(foreign.error().code, ErrorCode::kPermissionDenied);
    EXPECT_NE(foreign.error().message.find("belongs to uid 65534"), std::string::npos);
  }
  std::filesystem::remove(path);
  EXPECT_EQ(read_private_token_file(path).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(read_private_token_file("/tmp").error().code, ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace ag::net
