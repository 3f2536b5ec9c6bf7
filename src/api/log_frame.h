// The binary frames task output travels in, on the worker channel (api/protocol.h) and
// the log stream (api/log_stream.h): a length-prefixed JSON header naming the task and
// where in its log the payload starts, then the payload bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "api/node_usage.h"
#include "common/result.h"

namespace ag::api {

// Header of a binary log frame: which task's output, and where in its log it starts.
struct LogFrameHeader {
  TaskKey task;
  int64_t offset = 0;
  bool operator==(const LogFrameHeader&) const = default;
};

// Encodes [u32 big-endian header length][header JSON][payload bytes].
std::string encode_log_frame(const LogFrameHeader& header, std::string_view payload);
// The frame up to its payload, which the sender then appends (the worker reads task
// output straight into it).
std::string log_frame_prefix(const LogFrameHeader& header, size_t payload_capacity = 0);

// Decodes a frame; `payload` views into `frame`. Errors name what was wrong.
Result<LogFrameHeader> decode_log_frame(std::string_view frame, std::string_view* payload);

}  // namespace ag::api
