// Tests for the small shared helpers: $VAR expansion, ids, and the HTTP target and
// endpoint parsers in net/.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>

#include "common/dir_spread.h"
#include "common/env_expand.h"
#include "common/ids.h"
#include "common/private_dir.h"
#include "common/sha256.h"
#include "net/http_client.h"
#include "net/http_types.h"

namespace ag {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using Query = std::map<std::string, std::string>;

// --- expand_env_vars -------------------------------------------------------------

const std::map<std::string, std::string> kEnv = {
    {"HOME", "/home/ada"}, {"PYTHONPATH", "/opt/lib"}, {"RANK", "3"}, {"A_1", "x"}};

TEST(ExpandEnvVarsTest, PlainTextIsUnchanged) {
  EXPECT_EQ(expand_env_vars("python train.py --lr 0.1", kEnv), "python train.py --lr 0.1");
  EXPECT_EQ(expand_env_vars("", kEnv), "");
}

TEST(ExpandEnvVarsTest, StopsAtTheSizeLimit) {
  EXPECT_EQ(expand_env_vars("$HOME$HOME", kEnv, 18), "/home/ada/home/ada");
  EXPECT_EQ(expand_env_vars("$HOME$HOME", kEnv, 17), std::nullopt);
  EXPECT_EQ(expand_env_vars("0123456789", kEnv, 5), std::nullopt);
}

TEST(ExpandEnvVarsTest, DollarNameIsReplaced) { EXPECT_EQ(expand_env_vars("$HOME/data", kEnv), "/home/ada/data"); }

TEST(ExpandEnvVarsTest, NameEndsAtFirstNonNameCharacter) {
  EXPECT_EQ(expand_env_vars("rank-$RANK.log", kEnv), "rank-3.log");
  EXPECT_EQ(expand_env_vars("$A_1!", kEnv), "x!");
}

TEST(ExpandEnvVarsTest, BracedNameIsReplaced) {
  EXPECT_EQ(expand_env_vars("${HOME}data", kEnv), "/home/adadata");
  EXPECT_EQ(expand_env_vars("${RANK}${RANK}", kEnv), "33");
}

TEST(ExpandEnvVarsTest, UnsetVariableExpandsToEmpty) {
  EXPECT_EQ(expand_env_vars("[$NOPE]", kEnv), "[]");
  EXPECT_EQ(expand_env_vars("[${NOPE}]", kEnv), "[]");
}

TEST(ExpandEnvVarsTest, DoubleDollarIsALiteralDollar) {
  EXPECT_EQ(expand_env_vars("$$", kEnv), "$");
  EXPECT_EQ(expand_env_vars("cost: $$HOME", kEnv), "cost: $HOME");
}

TEST(ExpandEnvVarsTest, PrependsToAnInheritedPath) {
  EXPECT_EQ(expand_env_vars("/code:$PYTHONPATH", kEnv), "/code:/opt/lib");
  EXPECT_EQ(expand_env_vars("/code:$PYTHONPATH", {}), "/code:");
}

TEST(ExpandEnvVarsTest, TrailingDollarStays) {
  EXPECT_EQ(expand_env_vars("price$", kEnv), "price$");
  EXPECT_EQ(expand_env_vars("$", kEnv), "$");
}

TEST(ExpandEnvVarsTest, UnclosedBraceStaysAsWritten) {
  EXPECT_EQ(expand_env_vars("${UNCLOSED", kEnv), "${UNCLOSED");
  EXPECT_EQ(expand_env_vars("a${HOME", kEnv), "a${HOME");
}

TEST(ExpandEnvVarsTest, DollarBeforeNonNameCharacterStays) {
  EXPECT_EQ(expand_env_vars("$1 $- ${}", kEnv), "$1 $- ${}");
}

TEST(ExpandEnvVarsTest, ExpandedValuesAreNotExpandedAgain) {
  const std::map<std::string, std::string> env = {{"A", "$B"}, {"B", "oops"}};

  EXPECT_EQ(expand_env_vars("$A", env), "$B");
}

// --- ids -------------------------------------------------------------------------

TEST(SpreadSubdirectoriesTest, MissingFolderIsRefused) {
  EXPECT_FALSE(spread_subdirectories("/nonexistent/aethergrid-test-dir"));
}

TEST(SpreadSubdirectoriesTest, FileIsRefused) { EXPECT_FALSE(spread_subdirectories("/etc/hostname")); }

TEST(Sha256Test, KnownDigestOfAbc) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256Test, PiecesHashLikeTheWhole) {
  std::string data;
  for (int i = 0; i < 100000; ++i) data.push_back(static_cast<char>(i * 7));
  Sha256 streamed;
  for (size_t at = 0; at < data.size(); at += 999) streamed.update(data.data() + at, std::min<size_t>(999, data.size() - at));
  EXPECT_EQ(streamed.finish_hex(), sha256_hex(data));
}

TEST(Sha256Test, NothingHashesLikeTheEmptyString) {
  Sha256 empty;
  EXPECT_EQ(empty.finish_hex(), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(IdsTest, JobIdIsJobUnderscoreAndTwelveLowercaseHexDigits) {
  const std::string id = new_job_id();

  EXPECT_TRUE(std::regex_match(id, std::regex("job_[0-9a-f]{12}"))) << id;
  EXPECT_TRUE(looks_like_job_id(id)) << id;
}

TEST(IdsTest, NodeIdIsNodeUnderscoreAndTwelveLowercaseHexDigits) {
  const std::string id = new_node_id();

  EXPECT_TRUE(std::regex_match(id, std::regex("node_[0-9a-f]{12}"))) << id;
  EXPECT_FALSE(looks_like_job_id(id));
}

TEST(IdsTest, JobIdsDoNotRepeat) {
  std::set<std::string> ids;
  for (int i = 0; i < 1000; ++i) ids.insert(new_job_id());

  EXPECT_EQ(ids.size(), 1000u);
}

TEST(IdsTest, RandomHexHasTwoDigitsPerByte) {
  EXPECT_EQ(random_hex(0), "");
  EXPECT_TRUE(std::regex_match(random_hex(16), std::regex("[0-9a-f]{32}")));
}

TEST(IdsTest, LooksLikeJobIdRejectsOtherShapes) {
  EXPECT_TRUE(looks_like_job_id("job_0123456789ab"));
  for (const char* bad : {"", "job_", "job_0123456789a", "job_0123456789abc", "job_0123456789AB", "job_01234567890g",
                          "Job_0123456789ab", "../etc/passwd", "job_/../../etc/x", "node_0123456789a"}) {
    EXPECT_FALSE(looks_like_job_id(bad)) << bad;
  }
}

TEST(IdsTest, AnArrayElementIsTheArraysIdAndItsIndex) {
  EXPECT_TRUE(looks_like_job_id("job_0123456789ab_0"));
  EXPECT_TRUE(looks_like_job_id("job_0123456789ab_999999"));
  for (const char* bad : {"job_0123456789ab_", "job_0123456789ab_1000000", "job_0123456789ab_-1", "job_0123456789ab_1a",
                          "job_0123456789ab-1", "job_0123456789ab_1/..", "job_0123456789ab__1"}) {
    EXPECT_FALSE(looks_like_job_id(bad)) << bad;
  }
}

// --- net::parse_target / url_encode ----------------------------------------------

TEST(ParseTargetTest, PathWithoutQuery) {
  std::string path;
  Query query = {{"stale", "1"}};

  ASSERT_TRUE(net::parse_target("/api/jobs", &path, &query));

  EXPECT_EQ(path, "/api/jobs");
  EXPECT_THAT(query, IsEmpty());
}

TEST(ParseTargetTest, QueryParametersAreSplit) {
  std::string path;
  Query query;

  ASSERT_TRUE(net::parse_target("/api/jobs/job_1/logs?task=0&follow=1&offset=", &path, &query));

  EXPECT_EQ(path, "/api/jobs/job_1/logs");
  EXPECT_EQ(query, (Query{{"follow", "1"}, {"offset", ""}, {"task", "0"}}));
}

TEST(ParseTargetTest, PercentAndPlusAreDecodedInQuery) {
  std::string path;
  Query query;

  ASSERT_TRUE(net::parse_target("/p?q=hello%20world&r=a+b&s=%2Fx%3D1", &path, &query));

  EXPECT_EQ(query["q"], "hello world");
  EXPECT_EQ(query["r"], "a b");
  EXPECT_EQ(query["s"], "/x=1");
}

TEST(ParseTargetTest, PathIsPercentDecodedButPlusStays) {
  std::string path;
  Query query;

  ASSERT_TRUE(net::parse_target("/files/my%20dir/a+b", &path, &query));

  EXPECT_EQ(path, "/files/my dir/a+b");
}

TEST(ParseTargetTest, KeyWithoutValueAndEmptyPairs) {
  std::string path;
  Query query;

  ASSERT_TRUE(net::parse_target("/p?&flag&&x=1&", &path, &query));

  EXPECT_EQ(query, (Query{{"flag", ""}, {"x", "1"}}));
}

TEST(ParseTargetTest, MalformedPercentEncodingIsRejected) {
  std::string path;
  Query query;
  for (const char* bad : {"/p%zz", "/p?q=%zz", "/p?q=%2", "/p?q=%", "/p?%g1=1", "/%"}) {
    EXPECT_FALSE(net::parse_target(bad, &path, &query)) << bad;
  }
}

TEST(UrlEncodeTest, UnreservedCharactersStay) { EXPECT_EQ(net::url_encode("AZaz09-_.~"), "AZaz09-_.~"); }

TEST(UrlEncodeTest, EverythingElseIsPercentEncodedInUppercaseHex) {
  EXPECT_EQ(net::url_encode("a b&c=d/e+f%"), "a%20b%26c%3Dd%2Fe%2Bf%25");
  EXPECT_EQ(net::url_encode("\xc3\xa9"), "%C3%A9");
  EXPECT_EQ(net::url_encode(""), "");
}

TEST(UrlEncodeTest, EncodedValueDecodesBackThroughParseTarget) {
  const std::string value = "x=1&y=2 + 50% off/\xc3\xa9?";
  std::string path;
  Query query;

  ASSERT_TRUE(net::parse_target("/p?v=" + net::url_encode(value), &path, &query));

  EXPECT_EQ(query["v"], value);
}

// --- net::parse_endpoint ---------------------------------------------------------

TEST(ParseEndpointTest, HostAndPort) {
  const Result<net::Endpoint> ep = net::parse_endpoint("127.0.0.1:6379", 8265);

  ASSERT_TRUE(ep.ok()) << ep.error().message;
  EXPECT_EQ(ep->host, "127.0.0.1");
  EXPECT_EQ(ep->port, 6379);
  EXPECT_EQ(ep->to_string(), "127.0.0.1:6379");
}

TEST(ParseEndpointTest, SchemeAndTrailingSlashAreStripped) {
  const Result<net::Endpoint> http = net::parse_endpoint("http://h:80/", 8265);
  const Result<net::Endpoint> ws = net::parse_endpoint("ws://head.local:6380", 8265);

  ASSERT_TRUE(http.ok()) << http.error().message;
  EXPECT_EQ(http->host, "h");
  EXPECT_EQ(http->port, 80);
  ASSERT_TRUE(ws.ok()) << ws.error().message;
  EXPECT_EQ(ws->host, "head.local");
  EXPECT_EQ(ws->port, 6380);
}

TEST(ParseEndpointTest, HostAloneGetsTheDefaultPort) {
  const Result<net::Endpoint> ep = net::parse_endpoint("h", 8265);

  ASSERT_TRUE(ep.ok()) << ep.error().message;
  EXPECT_EQ(ep->host, "h");
  EXPECT_EQ(ep->port, 8265);
}

TEST(ParseEndpointTest, HighestPortIsAccepted) {
  const Result<net::Endpoint> ep = net::parse_endpoint("h:65535", 1);

  ASSERT_TRUE(ep.ok()) << ep.error().message;
  EXPECT_EQ(ep->port, 65535);
}

TEST(ParseEndpointTest, BadPortsAreRefusedNamingTheText) {
  for (const char* bad : {"h:0", "h:99999", "h:65536", "h:abc", "h:", ":80", "h:-1", "h:123456"}) {
    const Result<net::Endpoint> ep = net::parse_endpoint(bad, 8265);
    ASSERT_FALSE(ep.ok()) << bad;
    EXPECT_EQ(ep.error().code, ErrorCode::kInvalidArgument) << bad;
    EXPECT_THAT(ep.error().message, HasSubstr(std::string("'") + bad + "'")) << bad;
  }
}

TEST(ParseEndpointTest, EmptyAddressIsRefused) {
  for (const char* empty : {"", "http://", "/"}) {
    const Result<net::Endpoint> ep = net::parse_endpoint(empty, 8265);
    ASSERT_FALSE(ep.ok()) << empty;
    EXPECT_EQ(ep.error().code, ErrorCode::kInvalidArgument);
    EXPECT_THAT(ep.error().message, HasSubstr("empty"));
  }
}

TEST(PrivateDir, MadeWith0700TightenedWhenOpenRefusedWhenALinkOrNotAFolder) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("ag-private-dir-" + std::to_string(::getpid()));
  fs::remove_all(root);
  auto mode = [](const fs::path& p) {
    struct stat st {};
    ::lstat(p.c_str(), &st);
    return st.st_mode & 07777;
  };
  const fs::path made = root / "a" / "session";
  ASSERT_TRUE(ensure_private_dir(made.string()).ok());
  EXPECT_EQ(mode(made), 0700u);
  ::chmod(made.c_str(), 0755);
  ASSERT_TRUE(ensure_private_dir(made.string()).ok());
  EXPECT_EQ(mode(made), 0700u);

  const fs::path link = root / "link";
  fs::create_directory_symlink(made, link);
  Status s = ensure_private_dir(link.string());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kPermissionDenied);
  EXPECT_THAT(s.error().message, ::testing::HasSubstr("is a symbolic link, not a folder"));

  const fs::path file = root / "file";
  { std::ofstream(file.string()) << "x"; }
  EXPECT_EQ(ensure_private_dir(file.string()).error().code, ErrorCode::kInvalidArgument);
  fs::remove_all(root);
}

}  // namespace
}  // namespace ag
