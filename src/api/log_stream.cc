#include "api/log_frame.h"
#include "api/log_stream.h"

namespace ag::api {
namespace {

void put_be(std::string& out, uint64_t value, int bytes) {
  for (int shift = 8 * (bytes - 1); shift >= 0; shift -= 8) out.push_back(static_cast<char>((value >> shift) & 0xff));
}

uint64_t get_be(std::string_view in, size_t at, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value = (value << 8) | static_cast<unsigned char>(in[at + static_cast<size_t>(i)]);
  return value;
}

}  // namespace

std::string encode_log_record_start(LogRecordKind kind, std::string_view meta, uint64_t payload_bytes) {
  std::string out;
  out.reserve(kLogRecordHeaderBytes + meta.size());
  out.push_back(static_cast<char>(kind));
  put_be(out, meta.size(), 4);
  put_be(out, payload_bytes, 8);
  out.append(meta);
  return out;
}

std::string log_bytes_record_start(const LogFrameHeader& header, uint64_t payload_bytes) {
  std::string prefix = log_frame_prefix(header);  // [u32 length][JSON]
  return encode_log_record_start(LogRecordKind::kLogBytes, std::string_view(prefix).substr(4), payload_bytes);
}

std::string message_record(std::string_view message) {
  std::string out = encode_log_record_start(LogRecordKind::kMessage, {}, message.size());
  out.append(message);
  return out;
}

Result<LogRecordHeader> decode_log_record_header(std::string_view bytes) {
  if (bytes.size() < kLogRecordHeaderBytes) {
    return invalid_argument("log stream record header of " + std::to_string(bytes.size()) + " bytes; it has " +
                            std::to_string(kLogRecordHeaderBytes));
  }
  LogRecordHeader header;
  header.kind = static_cast<LogRecordKind>(bytes[0]);
  header.meta_bytes = static_cast<uint32_t>(get_be(bytes, 1, 4));
  header.payload_bytes = get_be(bytes, 5, 8);
  switch (header.kind) {
    case LogRecordKind::kLogBytes:
      if (header.meta_bytes == 0 || header.meta_bytes > kMaxLogRecordMetaBytes) {
        return invalid_argument("log stream record meta of " + std::to_string(header.meta_bytes) +
                                " bytes; it must be 1 to " + std::to_string(kMaxLogRecordMetaBytes));
      }
      if (header.payload_bytes > kMaxLogRecordBytes) {
        return invalid_argument("log stream record of " + std::to_string(header.payload_bytes) +
                                " bytes of output; at most " + std::to_string(kMaxLogRecordBytes));
      }
      return header;
    case LogRecordKind::kMessage:
      if (header.meta_bytes != 0) return invalid_argument("log stream message record with meta bytes");
      if (header.payload_bytes > kMaxControlMessageBytes) {
        return invalid_argument("log stream message of " + std::to_string(header.payload_bytes) + " bytes; at most " +
                                std::to_string(kMaxControlMessageBytes));
      }
      return header;
  }
  return invalid_argument("log stream record of unknown kind " + std::to_string(static_cast<unsigned char>(bytes[0])));
}

Result<LogFrameHeader> decode_log_bytes_meta(std::string_view meta) {
  std::string frame;
  frame.reserve(4 + meta.size());
  put_be(frame, meta.size(), 4);
  frame.append(meta);
  std::string_view payload;
  return decode_log_frame(frame, &payload);
}

}  // namespace ag::api
