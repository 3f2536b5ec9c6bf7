// The worker <-> head channel: one WebSocket per worker, opened by the worker at
// GET /api/workers/connect with the cluster token. Control messages are JSON text
// frames with a "type"; task output travels in binary frames (log_frame.h).
//
//   worker -> head  register {node_id, address, hostname, resources, running[], busy_ports[]}
//   head -> worker  registered {node_id}  |  error {message} then close
//   head -> worker  launch {job_id, attempt, task_index, entrypoint, env{}, gpu_ids[]}
//   worker -> head  task_started {job_id, attempt, task_index, pid}
//   worker -> head  task_exited {job_id, attempt, task_index, exit_code|signal|start_error}
//   head -> worker  kill {job_id, attempt, task_index, grace_ms}
//   worker -> head  heartbeat {usage, busy_ports[]}
//
// busy_ports: the ports of the master-port range that something on the node already
// holds (from /proc/net/tcp); the head hands out none of them as task 0's master port.
//   worker -> head  (binary) log frame
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ag::api {

inline constexpr const char* kWorkerConnectPath = "/api/workers/connect";

// The range AG_MASTER_PORT is handed out from (torch's default 29500 first).
inline constexpr int kMasterPortFirst = 29500;
inline constexpr int kMasterPortLast = 31499;

// Header of a binary log frame: which task's output, and where in its log it starts.
struct LogFrameHeader {
  std::string job_id;
  int attempt = 0;
  int task_index = 0;
  int64_t offset = 0;
};

// Encodes [u32 big-endian header length][header JSON][payload bytes].
std::string encode_log_frame(const LogFrameHeader& header, std::string_view payload);

// Decodes a frame; nullopt when it is malformed. `payload` views into `frame`.
std::optional<LogFrameHeader> decode_log_frame(std::string_view frame, std::string_view* payload);

}  // namespace ag::api
