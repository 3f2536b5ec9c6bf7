#include "worker/busy_ports.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace ag::worker {
namespace {
constexpr std::string_view kTimeWait = "06";
}  // namespace

std::vector<int> parse_busy_ports(std::string_view text, int first, int last) {
  std::vector<int> ports;
  bool header = true;
  while (!text.empty()) {
    size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    if (header) {  // "  sl  local_address rem_address   st ..."
      header = false;
      continue;
    }
    // "   0: 0100007F:7332 00000000:0000 0A ...": fields 1 (local) and 3 (state).
    std::istringstream fields{std::string(line)};
    std::string slot, local, remote, state;
    if (!(fields >> slot >> local >> remote >> state)) continue;
    size_t colon = local.rfind(':');
    if (colon == std::string::npos || state == kTimeWait) continue;
    char* parsed_end = nullptr;
    long port = std::strtol(local.c_str() + colon + 1, &parsed_end, 16);
    if (*parsed_end != '\0' || port < first || port > last) continue;
    ports.push_back(static_cast<int>(port));
  }
  std::sort(ports.begin(), ports.end());
  ports.erase(std::unique(ports.begin(), ports.end()), ports.end());
  return ports;
}

std::vector<int> busy_ports(int first, int last) {
  std::vector<int> all;
  for (const char* path : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(path);
    if (!in) continue;
    std::stringstream text;
    text << in.rdbuf();
    auto ports = parse_busy_ports(text.str(), first, last);
    all.insert(all.end(), ports.begin(), ports.end());
  }
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  return all;
}

}  // namespace ag::worker
