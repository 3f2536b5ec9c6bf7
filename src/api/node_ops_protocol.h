// The messages of the head <-> worker protocol (api/protocol.h) that serve operating
// nodes rather than running tasks: image pulls (`ag pull`), stack dumps (`ag stack`),
// node health (health checks, GPU errors, `ag resume`) and commands beside a task
// (`ag exec`, `ag port-forward`). protocol.h carries them in its message variants and
// decodes them; their structs and encoders are here.
//
//   head -> worker: pull, stack_request, health_cleared, exec_open
//   worker -> head: pull_update, stack_report, health_report
#pragma once

#include <string>
#include <vector>

#include "api/node_usage.h"

namespace ag::api {

// Pull `image` now, ahead of the jobs that will use it (ag pull).
struct Pull {
  std::string pull_id;
  std::string image;
  bool operator==(const Pull&) const = default;
};

// How a node's pull of an image (ag pull) goes: progress lines, then its end.
struct PullUpdate {
  std::string pull_id;
  std::string text;   // progress
  bool done = false;  // the pull ended: with `error`, or the image is there
  std::string error;
  bool operator==(const PullUpdate&) const = default;
};

// Take the stacks of the task's Python processes (`ag stack`); answered with a
// StackReport naming `request`.
struct StackRequest {
  std::string request;
  TaskKey task;
  bool operator==(const StackRequest&) const = default;
};

// The answer to a StackRequest: the stacks of the task's Python processes (faulthandler's
// text, per process), or, for a task with none, its process tree; `error` when they
// could not be taken.
struct StackReport {
  std::string request;
  TaskKey task;
  bool python = false;  // at least one Python process answered
  std::string text;
  std::string error;
  bool operator==(const StackReport&) const = default;
};

// The node's health as its checks see it (ag start-worker --health-check, GPU errors
// from NVML): sent after every failing check and when the node is healthy again. A
// `sticky` failure (a GPU error) stays until an admin clears it (`ag resume NODE`).
struct HealthReport {
  bool healthy = true;
  std::string reason;  // why not: the check, its exit status and last lines; the GPU and its error
  bool sticky = false;
  std::string gpu_kind;  // a GPU error's kind: "xid", "ecc", "retired_pages", "row_remap", "vanished"
  int gpu_index = -1;    // and its GPU
  bool operator==(const HealthReport&) const = default;
};

// An admin cleared the node's UNHEALTHY mark (`ag resume NODE`): the worker forgets the
// failure it holds (a GPU fault), so its next registration does not bring it back.
struct HealthCleared {
  bool operator==(const HealthCleared&) const = default;
};

// Run `command` beside the task and dial back to kWorkerExecPath + session
// (api/exec_protocol.h); `with_stdin`: the client sends input. With `tty` the command
// runs on a pseudo-terminal of rows x cols, TERM=`term`. With `port` > 0 there is no
// command: the session is one TCP connection to 127.0.0.1:port on the task's node.
struct ExecOpen {
  std::string session;
  TaskKey task;
  std::vector<std::string> command;
  bool with_stdin = false;
  bool tty = false;
  int rows = 0, cols = 0;
  std::string term;
  int port = 0;
  bool operator==(const ExecOpen&) const = default;
};

std::string encode(const Pull& m);
std::string encode(const PullUpdate& m);
std::string encode(const StackRequest& m);
std::string encode(const StackReport& m);
std::string encode(const HealthReport& m);
std::string encode(const HealthCleared& m);
std::string encode(const ExecOpen& m);

}  // namespace ag::api
