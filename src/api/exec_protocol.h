// Running a command beside a task (`ag exec`): how its bytes travel.
//
//   client --WebSocket GET /api/jobs/JOB/exec?task_index=N&command=A&command=B[&stdin=1]--> head
//   head   --exec_open {session, task, command, stdin} on the node's channel-->            worker
//   worker --WebSocket GET /api/workers/exec/SESSION (its node credential)-->               head
//
// The head pairs the two WebSockets and passes their binary frames on unchanged, each
// one [channel: 1 byte][bytes]. From the client: kStdin (an empty one closes the
// command's stdin) and, on a terminal, kResize ("ROWS COLS"). From the worker: kStdout,
// kStderr, then one kStatus (JSON: exit_code, or signal, or error) before it closes.
// On a terminal (`tty=1&rows=R&cols=C&term=T`) stdout and stderr are one stream, the
// terminal's. A port forward (GET /api/jobs/JOB/port-forward?task_index=N&port=P) is
// the same session with a TCP connection to 127.0.0.1:P on the task's node in place of
// a command: kStdin carries the bytes to it (empty: the client sent all it will),
// kStdout those from it, kStatus ends it (exit_code 0, or the error). Each side reads on only while the other side's
// sending queue is short, so a command that writes faster than the client reads is
// held back by its pipe, not buffered. A closed client ends the command (SIGHUP to its
// process group, SIGKILL 5 s later).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace ag::api {

inline constexpr const char* kWorkerExecPath = "/api/workers/exec/";

inline constexpr const char* kExecSuffix = "/exec";
inline constexpr const char* kPortForwardSuffix = "/port-forward";

enum class ExecChannel : char { kStdin = 0, kStdout = 1, kStderr = 2, kStatus = 3, kResize = 4 };

// A terminal's size, as kResize carries it.
struct TerminalSize {
  int rows = 0, cols = 0;
  bool operator==(const TerminalSize&) const = default;
};

// Bounds on what one exec asks for.
// The command travels URL-encoded in the request's head (at most 64 KiB): three times
// this, and the rest of the head, fit.
inline constexpr size_t kMaxExecCommandBytes = 16 << 10;
inline constexpr size_t kMaxExecArguments = 4096;
// Frames a side sends at most at once, and how much it lets queue before it stops
// reading (the bound on memory per session at each hop).
inline constexpr size_t kExecChunkBytes = 256 << 10;
inline constexpr size_t kExecHighWaterBytes = 512 << 10;  // with a chunk and the status, under what a close flushes (1 MiB)

// How the command ended: an exit code, a signal, or why it did not run.
struct ExecStatus {
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::string error;
  bool operator==(const ExecStatus&) const = default;
};

std::string exec_frame(ExecChannel channel, std::string_view bytes);
std::string encode_exec_status(const ExecStatus& status);
// Errors (kInvalidArgument) say what was wrong.
Result<ExecStatus> decode_exec_status(std::string_view json);

std::string encode_terminal_size(TerminalSize size);
// "ROWS COLS", each 1-65535; errors (kInvalidArgument) say what was wrong.
Result<TerminalSize> decode_terminal_size(std::string_view text);

// The bounds above, checked; an error names which.
Status check_exec_command(const std::vector<std::string>& command);

}  // namespace ag::api
