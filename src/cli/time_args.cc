#include "cli/time_args.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <ctime>
#include <optional>
#include <string_view>

#include "cli/units.h"

namespace ag::cli {
namespace {

constexpr int64_t kDayMs = 24 * 3600 * 1000;

// "90s", "10m", "2h", "1d" (units.h's durations, with their unit) in ms; nullopt for
// anything else (or an amount so large it would pass `limit_ms`).
std::optional<int64_t> duration_ms(std::string_view text, int64_t limit_ms) {
  if (text.empty() || !std::isalpha(static_cast<unsigned char>(text.back()))) return std::nullopt;
  auto seconds = parse_duration_s("", std::string(text));
  if (!seconds.ok() || seconds.value() * 1000 > static_cast<double>(limit_ms)) return std::nullopt;
  return static_cast<int64_t>(std::llround(seconds.value() * 1000));
}

// "2026-12-01T11:00:00" with an optional "Z", read as UTC.
std::optional<int64_t> utc_time_ms(const std::string& text) {
  std::tm tm{};
  const char* rest = strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (!rest || (*rest != '\0' && std::string_view(rest) != "Z")) return std::nullopt;
  return static_cast<int64_t>(timegm(&tm)) * 1000;
}

// "20:00" or "20:00:30" (UTC): the next such moment after now_ms.
std::optional<int64_t> time_of_day_ms(const std::string& text, int64_t now_ms) {
  std::tm tm{};
  const char* rest = strptime(text.c_str(), "%H:%M", &tm);
  if (!rest) return std::nullopt;
  if (*rest == ':') rest = strptime(rest, ":%S", &tm);
  if (!rest || *rest != '\0') return std::nullopt;
  const int64_t of_day = ((tm.tm_hour * 60 + tm.tm_min) * 60 + tm.tm_sec) * int64_t{1000};
  const int64_t midnight = now_ms - now_ms % kDayMs;
  const int64_t today = midnight + of_day;
  return today > now_ms ? today : today + kDayMs;
}

}  // namespace

Result<int64_t> parse_since(const std::string& text, int64_t now_ms) {
  if (auto ago = duration_ms(text, now_ms)) return now_ms - *ago;
  if (auto at = utc_time_ms(text)) return *at;
  return invalid_argument("--since takes a time ago like 90s, 10m, 2h or 1d, or a UTC time like "
                          "2026-12-01T11:00:00; got '" + text + "'");
}

Result<int64_t> parse_begin(const std::string& text, int64_t now_ms) {
  if (text == "now") return now_ms;
  std::string_view ahead = text;
  if (ahead.rfind("now+", 0) == 0) ahead.remove_prefix(4);
  else if (ahead.rfind('+', 0) == 0) ahead.remove_prefix(1);
  // Up to ten years ahead: further is a typo, not a plan.
  if (auto in = duration_ms(ahead, 3650 * kDayMs)) return now_ms + *in;
  if (auto at = utc_time_ms(text)) return *at;
  if (auto at = time_of_day_ms(text, now_ms)) return *at;
  return invalid_argument("--begin takes a time from now like 90s, 10m, 2h or 1d (also +10m or now+10m), a UTC time "
                          "like 2026-12-01T20:00:00, or a UTC time of day like 20:00; got '" + text + "'");
}

}  // namespace ag::cli
