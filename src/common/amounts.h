// Amounts and times written the way people read them: "2.5" not "2.500", "4 GiB" not
// "4294967296".
#pragma once

#include <cstdint>
#include <string>

namespace ag {

// printf of `value` with `fmt`, trailing zeros of a fraction trimmed ("2.50" -> "2.5").
std::string format_number(const char* fmt, double value);
// CPUs from thousandths: 1500 -> "1.5".
std::string format_cpus(int64_t cpu_millis);
// Bytes in the largest binary unit that fits: "4 GiB", "1.5 MiB", "512 B".
std::string format_memory(int64_t bytes);
// A time in ms since the epoch, in UTC to the ms: "2026-12-01T11:48:03.123Z".
std::string utc_timestamp(int64_t ms);

}  // namespace ag
