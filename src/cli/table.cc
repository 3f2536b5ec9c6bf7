#include "cli/table.h"

#include <algorithm>
#include <cstdio>
#include <ctime>

namespace ag::cli {

bool terminal_safe_as_is(std::string_view text, bool keep_lines) {
  return std::none_of(text.begin(), text.end(), [keep_lines](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return (c < 0x20 && !(keep_lines && (c == '\n' || c == '\t' || c == '\r'))) || c == 0x7f || c == 0xc2;
  });
}

std::string terminal_safe(std::string_view text, bool keep_lines) {
  // Most output has nothing to escape: then it is copied whole (ag logs of a large log).
  if (terminal_safe_as_is(text, keep_lines)) return std::string(text);
  std::string out;
  out.reserve(text.size());
  auto escape = [&out](unsigned char c) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\x%02x", c);
    out += buf;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (keep_lines && (c == '\n' || c == '\t' || c == '\r')) {
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      escape(c);
    } else if (c == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(text[i + 1]) <= 0x9f) {
      // U+0080..U+009F in UTF-8: the C1 controls (CSI among them).
      escape(c);
      escape(static_cast<unsigned char>(text[++i]));
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

void Table::print(std::ostream& out) const {
  std::vector<std::vector<std::string>> safe;
  safe.reserve(rows_.size());
  for (const auto& row : rows_) {
    std::vector<std::string> cells;
    cells.reserve(row.size());
    for (const auto& cell : row) cells.push_back(terminal_safe(cell, false));
    safe.push_back(std::move(cells));
  }
  std::vector<size_t> widths;
  for (const auto& row : safe) {
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  for (const auto& row : safe) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(widths[i] - row[i].size() + 2, ' ');
    }
    out << line << "\n";
  }
}

std::string format_time_ms(int64_t ms) {
  if (ms <= 0) return "-";
  std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::string format_duration_ms(int64_t ms) {
  if (ms < 0) return "-";
  char buf[32];
  if (ms < 60000) {
    std::snprintf(buf, sizeof buf, "%.1fs", ms / 1000.0);
  } else if (ms < 3600000) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(ms / 60000), static_cast<long long>(ms / 1000 % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(ms / 3600000), static_cast<long long>(ms / 60000 % 60));
  }
  return buf;
}

}  // namespace ag::cli
