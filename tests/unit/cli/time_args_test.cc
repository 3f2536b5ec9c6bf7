// --since and --begin (cli/time_args.h).
#include "cli/time_args.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace ag::cli {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kNow = 1'796'153'400'000;  // 2026-12-01 19:30:00 UTC
constexpr int64_t kMinute = 60'000;

TEST(TimeArgsTest, SinceIsATimeAgoOrAUtcTime) {
  EXPECT_EQ(parse_since("10m", kNow).value(), kNow - 10 * kMinute);
  EXPECT_EQ(parse_since("2026-12-01T19:00:00", kNow).value(), kNow - 30 * kMinute);
  EXPECT_EQ(parse_since("2026-12-01T19:00:00Z", kNow).value(), kNow - 30 * kMinute);
  EXPECT_THAT(parse_since("yesterday", kNow).error().message, HasSubstr("--since takes a time ago"));
}

TEST(TimeArgsTest, BeginIsATimeFromNowAUtcTimeOrATimeOfDay) {
  EXPECT_EQ(parse_begin("now", kNow).value(), kNow);
  EXPECT_EQ(parse_begin("10m", kNow).value(), kNow + 10 * kMinute);
  EXPECT_EQ(parse_begin("+2h", kNow).value(), kNow + 120 * kMinute);
  EXPECT_EQ(parse_begin("now+1d", kNow).value(), kNow + 24 * 60 * kMinute);
  EXPECT_EQ(parse_begin("2026-12-01T20:00:00", kNow).value(), kNow + 30 * kMinute);
  // A time of day is the next one to come: later today, or tomorrow once passed.
  EXPECT_EQ(parse_begin("20:00", kNow).value(), kNow + 30 * kMinute);
  EXPECT_EQ(parse_begin("19:00:30", kNow).value(), kNow + (24 * 60 - 30) * kMinute + 30'000);
}

TEST(TimeArgsTest, BeginRefusesWhatIsNoTime) {
  for (const char* bad : {"", "soon", "10x", "-5m", "now-5m", "25:00", "2026-13-01T00:00:00", "99999d"}) {
    auto result = parse_begin(bad, kNow);
    ASSERT_FALSE(result.ok()) << bad;
    EXPECT_THAT(result.error().message, HasSubstr("--begin takes a time from now")) << bad;
  }
}

}  // namespace
}  // namespace ag::cli
