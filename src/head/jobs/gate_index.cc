#include "head/jobs/gate_index.h"

#include <algorithm>

namespace ag::head {

GateIndex::~GateIndex() {
  if (timer_ != 0) timers_.cancel(timer_);
  *alive_ = false;
}

void GateIndex::gate(const std::string& job_id, const std::vector<std::string>& dependencies, int64_t wake_at_ms) {
  gated_.insert(job_id);
  for (const auto& id : dependencies) dependents_[id].insert(job_id);
  if (wake_at_ms != 0) {
    begins_.insert({wake_at_ms, job_id});
    arm();
  }
}

void GateIndex::ungate(const std::string& job_id, const std::vector<std::string>& dependencies, int64_t begin_ms) {
  if (gated_.erase(job_id) == 0) return;
  for (const auto& id : dependencies) {
    auto it = dependents_.find(id);
    if (it == dependents_.end()) continue;
    it->second.erase(job_id);
    if (it->second.empty()) dependents_.erase(it);
  }
  begins_.erase({begin_ms, job_id});
}

std::set<std::string> GateIndex::dependents(const std::string& job_id) const {
  auto it = dependents_.find(job_id);
  return it == dependents_.end() ? std::set<std::string>{} : it->second;
}

void GateIndex::arm() {
  if (begins_.empty()) return;
  const int64_t at = begins_.begin()->first;
  if (timer_ != 0 && timer_at_ms_ <= at) return;
  if (timer_ != 0) timers_.cancel(timer_);
  timer_at_ms_ = at;
  timer_ = timers_.start(std::max<int64_t>(0, at - clock_.now_ms()), [this, alive = alive_] {
    if (!*alive) return;
    timer_ = 0;
    const int64_t now = clock_.now_ms();
    std::vector<std::string> due;
    while (!begins_.empty() && begins_.begin()->first <= now) {
      if (gated_.count(begins_.begin()->second)) due.push_back(begins_.begin()->second);
      begins_.erase(begins_.begin());
    }
    if (!due.empty()) on_due_(due);
    arm();
  });
}

}  // namespace ag::head
