// The worker's log stream: a second TCP connection from a registered worker to the
// head that carries task output without WebSocket framing, so that the worker can send
// it from the task's file with sendfile(2) and neither end has to mask or unmask it.
//
// It opens as an HTTP/1.1 upgrade on kWorkerLogsPath with the node's own credential
// (`Upgrade: kLogStreamProtocol`); after the head's 101 the worker sends records, and
// the head sends nothing. Once the stream is up the worker sends every message it has
// for the head on it too (not on the channel), so a task's exit always follows its
// last byte. Against a head that speaks TLS the same records travel inside TLS. A head
// that refuses the upgrade (an older head: 404) gets log frames on the WebSocket
// channel instead, as before.
//
// A record: [kind: 1 byte][meta length: u32 BE][payload length: u64 BE][meta][payload]
//   kLogBytes: meta = the JSON header of a log frame (task and offset), payload = the
//              task's bytes from that offset;
//   kMessage:  no meta, payload = one worker message (api/protocol.h) as JSON.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "api/log_frame.h"
#include "api/protocol.h"
#include "common/result.h"

namespace ag::api {

inline constexpr const char* kWorkerLogsPath = "/api/workers/logs";
inline constexpr const char* kLogStreamProtocol = "aethergrid-logs/1";

enum class LogRecordKind : char { kLogBytes = 'L', kMessage = 'M' };

inline constexpr size_t kLogRecordHeaderBytes = 13;
inline constexpr uint32_t kMaxLogRecordMetaBytes = 4096;
inline constexpr uint64_t kMaxLogRecordBytes = 64 << 20;  // payload of one kLogBytes record

struct LogRecordHeader {
  LogRecordKind kind = LogRecordKind::kLogBytes;
  uint32_t meta_bytes = 0;
  uint64_t payload_bytes = 0;
};

// The fixed header and the meta of a record, which the payload then follows.
std::string encode_log_record_start(LogRecordKind kind, std::string_view meta, uint64_t payload_bytes);
// The start of a kLogBytes record for `header.task`'s bytes from `header.offset`.
std::string log_bytes_record_start(const LogFrameHeader& header, uint64_t payload_bytes);
// The whole kMessage record carrying `message` (JSON).
std::string message_record(std::string_view message);

// Reads the fixed header (kLogRecordHeaderBytes bytes). Errors (kInvalidArgument) name
// what was wrong: an unknown kind, meta or payload over its limit.
Result<LogRecordHeader> decode_log_record_header(std::string_view bytes);
// The task and offset in a kLogBytes record's meta.
Result<LogFrameHeader> decode_log_bytes_meta(std::string_view meta);

}  // namespace ag::api
