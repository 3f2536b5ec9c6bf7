#include "cli/units.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <sstream>

namespace ag::cli {

Result<int64_t> parse_size(const std::string& flag, const std::string& text) {
  const auto bad = [&] {
    return invalid_argument(flag + ": '" + text + "' is not a size: use bytes or a number with K, M, G or T " +
                            "(1048576, 512K, 100M, 1.5G; powers of 1024)");
  };
  size_t digits = 0;
  while (digits < text.size() && (std::isdigit(static_cast<unsigned char>(text[digits])) || text[digits] == '.')) {
    ++digits;
  }
  if (digits == 0) return bad();
  char* end = nullptr;
  const std::string number = text.substr(0, digits);
  const double amount = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size() || !std::isfinite(amount)) return bad();
  std::string unit = text.substr(digits);
  for (auto& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (unit.size() > 1 && unit.back() == 'B') unit.pop_back();
  if (unit.size() > 1 && unit.back() == 'I') unit.pop_back();
  int shift = 0;
  if (unit.empty() || unit == "B") {
    shift = 0;
  } else if (unit == "K") {
    shift = 10;
  } else if (unit == "M") {
    shift = 20;
  } else if (unit == "G") {
    shift = 30;
  } else if (unit == "T") {
    shift = 40;
  } else {
    return bad();
  }
  const double bytes = std::ldexp(amount, shift);
  if (bytes > std::ldexp(1.0, 62)) return invalid_argument(flag + ": '" + text + "' is more than this can count");
  if (shift == 0 && number.find('.') != std::string::npos) return bad();  // a fraction of a byte
  return static_cast<int64_t>(std::llround(bytes));
}

Result<double> parse_duration_s(const std::string& flag, const std::string& text) {
  const auto bad = [&] {
    return invalid_argument(flag + ": '" + text + "' is not a duration: use 90s, 15m, 2h or 1d (a number alone is "
                                               "seconds)");
  };
  size_t digits = 0;
  while (digits < text.size() && (std::isdigit(static_cast<unsigned char>(text[digits])) || text[digits] == '.')) {
    ++digits;
  }
  if (digits == 0) return bad();
  const std::string number = text.substr(0, digits);
  char* end = nullptr;
  const double amount = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size() || !std::isfinite(amount)) return bad();
  const std::string unit = text.substr(digits);
  double scale = 0;
  if (unit.empty() || unit == "s") {
    scale = 1;
  } else if (unit == "ms") {
    scale = 0.001;
  } else if (unit == "m") {
    scale = 60;
  } else if (unit == "h") {
    scale = 3600;
  } else if (unit == "d") {
    scale = 86400;
  } else {
    return bad();
  }
  const double seconds = amount * scale;
  if (seconds > 100.0 * 365 * 86400) return invalid_argument(flag + ": '" + text + "' is more than 100 years");
  return seconds;
}

std::string format_size(int64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " B";
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  double amount = static_cast<double>(bytes) / 1024;
  size_t unit = 0;
  while (amount >= 1024 && unit + 1 < std::size(kUnits)) {
    amount /= 1024;
    ++unit;
  }
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(1);
  out << amount << " " << kUnits[unit];
  return out.str();
}

std::string format_duration(double seconds) {
  const auto in = [&](double unit, const char* name) {
    std::ostringstream out;
    out << seconds / unit << name;
    return out.str();
  };
  if (seconds > 0 && seconds < 1) return in(0.001, "ms");
  // The largest unit that shows it whole: 90s, not 1.5m; 36h, not 1.5d.
  if (seconds >= 86400 && std::fmod(seconds, 86400) == 0) return in(86400, "d");
  if (seconds >= 3600 && std::fmod(seconds, 3600) == 0) return in(3600, "h");
  if (seconds >= 60 && std::fmod(seconds, 60) == 0) return in(60, "m");
  return in(1, "s");
}

}  // namespace ag::cli
