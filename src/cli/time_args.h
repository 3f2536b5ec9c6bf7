// Times given on the command line: `ag logs --since` (a time ago) and `ag submit
// --begin` (a time to come). Both take a UTC time too; the head keeps ms since the epoch.
#pragma once

#include <cstdint>
#include <string>

#include "common/result.h"

namespace ag::cli {

// --since: a time ago ("90s", "10m", "2h", "1d") or a UTC time
// ("2026-12-01T11:00:00", "Z" optional), as ms since the epoch.
// Errors: kInvalidArgument naming --since and both forms.
Result<int64_t> parse_since(const std::string& text, int64_t now_ms);

// --begin: a time from now ("90s", "10m", "2h", "1d", also written "+10m" or
// "now+10m"; "now" itself), a UTC time ("2026-12-01T20:00:00", "Z" optional), or a
// UTC time of day ("20:00", "20:00:30": the next one to come), as ms since the epoch.
// Errors: kInvalidArgument naming --begin and the forms.
Result<int64_t> parse_begin(const std::string& text, int64_t now_ms);

}  // namespace ag::cli
