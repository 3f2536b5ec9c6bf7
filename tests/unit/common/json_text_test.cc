// JsonText writes what nlohmann::json::dump() writes: every single byte as a string,
// random byte strings (valid UTF-8 or not: ok() false exactly where dump() throws),
// integers at their limits, and nesting.
#include "common/json_text.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>

namespace ag {
namespace {

using nlohmann::json;

// What dump() writes for `value`, or nullopt where it throws.
std::optional<std::string> dumped(const std::string& value) {
  try {
    return json(value).dump();
  } catch (const json::type_error&) {
    return std::nullopt;
  }
}

void expect_same_string(const std::string& value) {
  std::string text;
  JsonText out(text);
  out.string(value);
  const auto expected = dumped(value);
  EXPECT_EQ(out.ok(), expected.has_value()) << testing::PrintToString(value);
  if (expected && out.ok()) {
    EXPECT_EQ(text, *expected);
  }
}

TEST(JsonTextTest, EverySingleByteIsWrittenOrRefusedAsDumpDoes) {
  for (int c = 0; c < 256; ++c) expect_same_string(std::string(1, static_cast<char>(c)));
}

TEST(JsonTextTest, RandomBytesAreWrittenOrRefusedAsDumpDoes) {
  std::mt19937 random(11);
  // Lead and continuation bytes often enough that valid sequences of every length occur.
  const unsigned char interesting[] = {0x00, 0x1f, 0x20, '"',  '\\', 'a',  0x7f, 0x80, 0x8f, 0x90,
                                       0x9f, 0xa0, 0xbf, 0xc0, 0xc1, 0xc2, 0xdf, 0xe0, 0xe1, 0xec,
                                       0xed, 0xee, 0xef, 0xf0, 0xf1, 0xf3, 0xf4, 0xf5, 0xff};
  int valid = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string value;
    for (size_t n = random() % 6; n > 0; --n) {
      value += static_cast<char>(interesting[random() % sizeof interesting]);
    }
    expect_same_string(value);
    valid += dumped(value).has_value();
  }
  EXPECT_GT(valid, 2000);  // both kinds were tried
}

TEST(JsonTextTest, ObjectsArraysAndNumbersAreWrittenAsDumpWritesThem) {
  std::string text;
  JsonText out(text);
  out.begin_object();
  out.key("a").begin_array().end_array();
  out.key("b").begin_object().end_object();
  out.key("c\n").begin_array().integer(std::numeric_limits<int64_t>::min()).integer(0).integer(-1);
  out.unsigned_integer(std::numeric_limits<uint64_t>::max()).boolean(true).boolean(false).null();
  out.begin_object().key("x").raw("2.5").end_object().begin_array().string("s").end_array().end_array();
  out.key("d").string("");
  out.end_object();
  json expected = {{"a", json::array()},
                   {"b", json::object()},
                   {"c\n",
                    {std::numeric_limits<int64_t>::min(),
                     0,
                     -1,
                     std::numeric_limits<uint64_t>::max(),
                     true,
                     false,
                     nullptr,
                     {{"x", 2.5}},
                     {"s"}}},
                   {"d", ""}};
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(text, expected.dump());
}

}  // namespace
}  // namespace ag
