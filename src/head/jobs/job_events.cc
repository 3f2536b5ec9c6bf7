#include "head/jobs/job_events.h"

namespace ag::head {

uint64_t JobEvents::watch(const std::string& job_id, std::function<void()> changed) {
  uint64_t id = next_watch_++;
  watchers_[id] = Watcher{job_id, std::move(changed)};
  return id;
}

void JobEvents::cancel_watch(uint64_t id) { watchers_.erase(id); }

void JobEvents::wake(const std::string& job_id) {
  std::vector<std::function<void()>> ready;
  for (auto it = watchers_.begin(); it != watchers_.end();) {
    if (it->second.job_id == job_id) {
      ready.push_back(std::move(it->second.changed));
      it = watchers_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& fn : ready) fn();
}

void JobEvents::added(const Job& job) {
  for (const auto& observer : observers_) observer(job);
}

void JobEvents::changed(const Job& job) {
  wake(job.id);
  for (const auto& observer : observers_) observer(job);
}

void JobEvents::removed(const std::string& job_id) {
  wake(job_id);
  for (const auto& observer : removal_observers_) observer(job_id);
}

}  // namespace ag::head
