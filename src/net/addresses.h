// Which address to tell others about when the head listens on every interface.
//
//   ag start-head --bind 0.0.0.0   -> listens on all interfaces
//                                  -> join line / dashboard link name advertised_address()
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ag::net {

// "0.0.0.0", "::" or "[::]": listening there means every interface.
bool is_wildcard_address(const std::string& address);

// The IPv4 address of the interface this machine would send from to reach other
// machines (the default route's), or nullopt when it has none. Sends nothing.
std::optional<std::string> outgoing_address();

// The address others should use to reach a head that listens on every interface: the
// first of `advertise`; else the outgoing interface's; else this machine's host name.
std::string advertised_address(const std::vector<std::string>& advertise);

}  // namespace ag::net
