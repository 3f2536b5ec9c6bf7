// The spawn floor: how fast this machine can start and reap a process at all.
//
//   spawn_floor [--mean-gap-ms MS] [N [COMMAND ARGS...]]
//
// Spawns `/bin/true` (or COMMAND) N times (default 500) in a plain loop (posix_spawn +
// waitpid) and prints the median and p99 latency and the rate as JSON. With
// --mean-gap-ms, each spawn follows an idle gap drawn from an exponential distribution of
// that mean (fixed seed): the floor of a start from an idle machine, which wakes a
// sleeping CPU, as random arrivals do. AetherGrid's start latency and throughput are
// reported against these numbers, measured in the same run.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

extern char** environ;

int main(int argc, char** argv) {
  double mean_gap_ms = 0;
  int first = 1;
  if (argc > 2 && std::strcmp(argv[1], "--mean-gap-ms") == 0) {
    mean_gap_ms = std::atof(argv[2]);
    if (mean_gap_ms <= 0) {
      std::fprintf(stderr, "spawn_floor: --mean-gap-ms takes a positive number of milliseconds, not '%s'\n", argv[2]);
      return 2;
    }
    first = 3;
  }
  int n = argc > first ? std::atoi(argv[first]) : 500;
  if (n <= 0) {
    std::fprintf(stderr, "spawn_floor: N must be a positive number of spawns\n");
    return 2;
  }
  std::mt19937 rng(31);
  std::exponential_distribution<double> gap_ms(mean_gap_ms > 0 ? 1 / mean_gap_ms : 1);
  std::vector<char*> args;
  if (argc > first + 1) {
    for (int i = first + 1; i < argc; ++i) args.push_back(argv[i]);
  } else {
    args.push_back(const_cast<char*>("/bin/true"));
  }
  args.push_back(nullptr);
  const char* path = args[0];
  std::vector<double> ms;
  ms.reserve(n);
  auto start = std::chrono::steady_clock::now();
  std::chrono::duration<double> idle{0};
  for (int i = 0; i < n; ++i) {
    if (mean_gap_ms > 0) {
      const auto slept_from = std::chrono::steady_clock::now();
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(gap_ms(rng)));
      idle += std::chrono::steady_clock::now() - slept_from;
    }
    auto t0 = std::chrono::steady_clock::now();
    pid_t pid;
    if (posix_spawn(&pid, path, nullptr, nullptr, args.data(), environ) != 0) return 1;
    int status;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  // The rate counts the spawns' time only, not the idle gaps between them.
  double total_s = (std::chrono::duration<double>(std::chrono::steady_clock::now() - start) - idle).count();
  std::sort(ms.begin(), ms.end());
  std::printf("{\"n\": %d, \"p50_ms\": %.3f, \"p99_ms\": %.3f, \"rate_per_s\": %.1f}\n", n, ms[n / 2],
              ms[std::min(n - 1, n * 99 / 100)], n / total_s);
  return 0;
}
