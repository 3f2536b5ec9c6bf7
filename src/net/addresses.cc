#include "net/addresses.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace ag::net {
namespace {

std::optional<std::string> ipv4_text(const sockaddr_in& addr) {
  char text[INET_ADDRSTRLEN] = {0};
  if (!::inet_ntop(AF_INET, &addr.sin_addr, text, sizeof text)) return std::nullopt;
  return std::string(text);
}

// What connecting a UDP socket picks as its source: the route to a documentation
// address (RFC 5737), which no packet is ever sent to.
std::optional<std::string> default_route_source() {
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::nullopt;
  sockaddr_in far{};
  far.sin_family = AF_INET;
  far.sin_port = htons(9);
  ::inet_pton(AF_INET, "192.0.2.1", &far.sin_addr);
  std::optional<std::string> out;
  sockaddr_in self{};
  socklen_t len = sizeof self;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&far), sizeof far) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&self), &len) == 0 && self.sin_addr.s_addr != htonl(INADDR_ANY)) {
    out = ipv4_text(self);
  }
  ::close(fd);
  return out;
}

// Without a default route: the first interface that is up and not loopback.
std::optional<std::string> first_interface_address() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return std::nullopt;
  std::optional<std::string> out;
  for (ifaddrs* it = list; it && !out; it = it->ifa_next) {
    if (!it->ifa_addr || it->ifa_addr->sa_family != AF_INET) continue;
    const auto* addr = reinterpret_cast<const sockaddr_in*>(it->ifa_addr);
    if ((ntohl(addr->sin_addr.s_addr) >> 24) == 127) continue;
    out = ipv4_text(*addr);
  }
  ::freeifaddrs(list);
  return out;
}

}  // namespace

bool is_wildcard_address(const std::string& address) {
  return address == "0.0.0.0" || address == "::" || address == "[::]";
}

std::optional<std::string> outgoing_address() {
  if (auto routed = default_route_source()) return routed;
  return first_interface_address();
}

std::string advertised_address(const std::vector<std::string>& advertise) {
  if (!advertise.empty()) return advertise.front();
  if (auto outgoing = outgoing_address()) return *outgoing;
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  return host;
}

}  // namespace ag::net
