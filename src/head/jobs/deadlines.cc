#include "head/jobs/deadlines.h"

namespace ag::head {

Deadlines::~Deadlines() {
  for (const auto& [_, armed] : armed_) timers_.cancel(armed.timer);
  *alive_ = false;
}

void Deadlines::arm(const std::string& job_id, const std::optional<Deadline>& deadline) {
  auto it = armed_.find(job_id);
  if (it != armed_.end()) {
    if (deadline && it->second.deadline == *deadline) return;
    timers_.cancel(it->second.timer);
    armed_.erase(it);
  }
  if (!deadline) return;
  Timers::Id timer = timers_.start(deadline->at_ms - clock_.now_ms(), [this, alive = alive_, job_id, d = *deadline] {
    if (!*alive) return;
    armed_.erase(job_id);
    on_due_(job_id, d);
  });
  armed_[job_id] = Armed{*deadline, timer};
}

void Deadlines::disarm(const std::string& job_id) {
  auto it = armed_.find(job_id);
  if (it == armed_.end()) return;
  timers_.cancel(it->second.timer);
  armed_.erase(it);
}

}  // namespace ag::head
