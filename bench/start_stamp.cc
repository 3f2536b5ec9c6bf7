// What a rank of the start-latency benchmarks runs: it prints the wall clock as it
// starts (seconds since the epoch, to the microsecond) and exits. Linked like any user
// program (dynamically, against libc), so its start pays what every task's program
// pays — the exec and the dynamic loader — and nothing of its own, as a shell's start
// would (bash alone is about 1 ms here).
#include <time.h>

#include <cstdio>

int main() {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  std::printf("%lld.%06ld\n", static_cast<long long>(now.tv_sec), now.tv_nsec / 1000);
  return 0;
}
