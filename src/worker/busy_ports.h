// Which TCP ports of a range something on this machine already listens on (the
// network namespace's sockets, every process's): from the kernel's socket-diagnostics
// netlink interface, or /proc/net/tcp and tcp6 where that is not available.
// The worker reports those of the master-port range, so that the head never hands a
// job a master port that its task 0's node cannot give it.
#pragma once

#include <string_view>
#include <vector>

namespace ag::worker {

// Local ports in [first, last] of the sockets listed in `proc_net_tcp` (the text of
// /proc/net/tcp or tcp6), TIME_WAIT ones left out (a listener may reuse those).
// Sorted, without repeats when merged by the caller.
std::vector<int> parse_busy_ports(std::string_view proc_net_tcp, int first, int last);

// The listening ports in [first, last] over this machine's IPv4 and IPv6 sockets;
// sorted, unique.
std::vector<int> busy_ports(int first, int last);

}  // namespace ag::worker
