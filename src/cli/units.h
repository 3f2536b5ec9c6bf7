// Durations and sizes as users type them on the command line; every flag that takes
// one reads it here (unit_flags.h hooks these into the flags), so they all take the same
// forms and refuse the same way.
//   durations: "90s", "1.5s", "500ms", "15m", "2h", "1d"; a number alone is seconds
//   sizes: "512", "64K", "512Mi", "4G", "1.5GiB"; K, M, G and T count in powers of 1024
//     (as `ag submit --memory` and the GiB the CLI prints do); "Ki"/"KiB" and "K"/"KB"
//     mean the same
#pragma once

#include <cstdint>
#include <string>

#include "common/result.h"

namespace ag::cli {

// Bytes. Errors (kInvalidArgument, naming `flag`): not a size ("'2x' is not a size:
// use 1048576, 512K, 100M or 2G"), negative, or past 2^62.
Result<int64_t> parse_size(const std::string& flag, const std::string& text);

// Seconds. Errors (kInvalidArgument, naming `flag`): not a duration ("--timeout: '2x' is
// not a duration: use 90s, 15m, 2h or 1d (a number alone is seconds)"), negative, or
// more than 100 years.
Result<double> parse_duration_s(const std::string& flag, const std::string& text);

// "512 B", "12.3 KiB", "4.0 MiB", "1.5 GiB": `bytes` for people (powers of 1024).
std::string format_size(int64_t bytes);

// "90s", "15m", "2h", "36h", "500ms": `seconds` in the largest unit that shows it whole.
std::string format_duration(double seconds);

}  // namespace ag::cli
