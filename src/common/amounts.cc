#include "common/amounts.h"

#include <cstdio>
#include <ctime>

namespace ag {

std::string format_number(const char* fmt, double value) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, value);
  std::string s = buf;
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s;
}

std::string format_cpus(int64_t cpu_millis) { return format_number("%.3f", static_cast<double>(cpu_millis) / 1000.0); }

std::string format_memory(int64_t bytes) {
  constexpr int64_t kKiB = 1024, kMiB = kKiB * 1024, kGiB = kMiB * 1024;
  if (bytes >= kGiB) return format_number("%.2f", static_cast<double>(bytes) / kGiB) + " GiB";
  if (bytes >= kMiB) return format_number("%.2f", static_cast<double>(bytes) / kMiB) + " MiB";
  if (bytes >= kKiB) return format_number("%.2f", static_cast<double>(bytes) / kKiB) + " KiB";
  return std::to_string(bytes) + " B";
}

std::string utc_timestamp(int64_t ms) {
  const std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[48];
  const size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%03dZ", static_cast<int>(ms % 1000));
  return buf;
}

}  // namespace ag
