// JobEvents: who hears of jobs' changes. Watchers hear once, at a job's next change
// (long polls: `GET /api/jobs/{id}/wait`, `ag logs -f`); observers hear of every change
// (metrics, live views); removal observers hear of each job deleted for good. The job
// manager tells it what happened; it holds no job itself. Io thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "head/jobs/job.h"

namespace ag::head {

class JobEvents {
 public:
  using JobObserver = std::function<void(const Job&)>;
  using RemovalObserver = std::function<void(const std::string& job_id)>;

  // `changed` runs once, at the job's next change or removal. Returns an id for
  // cancel_watch (never 0).
  uint64_t watch(const std::string& job_id, std::function<void()> changed);
  void cancel_watch(uint64_t id);
  void add_observer(JobObserver observer) { observers_.push_back(std::move(observer)); }
  void add_removal_observer(RemovalObserver observer) { removal_observers_.push_back(std::move(observer)); }

  // A job was accepted: observers hear of it (nobody can be watching it yet).
  void added(const Job& job);
  // A job changed (state, attempt, task): its watchers, then every observer.
  void changed(const Job& job);
  // A job is gone for good: its watchers, then the removal observers.
  void removed(const std::string& job_id);

  size_t watching() const { return watchers_.size(); }

 private:
  // Wakes (and forgets) the job's watchers; they may watch again from inside.
  void wake(const std::string& job_id);

  struct Watcher {
    std::string job_id;
    std::function<void()> changed;
  };
  std::map<uint64_t, Watcher> watchers_;
  uint64_t next_watch_ = 1;
  std::vector<JobObserver> observers_;
  std::vector<RemovalObserver> removal_observers_;
};

}  // namespace ag::head
