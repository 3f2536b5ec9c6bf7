// Small helpers the C++ benchmarks share: timing and their "1000,10000" list flags.
#pragma once

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace ag::bench {

using Clock = std::chrono::steady_clock;

inline double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// "1000,10000" -> {1000, 10000}.
inline std::vector<int> parse_list(const char* text) {
  std::vector<int> out;
  for (const char* p = text; *p;) {
    out.push_back(std::atoi(p));
    p = std::strchr(p, ',');
    if (!p) break;
    ++p;
  }
  return out;
}

}  // namespace ag::bench
