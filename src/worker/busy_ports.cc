#include "worker/busy_ports.h"

#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
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

namespace {

// Listening TCP ports of one address family through the kernel's socket-diagnostics
// netlink interface, which walks only the listening sockets (reading /proc/net/tcp
// walks the whole connection hash table: milliseconds each time on a large machine).
// False when the interface cannot be used.
bool listening_ports(int family, int first, int last, std::vector<int>* out) {
  int fd = ::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (fd < 0) return false;
  struct {
    nlmsghdr header;
    inet_diag_req_v2 request;
  } message{};
  message.header.nlmsg_len = sizeof message;
  message.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  message.header.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  message.request.sdiag_family = static_cast<uint8_t>(family);
  message.request.sdiag_protocol = IPPROTO_TCP;
  message.request.idiag_states = 1u << TCP_LISTEN;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (::sendto(fd, &message, sizeof message, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) < 0) {
    ::close(fd);
    return false;
  }
  alignas(nlmsghdr) char buffer[16384];
  bool ok = false;
  for (bool done = false; !done;) {
    ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (auto* h = reinterpret_cast<nlmsghdr*>(buffer); NLMSG_OK(h, static_cast<unsigned>(n)); h = NLMSG_NEXT(h, n)) {
      if (h->nlmsg_type == NLMSG_DONE) {
        ok = done = true;
        break;
      }
      if (h->nlmsg_type == NLMSG_ERROR) {
        done = true;
        break;
      }
      const auto* socket = static_cast<const inet_diag_msg*>(NLMSG_DATA(h));
      int port = ntohs(socket->id.idiag_sport);
      if (port >= first && port <= last) out->push_back(port);
    }
  }
  ::close(fd);
  return ok;
}

}  // namespace

std::vector<int> busy_ports(int first, int last) {
  std::vector<int> all;
  if (!listening_ports(AF_INET, first, last, &all) || !listening_ports(AF_INET6, first, last, &all)) {
    all.clear();
    for (const char* path : {"/proc/net/tcp", "/proc/net/tcp6"}) {
      std::ifstream in(path);
      if (!in) continue;
      std::stringstream text;
      text << in.rdbuf();
      auto ports = parse_busy_ports(text.str(), first, last);
      all.insert(all.end(), ports.begin(), ports.end());
    }
  }
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  return all;
}

}  // namespace ag::worker
