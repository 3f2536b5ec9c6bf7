// Plain-text tables for human output: columns padded to their widest cell.
#pragma once

#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace ag::cli {

class Table {
 public:
  explicit Table(std::vector<std::string> header) : rows_{std::move(header)} {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void print(std::ostream& out) const;

 private:
  std::vector<std::vector<std::string>> rows_;
};

// `text` with the control characters a terminal would act on (escape sequences that
// move the cursor, retitle the window, hide text; C1 controls) written as \xHH, so
// that a job name or a log line shows as what it is. `keep_lines`: newline, tab and
// carriage return pass (log output); otherwise they are escaped too (table cells).
// Whether terminal_safe would leave `text` as it is.
bool terminal_safe_as_is(std::string_view text, bool keep_lines);
std::string terminal_safe(std::string_view text, bool keep_lines);

// "2026-11-29 17:50:01" in local time, or "-" for 0.
std::string format_time_ms(int64_t ms);
// "1.2s", "3m04s", "-" when unknown.
std::string format_duration_ms(int64_t ms);

}  // namespace ag::cli
