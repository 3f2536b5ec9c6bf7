#include "api/exec_protocol.h"

#include <nlohmann/json.hpp>

namespace ag::api {

using nlohmann::json;

std::string exec_frame(ExecChannel channel, std::string_view bytes) {
  std::string frame;
  frame.reserve(bytes.size() + 1);
  frame.push_back(static_cast<char>(channel));
  frame.append(bytes);
  return frame;
}

std::string encode_exec_status(const ExecStatus& status) {
  json j = json::object();
  if (status.exit_code) j["exit_code"] = *status.exit_code;
  if (status.signal) j["signal"] = *status.signal;
  if (!status.error.empty()) j["error"] = status.error;
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<ExecStatus> decode_exec_status(std::string_view text) {
  json j = json::parse(text, nullptr, false);
  if (!j.is_object()) return invalid_argument("exec status: expected a JSON object");
  ExecStatus status;
  if (auto it = j.find("exit_code"); it != j.end()) {
    if (!it->is_number_integer()) return invalid_argument("exec status.exit_code: expected an integer");
    status.exit_code = it->get<int>();
  }
  if (auto it = j.find("signal"); it != j.end()) {
    if (!it->is_number_integer()) return invalid_argument("exec status.signal: expected an integer");
    status.signal = it->get<int>();
  }
  if (auto it = j.find("error"); it != j.end()) {
    if (!it->is_string()) return invalid_argument("exec status.error: expected a string");
    status.error = it->get<std::string>();
  }
  if (!status.exit_code && !status.signal && status.error.empty()) {
    return invalid_argument("exec status: none of exit_code, signal and error");
  }
  return status;
}

std::string encode_terminal_size(TerminalSize size) {
  return std::to_string(size.rows) + " " + std::to_string(size.cols);
}

Result<TerminalSize> decode_terminal_size(std::string_view text) {
  TerminalSize size;
  int* fields[] = {&size.rows, &size.cols};
  size_t at = 0;
  for (int i = 0; i < 2; ++i) {
    if (i == 1) {
      if (at >= text.size() || text[at] != ' ') return invalid_argument("terminal size: expected \"ROWS COLS\"");
      ++at;
    }
    const size_t start = at;
    int64_t value = 0;
    while (at < text.size() && at - start < 6 && text[at] >= '0' && text[at] <= '9') value = value * 10 + (text[at++] - '0');
    if (at == start || value < 1 || value > 65535) {
      return invalid_argument("terminal size: rows and columns are whole numbers from 1 to 65535");
    }
    *fields[i] = static_cast<int>(value);
  }
  if (at != text.size()) return invalid_argument("terminal size: expected \"ROWS COLS\"");
  return size;
}

Status check_exec_command(const std::vector<std::string>& command) {
  if (command.empty()) return invalid_argument("no command to run: give one after `--`");
  if (command.size() > kMaxExecArguments) {
    return invalid_argument("the command has " + std::to_string(command.size()) + " arguments; at most " +
                            std::to_string(kMaxExecArguments) + " are taken");
  }
  size_t bytes = 0;
  for (const auto& arg : command) {
    if (arg.find('\0') != std::string::npos) return invalid_argument("an argument of the command holds a NUL byte");
    bytes += arg.size() + 1;
  }
  if (bytes > kMaxExecCommandBytes) {
    return invalid_argument("the command is " + std::to_string(bytes) + " bytes long; at most " +
                            std::to_string(kMaxExecCommandBytes) + " are taken");
  }
  if (command[0].empty()) return invalid_argument("the command's name is empty");
  return {};
}

}  // namespace ag::api
