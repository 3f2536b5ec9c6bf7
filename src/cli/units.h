// Sizes as users type them on the command line: "512", "64K", "512Mi", "4G", "1.5GiB".
// K, M, G and T count in powers of 1024 (as `ag submit --memory` and the GiB the CLI
// prints do); "Ki"/"KiB" and "K"/"KB" mean the same.
#pragma once

#include <cstdint>
#include <string>

#include "common/result.h"

namespace ag::cli {

// Bytes. Errors (kInvalidArgument, naming `flag`): not a size ("'2x' is not a size:
// use 1048576, 512K, 100M or 2G"), negative, or past 2^62.
Result<int64_t> parse_size(const std::string& flag, const std::string& text);

}  // namespace ag::cli
