#include "worker/network_interface.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
#include <array>
#include <cstring>

namespace ag::worker {
namespace {

// An address as bytes (4 or 16 of them); empty when the text is none.
std::vector<unsigned char> address_bytes(const std::string& text) {
  std::array<unsigned char, 16> buf{};
  if (::inet_pton(AF_INET, text.c_str(), buf.data()) == 1) return {buf.begin(), buf.begin() + 4};
  if (::inet_pton(AF_INET6, text.c_str(), buf.data()) == 1) return {buf.begin(), buf.end()};
  return {};
}

bool same_network(const std::vector<unsigned char>& a, const std::vector<unsigned char>& b, int prefix_length) {
  if (a.size() != b.size() || a.empty()) return false;
  for (int bit = 0; bit < prefix_length && bit < static_cast<int>(a.size()) * 8; ++bit) {
    const unsigned char mask = static_cast<unsigned char>(0x80u >> (bit % 8));
    if ((a[static_cast<size_t>(bit / 8)] & mask) != (b[static_cast<size_t>(bit / 8)] & mask)) return false;
  }
  return true;
}

int prefix_of(const sockaddr* netmask) {
  if (!netmask) return 0;
  const unsigned char* bytes = nullptr;
  size_t size = 0;
  if (netmask->sa_family == AF_INET) {
    bytes = reinterpret_cast<const unsigned char*>(&reinterpret_cast<const sockaddr_in*>(netmask)->sin_addr);
    size = 4;
  } else if (netmask->sa_family == AF_INET6) {
    bytes = reinterpret_cast<const unsigned char*>(&reinterpret_cast<const sockaddr_in6*>(netmask)->sin6_addr);
    size = 16;
  }
  int bits = 0;
  for (size_t i = 0; i < size; ++i) bits += __builtin_popcount(bytes[i]);
  return bits;
}

std::string listing(const std::vector<InterfaceAddress>& interfaces) {
  std::string out;
  for (const auto& i : interfaces) {
    out += (out.empty() ? "" : ", ") + i.name + " " + i.address + "/" + std::to_string(i.prefix_length);
  }
  return out.empty() ? "no addresses" : out;
}

}  // namespace

std::vector<InterfaceAddress> local_interface_addresses() {
  std::vector<InterfaceAddress> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (const ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || !(i->ifa_flags & IFF_UP)) continue;
    const int family = i->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    char text[INET6_ADDRSTRLEN] = {0};
    const void* addr = family == AF_INET
                           ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr)
                           : static_cast<const void*>(&reinterpret_cast<const sockaddr_in6*>(i->ifa_addr)->sin6_addr);
    if (!::inet_ntop(family, addr, text, sizeof text)) continue;
    out.push_back({i->ifa_name, text, prefix_of(i->ifa_netmask), (i->ifa_flags & IFF_LOOPBACK) != 0});
  }
  ::freeifaddrs(list);
  return out;
}

Result<std::string> interface_for_address(const std::vector<InterfaceAddress>& interfaces, const std::string& node_ip,
                                          const std::string& wanted) {
  const std::vector<unsigned char> node = address_bytes(node_ip);
  if (node.empty()) return invalid_argument("the node address '" + node_ip + "' is not an IP address");
  const auto holds = [&](const InterfaceAddress& i, bool exact) {
    const std::vector<unsigned char> own = address_bytes(i.address);
    return own == node || (!exact && i.loopback && same_network(own, node, i.prefix_length));
  };
  if (!wanted.empty()) {
    std::vector<InterfaceAddress> named;
    std::copy_if(interfaces.begin(), interfaces.end(), std::back_inserter(named),
                 [&](const InterfaceAddress& i) { return i.name == wanted; });
    if (named.empty()) {
      return invalid_argument("--network-interface " + wanted + ": this machine has no such interface that is up (it has " +
                              listing(interfaces) + ")");
    }
    for (bool exact : {true, false}) {
      for (const auto& i : named) {
        if (holds(i, exact)) return i.name;
      }
    }
    return invalid_argument("--network-interface " + wanted + " does not hold the node address " + node_ip + " (" +
                            listing(named) + "); name the interface that has it, or give --node-ip-address one of " +
                            wanted + "'s addresses");
  }
  for (bool exact : {true, false}) {
    for (const auto& i : interfaces) {
      if (holds(i, exact)) return i.name;
    }
  }
  return invalid_argument("the node address " + node_ip + " is on no interface of this machine (it has " +
                          listing(interfaces) +
                          "); give --node-ip-address one of these addresses, the one the other machines reach "
                          "this one at");
}

}  // namespace ag::worker
