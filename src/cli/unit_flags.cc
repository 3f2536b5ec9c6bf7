#include "cli/unit_flags.h"

#include <cctype>
#include <cmath>
#include <iomanip>
#include <sstream>

#include "cli/units.h"

namespace ag::cli {
namespace {

// As the option's variable reads it back: exact (17 digits), in plain notation.
std::string exact_text(double value) {
  std::ostringstream out;
  out << std::setprecision(17) << value;
  return out.str();
}

std::string number_text(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

bool plain_number(const std::string& text) {
  if (text.empty()) return false;
  for (char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c)) && c != '.') return false;
  }
  return true;
}

}  // namespace

CLI::Validator duration_flag(double min_s, double max_s, const std::string& unset_hint) {
  const std::string range = "from " + format_duration(min_s) + " to " + format_duration(max_s);
  return CLI::Validator(
      [min_s, max_s, range, unset_hint](std::string& value) -> std::string {
        auto seconds = parse_duration_s("", value);
        if (!seconds.ok()) return seconds.error().message.substr(2);  // without the empty flag's ": "
        if (seconds.value() < min_s || seconds.value() > max_s) {
          return value + " is " + (seconds.value() < min_s ? "too short" : "too long") + ": give " + range +
                 (unset_hint.empty() ? "" : " (" + unset_hint + ")");
        }
        value = exact_text(seconds.value());
        return "";
      },
      "DURATION");
}

CLI::Validator size_flag(int64_t unit_bytes, const std::string& unit, double min, double max) {
  const std::string range = "from " + number_text(min) + " to " + number_text(max) + " " + unit;
  return CLI::Validator(
      [unit_bytes, unit, min, max, range](std::string& value) -> std::string {
        double amount = 0;
        if (plain_number(value)) {
          amount = std::strtod(value.c_str(), nullptr);  // a number alone: the flag's unit
        } else {
          auto bytes = parse_size("", value);
          if (!bytes.ok()) return bytes.error().message.substr(2);
          amount = static_cast<double>(bytes.value()) / static_cast<double>(unit_bytes);
        }
        if (amount < min || amount > max) {
          return value + " is " + (amount < min ? "too small" : "too large") + ": give " + range + " (or 512M, 4G, ...)";
        }
        value = exact_text(amount);
        return "";
      },
      "SIZE");
}

}  // namespace ag::cli
