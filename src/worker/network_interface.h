// Which network interface holds the node's address. Collective libraries pick their
// interface by resolving the machine's hostname, which Debian and Ubuntu map to
// loopback, so every rank would advertise 127.0.x.1 to ranks on other machines; the
// worker names the node's interface to them instead (GLOO_SOCKET_IFNAME,
// NCCL_SOCKET_IFNAME, TP_SOCKET_IFNAME: api/task_environment.h).
#pragma once

#include <string>
#include <vector>

#include "common/result.h"

namespace ag::worker {

struct InterfaceAddress {
  std::string name;     // "eth0"
  std::string address;  // "10.0.0.2", "fd00::2"
  int prefix_length = 0;
  bool loopback = false;
};

// Every address of this machine's interfaces that are up (getifaddrs), IPv4 and IPv6.
std::vector<InterfaceAddress> local_interface_addresses();

// The interface of `interfaces` that holds `node_ip`: the one with that address, else a
// loopback interface whose network holds it (127.0.0.2 is on `lo`'s 127.0.0.0/8).
// With `wanted` (ag start-worker --network-interface), that interface, which must
// hold it. Errors (kInvalidArgument) say what the machine has: "the node address
// 10.0.0.9 is on no interface of this machine (it has lo 127.0.0.1/8, eth0
// 10.0.0.2/24); ...".
Result<std::string> interface_for_address(const std::vector<InterfaceAddress>& interfaces, const std::string& node_ip,
                                          const std::string& wanted);

}  // namespace ag::worker
