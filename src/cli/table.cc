#include "cli/table.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <cstdio>
#include <ctime>

namespace ag::cli {

namespace {

// Bytes terminal_safe may change: the C0 controls (but line breaks and tabs with
// `keep_lines`), DEL, and the lead byte of the C1 controls in UTF-8.
struct EscapeTable {
  std::array<bool, 256> table{};
  explicit EscapeTable(bool keep_lines) {
    for (int c = 0; c < 0x20; ++c) table[static_cast<size_t>(c)] = true;
    if (keep_lines) table['\n'] = table['\t'] = table['\r'] = false;
    table[0x7f] = table[0xc2] = true;
  }
};

}  // namespace

bool terminal_safe_as_is(std::string_view text, bool keep_lines) {
  static const EscapeTable lines(true), cells(false);
  const auto& escapes = (keep_lines ? lines : cells).table;
  // This runs over every byte `ag logs` prints: eight bytes at a time, byte by byte only
  // in words that hold a byte below 0x20, DEL or 0xc2 (a newline among them).
  constexpr uint64_t kOnes = 0x0101010101010101ull, kHighs = 0x8080808080808080ull;
  const auto has_zero = [](uint64_t x) { return ((x - kOnes) & ~x & kHighs) != 0; };
  size_t i = 0;
  for (; i + 8 <= text.size(); i += 8) {
    uint64_t word = 0;
    std::memcpy(&word, text.data() + i, 8);
    const bool below_space = ((word - kOnes * 0x20) & ~word & kHighs) != 0;
    if (!below_space && !has_zero(word ^ (kOnes * 0x7f)) && !has_zero(word ^ (kOnes * 0xc2))) continue;
    for (size_t k = i; k < i + 8; ++k) {
      if (escapes[static_cast<unsigned char>(text[k])]) return false;
    }
  }
  for (; i < text.size(); ++i) {
    if (escapes[static_cast<unsigned char>(text[i])]) return false;
  }
  return true;
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
