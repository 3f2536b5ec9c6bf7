// Flags that take a duration or a size (units.h), as CLI11 validators: the text a user
// typed ("2h", "512Mi") becomes a plain number in the flag's own unit (seconds, GiB,
// MiB, bytes), checked against the flag's range, so the option's variable keeps that
// unit. A bad value is one line naming the flag, what was wrong and the forms:
//   --timeout: '2x' is not a duration: use 90s, 15m, 2h or 1d (a number alone is seconds)
//   --timeout: 0s is too short: give from 1s to 90d (leave it out for no limit)
// Included only where options are declared (CLI11 is heavy).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace ag::cli {

// Seconds from `min_s` to `max_s`. `unset_hint`: said after a value out of range (what
// leaving the flag out does, say).
CLI::Validator duration_flag(double min_s, double max_s, const std::string& unset_hint = "");

// A size in units of `unit_bytes` (named `unit`: "GiB"), from `min` to `max` of them. A
// number alone is in that unit ("--memory 4" is 4 GiB), as the flag always took it.
CLI::Validator size_flag(int64_t unit_bytes, const std::string& unit, double min, double max);

}  // namespace ag::cli
