// Where requests carry credentials, the session cookie, the CSRF rule, token files.
#include "net/auth.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace ag::net {
namespace {

HttpRequest request_with(std::map<std::string, std::string> headers, std::string method = "GET") {
  HttpRequest req;
  req.method = std::move(method);
  req.path = "/api/jobs";
  req.headers = std::move(headers);
  return req;
}

TEST(Auth, BearerTokenIsReadFromTheAuthorizationHeader) {
  EXPECT_EQ(bearer_token(request_with({{"authorization", "Bearer agu_abc"}})), "agu_abc");
  EXPECT_EQ(bearer_token(request_with({{"authorization", "Bearer "}})), "");
  EXPECT_EQ(bearer_token(request_with({{"authorization", "Basic YWI6Y2Q="}})), "");
  EXPECT_EQ(bearer_token(request_with({})), "");
}

TEST(Auth, CookieValueFindsTheNamedCookieOnly) {
  auto req = request_with({{"cookie", "a=1; ag_session_x=ags_1; ag_session_xy=2"}});
  EXPECT_EQ(cookie_value(req, "ag_session_x"), "ags_1");
  EXPECT_EQ(cookie_value(req, "ag_session_xy"), "2");
  EXPECT_EQ(cookie_value(req, "ag_session"), "");
  EXPECT_EQ(cookie_value(request_with({}), "a"), "");
}

TEST(Auth, SessionCookiesAreHttpOnlyAndStrict) {
  std::string set = session_set_cookie("ag_session_x", "ags_1");
  EXPECT_EQ(set.rfind("ag_session_x=ags_1;", 0), 0U) << set;
  EXPECT_NE(set.find("HttpOnly"), std::string::npos);
  EXPECT_NE(set.find("SameSite=Strict"), std::string::npos);
  EXPECT_NE(session_clear_cookie("ag_session_x").find("Max-Age=0"), std::string::npos);
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
