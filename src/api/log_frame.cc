#include "api/log_frame.h"

#include <limits>

#include "api/json_fields.h"

namespace ag::api {

using wire::Fields;
using wire::json;

std::string log_frame_prefix(const LogFrameHeader& header, size_t payload_capacity) {
  json h = {{"job_id", header.task.job_id},
            {"attempt", header.task.attempt},
            {"task_index", header.task.task_index},
            {"offset", header.offset}};
  std::string head = h.dump();
  std::string out;
  out.reserve(4 + head.size() + payload_capacity);
  auto n = static_cast<uint32_t>(head.size());
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((n >> shift) & 0xff));
  out += head;
  return out;
}

std::string encode_log_frame(const LogFrameHeader& header, std::string_view payload) {
  std::string out = log_frame_prefix(header, payload.size());
  out.append(payload.data(), payload.size());
  return out;
}

Result<LogFrameHeader> decode_log_frame(std::string_view frame, std::string_view* payload) {
  if (frame.size() < 4)
    return invalid_argument("log frame of " + std::to_string(frame.size()) + " bytes has no header");
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n = (n << 8) | static_cast<unsigned char>(frame[i]);
  if (n > frame.size() - 4) {
    return invalid_argument("log frame header of " + std::to_string(n) + " bytes runs past the frame's end");
  }
  json h = json::parse(frame.substr(4, n), nullptr, /*allow_exceptions=*/false);
  Fields f(h, "log_frame");
  LogFrameHeader header;
  f.task_key(&header.task);
  f.integer("offset", &header.offset, 0, std::numeric_limits<int64_t>::max());
  if (!f.ok()) return f.error();
  *payload = frame.substr(4 + n);
  return header;
}

}  // namespace ag::api
