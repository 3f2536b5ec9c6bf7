#include "api/protocol.h"

#include <nlohmann/json.hpp>

namespace ag::api {

std::string encode_log_frame(const LogFrameHeader& header, std::string_view payload) {
  nlohmann::json h = {{"job_id", header.job_id}, {"attempt", header.attempt},
                      {"task_index", header.task_index}, {"offset", header.offset}};
  std::string head = h.dump();
  std::string out;
  out.reserve(4 + head.size() + payload.size());
  uint32_t n = static_cast<uint32_t>(head.size());
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((n >> shift) & 0xff));
  out += head;
  out.append(payload.data(), payload.size());
  return out;
}

std::optional<LogFrameHeader> decode_log_frame(std::string_view frame, std::string_view* payload) {
  if (frame.size() < 4) return std::nullopt;
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n = (n << 8) | static_cast<unsigned char>(frame[i]);
  if (n > frame.size() - 4) return std::nullopt;
  auto h = nlohmann::json::parse(frame.substr(4, n), nullptr, /*allow_exceptions=*/false);
  if (!h.is_object()) return std::nullopt;
  LogFrameHeader header;
  try {
    header.job_id = h.at("job_id").get<std::string>();
    header.attempt = h.at("attempt").get<int>();
    header.task_index = h.at("task_index").get<int>();
    header.offset = h.at("offset").get<int64_t>();
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
  *payload = frame.substr(4 + n);
  return header;
}

}  // namespace ag::api
