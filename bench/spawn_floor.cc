// The spawn floor: how fast this machine can start and reap a process at all.
//
//   spawn_floor [--mean-gap-ms MS] [--ranks K] [N [COMMAND ARGS...]]
//
// Spawns `/bin/true` (or COMMAND) N times (default 500) in a plain loop (posix_spawn +
// waitpid) and prints the median and p99 latency and the rate as JSON. With
// --mean-gap-ms, each spawn follows an idle gap drawn from an exponential distribution of
// that mean (fixed seed): the floor of a start from an idle machine, which wakes a
// sleeping CPU, as random arrivals do. With --ranks K, each of the N spawns is K
// processes started at once by K spawner processes made beforehand (as a gang's ranks
// are by a supervisor each), its latency until the last has exited: a K-rank gang's
// floor. AetherGrid's start latency and throughput are reported against these numbers,
// measured in the same run.
#include <fcntl.h>
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

namespace {

bool spawn_and_wait(const char* path, const std::vector<char*>& args) {
  pid_t pid;
  if (posix_spawn(&pid, path, nullptr, nullptr, args.data(), environ) != 0) return false;
  int status;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  double mean_gap_ms = 0;
  int ranks = 1;
  int first = 1;
  while (argc > first + 1) {
    if (std::strcmp(argv[first], "--mean-gap-ms") == 0) {
      mean_gap_ms = std::atof(argv[first + 1]);
      if (mean_gap_ms <= 0) {
        std::fprintf(stderr, "spawn_floor: --mean-gap-ms takes a positive number of milliseconds, not '%s'\n",
                     argv[first + 1]);
        return 2;
      }
    } else if (std::strcmp(argv[first], "--ranks") == 0) {
      ranks = std::atoi(argv[first + 1]);
      if (ranks <= 0 || ranks > 64) {
        std::fprintf(stderr, "spawn_floor: --ranks takes a number of processes from 1 to 64, not '%s'\n",
                     argv[first + 1]);
        return 2;
      }
    } else {
      break;
    }
    first += 2;
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
  // --ranks: the spawners, made before anything is timed.
  struct Spawner {
    int go = -1;
    pid_t pid = 0;
  };
  std::vector<Spawner> spawners;
  int done_pipe[2] = {-1, -1};
  if (ranks > 1) {
    if (::pipe2(done_pipe, O_CLOEXEC) != 0) return 1;
    for (int r = 0; r < ranks; ++r) {
      int go[2];
      if (::pipe2(go, O_CLOEXEC) != 0) return 1;
      const pid_t pid = ::fork();
      if (pid < 0) return 1;
      if (pid == 0) {
        // Only the parent holds the others' go pipes, so that closing them ends them.
        for (const Spawner& other : spawners) ::close(other.go);
        ::close(go[1]);
        ::close(done_pipe[0]);
        char byte;
        while (::read(go[0], &byte, 1) == 1) {
          const char done = spawn_and_wait(path, args) ? 1 : 0;
          if (::write(done_pipe[1], &done, 1) != 1) ::_exit(1);
        }
        ::_exit(0);
      }
      ::close(go[0]);
      spawners.push_back({go[1], pid});
    }
  }
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
    if (ranks == 1) {
      if (!spawn_and_wait(path, args)) return 1;
    } else {
      // Each spawner is told to go by a byte of its own and says it is done (1) or
      // failed (0) with a byte on the shared pipe.
      for (const Spawner& spawner : spawners) {
        if (::write(spawner.go, "g", 1) != 1) return 1;
      }
      for (int r = 0; r < ranks; ++r) {
        char done = 0;
        if (::read(done_pipe[0], &done, 1) != 1 || done != 1) return 1;
      }
    }
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  // The rate counts the spawns' time only, not the idle gaps between them.
  double total_s = (std::chrono::duration<double>(std::chrono::steady_clock::now() - start) - idle).count();
  for (const Spawner& spawner : spawners) {
    ::close(spawner.go);  // its read ends: it exits
    ::waitpid(spawner.pid, nullptr, 0);
  }
  std::sort(ms.begin(), ms.end());
  std::printf("{\"n\": %d, \"p50_ms\": %.3f, \"p99_ms\": %.3f, \"rate_per_s\": %.1f}\n", n, ms[n / 2],
              ms[std::min(n - 1, n * 99 / 100)], n / total_s);
  return 0;
}
