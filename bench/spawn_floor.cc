// The spawn floor: how fast this machine can start and reap a process at all.
// Spawns `/bin/true` (or the command given after N) N times in a plain loop
// (posix_spawn + waitpid) and prints the median and p99 latency and the rate as JSON. AetherGrid's start latency and
// throughput are reported against these numbers, measured in the same run.
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

extern char** environ;

int main(int argc, char** argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 500;
  std::vector<char*> args;
  if (argc > 2) {
    for (int i = 2; i < argc; ++i) args.push_back(argv[i]);
  } else {
    args.push_back(const_cast<char*>("/bin/true"));
  }
  args.push_back(nullptr);
  const char* path = args[0];
  std::vector<double> ms;
  ms.reserve(n);
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    pid_t pid;
    if (posix_spawn(&pid, path, nullptr, nullptr, args.data(), environ) != 0) return 1;
    int status;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  double total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::sort(ms.begin(), ms.end());
  std::printf("{\"n\": %d, \"p50_ms\": %.3f, \"p99_ms\": %.3f, \"rate_per_s\": %.1f}\n", n, ms[n / 2],
              ms[std::min(n - 1, n * 99 / 100)], n / total_s);
  return 0;
}
