#include "head/jobs/master_ports.h"

namespace ag::head {

MasterPorts::MasterPorts(int first, int last)
    : first_(first),
      last_(last),
      next_(first),
      users_(static_cast<size_t>(last >= first ? last - first + 1 : 0)),
      unused_(users_.size()) {}

int MasterPorts::allocate(const std::string& node_id, const std::set<int>& busy) {
  const int range = static_cast<int>(users_.size());
  // A port no live attempt uses anywhere, else one no live attempt uses on this node.
  for (bool anywhere : {true, false}) {
    if (anywhere && unused_ == 0) continue;  // every port is some live attempt's: no walk of them all
    for (int i = 0; i < range; ++i) {
      const int port = next_;
      next_ = next_ >= last_ ? first_ : next_ + 1;
      if (anywhere && users_[slot(port)] > 0) continue;
      if (!held_.count({node_id, port}) && !busy.count(port)) {
        take(node_id, port);
        return port;
      }
    }
  }
  return first_;
}

void MasterPorts::take(const std::string& node_id, int port) {
  if (port < first_ || port > last_) return;
  if (held_.insert({node_id, port}).second && ++users_[slot(port)] == 1) --unused_;
}

void MasterPorts::release(const std::string& node_id, int port) {
  if (held_.erase({node_id, port}) > 0 && --users_[slot(port)] == 0) ++unused_;
}

}  // namespace ag::head
