// Runs a helper command (the container engine's pull, inspect, rm) without blocking
// the io thread: its output (stdout and stderr together) arrives line by line, its end
// once. The agent's children are reaped in one place (TaskRunner's SIGCHLD handler),
// which hands these commands' ends back through reaped().
//
//   AsyncCommand::run(io, {"podman", "pull", IMAGE}, on_line, done)
//     on_line("Copying blob sha256:...")  ...  done({exit_code 0, last output})
#pragma once

#include <spawn.h>
#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <functional>
#include <string>
#include <vector>

namespace ag::worker {

// Spawn attributes for a child that starts clean: no signal blocked, every signal at its
// default, the usual scheduling policy (SCHED_OTHER), plus `flags`
// (POSIX_SPAWN_SETPGROUP, ...; set their values after this).
void init_clean_spawn(posix_spawnattr_t* attr, short flags);

// Starts `argv` (argv[0] an absolute path, or found on PATH) with stdin from /dev/null
// and stdout and stderr into a pipe whose read end (close-on-exec) goes to `read_fd`.
// Returns the pid, or 0 with `error` set.
// `terminal`: the output goes to a pseudo-terminal (200 columns) instead of a pipe, for
// commands that show progress only to a terminal; the read end is then its master.
// `own_group`: the command leads a process group of its own (kill(-pid) reaches all).
pid_t spawn_with_output(std::vector<std::string> argv, int* read_fd, std::string* error, bool terminal = false,
                        bool own_group = false);

class AsyncCommand {
 public:
  struct Ended {
    int exit_code = -1;  // -1: killed by a signal, or it could not start
    std::string output;  // its last 64 KiB of output (the reason, when it failed)
  };
  using OnLine = std::function<void(const std::string& line)>;
  using Done = std::function<void(const Ended& ended)>;

  // Starts `argv` (argv[0] an absolute path, or found on PATH) with stdin from
  // /dev/null. `on_line` may be null. `done` runs on `io`'s thread once the command
  // has ended and its output is read.
  static void run(boost::asio::io_context& io, std::vector<std::string> argv, OnLine on_line, Done done,
                  bool terminal = false);

  // A child started elsewhere whose end someone waits for (an `ag exec` command):
  // `ended` gets its wait status once it is reaped. Io thread only.
  static void expect_exit(pid_t pid, std::function<void(int status)> ended);

  // For whoever reaps the process's children: true when `pid` was a command started
  // here or expected (its end is then delivered), false when it is someone else's.
  static bool reaped(pid_t pid, int status);
};

}  // namespace ag::worker
