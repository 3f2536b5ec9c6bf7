// MasterPorts: which port of the master-port range each live attempt's rank 0 binds.
//
// A port is unique on its node (only the master's node binds it) and, while any port is
// free anywhere, across nodes too: several workers may share one machine. Handed out
// round robin, so a port just released is not the next one given.
#pragma once

#include <set>
#include <string>
#include <utility>
#include <vector>

namespace ag::head {

class MasterPorts {
 public:
  MasterPorts(int first, int last);

  // A port for an attempt whose master runs on `node_id`, avoiding `busy` (ports the
  // node reports held by something else). With more live attempts on the node than
  // ports, the range's first (shared rather than refusing to run).
  int allocate(const std::string& node_id, const std::set<int>& busy);
  // Marks a port a recovered attempt holds; ports outside the range are ignored.
  void take(const std::string& node_id, int port);
  void release(const std::string& node_id, int port);

 private:
  size_t slot(int port) const { return static_cast<size_t>(port - first_); }

  int first_;
  int last_;
  int next_;
  std::set<std::pair<std::string, int>> held_;  // (master's node, port) of live attempts
  std::vector<int> users_;                      // live attempts per port, anywhere
  size_t unused_;                               // ports no live attempt uses
};

}  // namespace ag::head
