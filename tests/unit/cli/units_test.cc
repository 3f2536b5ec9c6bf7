// Durations and sizes as the CLI reads them (cli/units.h) and the flags that take them
// (cli/unit_flags.h): every form a user types, the one error for what is not one, the
// flag's unit kept for a number alone, and ranges said in the flag's own terms. Then
// `ag submit`'s own flags parsed as the binary parses them.
#include "cli/units.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli/submit_options.h"
#include "cli/unit_flags.h"

namespace ag::cli {
namespace {

using ::testing::HasSubstr;

TEST(DurationTest, EveryFormIsSecondsAndANumberAloneIsSeconds) {
  const std::vector<std::pair<std::string, double>> cases = {
      {"90", 90}, {"90s", 90}, {"1.5s", 1.5}, {"500ms", 0.5}, {"15m", 900}, {"2h", 7200}, {"1d", 86400},
      {"0.5h", 1800}, {"0", 0}};
  for (const auto& [text, seconds] : cases) {
    auto parsed = parse_duration_s("--timeout", text);
    ASSERT_TRUE(parsed.ok()) << text << ": " << parsed.error().message;
    EXPECT_DOUBLE_EQ(parsed.value(), seconds) << text;
  }
}

TEST(DurationTest, WhatIsNotADurationGetsOneErrorNamingTheFlag) {
  for (const std::string text : {"2x", "", "h", "-5", "1h30", "1e3", "2 h", "1.2.3s", "5min"}) {
    auto parsed = parse_duration_s("--timeout", text);
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_EQ(parsed.error().message,
              "--timeout: '" + text + "' is not a duration: use 90s, 15m, 2h or 1d (a number alone is seconds)");
  }
  EXPECT_THAT(parse_duration_s("--timeout", "40000d").error().message, HasSubstr("more than 100 years"));
}

TEST(DurationTest, SecondsAreShownTheWayAUserWritesThem) {
  EXPECT_EQ(format_duration(0.2), "200ms");
  EXPECT_EQ(format_duration(0), "0s");
  EXPECT_EQ(format_duration(90), "90s");
  EXPECT_EQ(format_duration(600), "10m");
  EXPECT_EQ(format_duration(3600), "1h");
  EXPECT_EQ(format_duration(90 * 86400), "90d");
}

TEST(SizeTest, BytesAreShownInTheUnitThatFits) {
  EXPECT_EQ(format_size(0), "0 B");
  EXPECT_EQ(format_size(1023), "1023 B");
  EXPECT_EQ(format_size(1536), "1.5 KiB");
  EXPECT_EQ(format_size(int64_t{100} << 20), "100.0 MiB");
  EXPECT_EQ(format_size(int64_t{3} << 30), "3.0 GiB");
}

// Parses `args` for one option holding a double, with `validator`; the error or "".
std::string parse_one(CLI::Validator validator, const std::vector<std::string>& args, double* out) {
  CLI::App app;
  app.add_option("--value", *out)->transform(validator);
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return "";
}

TEST(UnitFlagsTest, ADurationFlagKeepsSecondsAndSaysItsRange) {
  double seconds = -1;
  EXPECT_EQ(parse_one(duration_flag(1, 90 * 86400, "leave it out for no limit"), {"--value", "2h"}, &seconds), "");
  EXPECT_DOUBLE_EQ(seconds, 7200);
  EXPECT_EQ(parse_one(duration_flag(1, 90 * 86400), {"--value", "2.5"}, &seconds), "");
  EXPECT_DOUBLE_EQ(seconds, 2.5);
  EXPECT_THAT(parse_one(duration_flag(1, 90 * 86400, "leave it out for no limit"), {"--value", "0"}, &seconds),
              HasSubstr("0 is too short: give from 1s to 90d (leave it out for no limit)"));
  EXPECT_THAT(parse_one(duration_flag(0, 600), {"--value", "1h"}, &seconds), HasSubstr("1h is too long: give from 0s to 10m"));
  const std::string bad = parse_one(duration_flag(0, 600), {"--value", "2x"}, &seconds);
  EXPECT_THAT(bad, HasSubstr("'2x' is not a duration: use 90s, 15m, 2h or 1d"));
  EXPECT_THAT(bad, ::testing::Not(HasSubstr("1.79769")));
}

TEST(UnitFlagsTest, ASizeFlagKeepsItsUnitForANumberAloneAndTakesUnits) {
  double gib = -1;
  EXPECT_EQ(parse_one(size_flag(int64_t{1} << 30, "GiB", 0, 1e6), {"--value", "4"}, &gib), "");
  EXPECT_DOUBLE_EQ(gib, 4);
  EXPECT_EQ(parse_one(size_flag(int64_t{1} << 30, "GiB", 0, 1e6), {"--value", "512Mi"}, &gib), "");
  EXPECT_DOUBLE_EQ(gib, 0.5);
  EXPECT_EQ(parse_one(size_flag(int64_t{1} << 30, "GiB", 0, 1e6), {"--value", "1.5GiB"}, &gib), "");
  EXPECT_DOUBLE_EQ(gib, 1.5);
  double mib = -1;
  EXPECT_EQ(parse_one(size_flag(1 << 20, "MiB", 1, 1e6), {"--value", "2G"}, &mib), "");
  EXPECT_DOUBLE_EQ(mib, 2048);
  EXPECT_THAT(parse_one(size_flag(1 << 20, "MiB", 1, 1e6), {"--value", "512K"}, &mib),
              HasSubstr("512K is too small: give from 1 to 1e+06 MiB"));
  EXPECT_THAT(parse_one(size_flag(1 << 20, "MiB", 1, 1e6), {"--value", "lots"}, &mib),
              HasSubstr("'lots' is not a size"));
}

TEST(UnitFlagsTest, SubmitTakesUnitsForItsDurationsAndMemory) {
  CLI::App app;
  SubmitOptions options;
  CLI::App* submit = add_submit_command(app, options);
  ASSERT_NE(submit, nullptr);
  std::vector<std::string> args = {"submit", "--timeout", "2h", "--retry-delay", "30s", "--memory", "512Mi",
                                   "--",     "python",    "train.py"};
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  app.parse(reversed);
  EXPECT_DOUBLE_EQ(options.timeout_s.value_or(-1), 7200);
  EXPECT_DOUBLE_EQ(options.retry_delay_s.value_or(-1), 30);
  EXPECT_DOUBLE_EQ(options.memory_gb.value_or(-1), 0.5);
}

}  // namespace
}  // namespace ag::cli
