// The head <-> worker protocol: one WebSocket per worker, opened by the worker at
// GET /api/workers/connect with a join token or its node credential. Control messages are JSON text
// frames, each an object with a "type"; task output travels in binary log frames
// (api/log_frame.h).
// This header is the whole protocol (the messages for operating nodes, pulls, stacks,
// health and exec, are in api/node_ops_protocol.h): one struct per message, encode() to
// the wire, decode_*() back with an error that names the field. The head (head/gateway/worker_gateway.cc,
// head/jobs/task_dispatcher.cc) and the agent (worker/agent.cc) speak only through these.
//
//   worker                                   head
//     register {node, running[], exited[]} ->
//                                         <- registered {node_id, node_timeout_ms}
//                                         <- log_resume {task, offset}   (per reported task)
//                                         <- launch {task, entrypoint, env, ...}
//     task_started {task, pid}             ->
//     (binary) log frame {task, offset}    ->
//                                         <- kill {task, grace_ms}
//                                         <- exec_open {session, task, command} (api/exec_protocol.h)
//     task_exited {task, exit}             ->
//                                         <- exit_ack {task}
//     heartbeat {usage, busy_ports[]}      ->   (every second)
//     error {message}                     <->   (a message the peer could not accept)
//
// A bad message is answered with an `error` naming what was wrong; a bad register is
// answered with an `error` and the channel is closed.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "api/container_spec.h"
#include "api/node_ops_protocol.h"
#include "api/node_usage.h"
#include "common/result.h"
#include "common/version.h"

namespace ag::api {

inline constexpr const char* kWorkerConnectPath = "/api/workers/connect";

// The range AG_MASTER_PORT is handed out from (torch's default 29500 first).
inline constexpr int kMasterPortFirst = 29500;
inline constexpr int kMasterPortLast = 31499;

// Limits a decoded message is held to.
inline constexpr size_t kMaxControlMessageBytes = 16 << 20;
inline constexpr size_t kMaxIdBytes = 64;         // job and node ids
inline constexpr int kMaxAttempt = 1'000'000;
inline constexpr int kMaxTaskIndex = 1'000'000;
// What one node may advertise: more than any machine has, so that a node cannot claim
// the whole queue's work (and its env_vars) with an absurd offer.
inline constexpr int64_t kMaxNodeCpuMillis = int64_t{100'000} * 1000;  // 100,000 CPUs
inline constexpr int64_t kMaxNodeMemoryBytes = int64_t{1} << 50;       // 1 PiB
inline constexpr int kMaxNodeGpus = 1024;                              // ids 0..1023, each once

// True for an id the head or a worker may build a path from: 1-64 characters of
// [A-Za-z0-9_-] (never '/', '.', NUL).
bool is_safe_id(std::string_view id);

// How a task ended: an exit code or a signal, or it could not start (start_error), or
// it vanished without anyone seeing its end (lost).
struct TaskExit {
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::string start_error;
  std::string lost;
  // The kernel's OOM killer ended a process of the task, whose cap was this (0: unknown).
  bool out_of_memory = false;
  int64_t memory_limit_bytes = 0;
  bool operator==(const TaskExit&) const = default;
};

// ---- worker -> head ----

struct RunningTask {
  TaskKey task;
  int64_t pid = 0;
  bool operator==(const RunningTask&) const = default;
};

// What a task's launch waits for meanwhile (an image pull's progress), for its job's
// events.
struct TaskNote {
  TaskKey task;
  std::string text;
  bool operator==(const TaskNote&) const = default;
};

struct TaskStarted {
  TaskKey task;
  int64_t pid = 0;
  bool operator==(const TaskStarted&) const = default;
};

struct TaskExited {
  TaskKey task;
  TaskExit exit;
  // Bytes of output the task wrote in all, when the worker knows them (-1 when not):
  // the head acknowledges the exit only once its copy of the log is that long, so the
  // worker keeps the bytes until then.
  int64_t log_bytes = -1;
  bool operator==(const TaskExited&) const = default;
};

// The first message on a channel: who the node is, what it offers, and what it still
// runs (`running`) or saw end while the head was away (`exited`, whose exits the
// worker sends again once the head has the whole log).
struct Register {
  std::string node_id;
  std::string address;
  std::string hostname;
  int64_t cpu_millis = 0;
  int64_t memory_bytes = 0;
  std::vector<int> gpu_ids;
  std::vector<RunningTask> running;
  std::vector<TaskExited> exited;
  std::vector<int> busy_ports;  // master-port range ports already held on the node
  std::map<std::string, std::string> labels;  // ag start-worker --label
  std::string limits;  // which task caps the node enforces, for people ("memory, cpu (cgroup v1)")
  std::string container_engine;              // "podman 4.3.1"; "" when it runs no containers
  std::vector<std::string> allowed_mounts;   // prefixes of node paths jobs may mount
  // The worker protocol version the worker speaks (common/version.h). A register
  // without it is from a worker of version 1, which had no such field.
  int protocol_version = kWorkerProtocol;
  std::string network_interface;  // the interface holding `address` ("" from older workers)
  // The node's last failing health report while it is not healthy again (a restarted
  // head learns it here); unset: healthy.
  std::optional<HealthReport> unhealthy;
  bool operator==(const Register&) const = default;
};

struct Heartbeat {
  NodeUsage usage;
  std::vector<int> busy_ports;
  bool operator==(const Heartbeat&) const = default;
};

// ---- head -> worker ----

struct Registered {
  std::string node_id;
  int64_t node_timeout_ms = 0;
  // The node's own credential, when this registration used a join token: the node
  // keeps it (and forgets the join token) and uses it for every later connection.
  std::string node_credential;
  int64_t epoch = 0;  // the leader's, heads sharing a store (0: a lone head); older ones are ignored
  bool operator==(const Registered&) const = default;
};

struct Launch {
  TaskKey task;
  std::string entrypoint;
  std::map<std::string, std::string> env;       // the head's half of the task environment
  std::map<std::string, std::string> env_vars;  // runtime_env.env_vars, expanded on the worker
  std::vector<int> gpu_ids;
  std::string working_dir_hash;   // "" when the job has no working_dir package
  std::string python_executable;  // "" for the node's own
  int64_t memory_limit_bytes = 0;  // task_options.memory as a cap; 0: none
  int64_t cpu_limit_millis = 0;    // num_cpus as a cap; 0: none
  std::string image;               // container image the task runs in; "" for the node itself
  std::vector<Mount> mounts;       // node paths mounted into its container
  std::string owner;               // the user who submitted the job ("" before users): whose account it runs as
  int64_t epoch = 0;               // the sending head's (Registered::epoch)
  bool operator==(const Launch&) const = default;
};

struct Kill {
  TaskKey task;
  int64_t grace_ms = 0;
  int64_t epoch = 0;  // the sending head's (Registered::epoch)
  bool operator==(const Kill&) const = default;
};

struct ExitAck {
  TaskKey task;
  bool operator==(const ExitAck&) const = default;
};

// The head's answer to each heartbeat: the node's lease goes on. A worker that hears
// nothing from the head for the node timeout stops its tasks itself (fencing: the head
// has declared the node dead by then and may run the gang elsewhere).
struct HeartbeatAck {
  bool operator==(const HeartbeatAck&) const = default;
};

// Send the task's output from byte `offset` on (what the head already has).
struct LogResume {
  TaskKey task;
  int64_t offset = 0;
  bool operator==(const LogResume&) const = default;
};

// ---- either way ----

struct ErrorMessage {
  std::string message;
  // The head will refuse this worker the same way however often it retries (another
  // protocol version): the worker gives up instead of retrying.
  bool final = false;
  bool operator==(const ErrorMessage&) const = default;
};

using WorkerMessage =
    std::variant<Register, Heartbeat, TaskStarted, TaskExited, TaskNote, PullUpdate, ErrorMessage, StackReport,
                 HealthReport>;
using HeadMessage =
    std::variant<Registered, Launch, Kill, ExitAck, LogResume, ErrorMessage, HeartbeatAck, Pull, ExecOpen, StackRequest,
                 HealthCleared>;

std::string encode(const Register& m);
std::string encode(const Heartbeat& m);
std::string encode(const TaskStarted& m);
std::string encode(const TaskNote& m);
std::string encode(const TaskExited& m);
std::string encode(const Registered& m);
std::string encode(const Launch& m);
std::string encode(const Kill& m);
std::string encode(const ExitAck& m);
std::string encode(const LogResume& m);
std::string encode(const ErrorMessage& m);
std::string encode(const HeartbeatAck& m);
std::string encode(const WorkerMessage& m);
std::string encode(const HeadMessage& m);

// Decodes a text frame. Errors (kInvalidArgument) say what was wrong and where:
// "task_exited.attempt: expected an integer", "unknown message type 'foo'",
// "message of 20000000 bytes is over the 16777216-byte limit". A register of a
// protocol version this build does not speak is kConflict, naming both
// versions, whatever else it holds.
Result<WorkerMessage> decode_worker_message(std::string_view text);
Result<HeadMessage> decode_head_message(std::string_view text);

// The task a message of type `type` is about, when its job_id, attempt and task_index
// read well even though the rest does not: lets a worker end a task whose launch it
// cannot read.
std::optional<TaskKey> task_key_of(std::string_view text, std::string_view type);

}  // namespace ag::api
