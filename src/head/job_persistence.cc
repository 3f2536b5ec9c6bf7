// JobManager's writes to the store: changed jobs batched into one write at a time
// (flush_unsaved), after_durable callbacks, and placements stored before their tasks
// are launched (launch_when_stored). See job_manager.h.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "head/job_codec.h"
#include "head/job_manager.h"

namespace ag::head {
namespace {

// Changed jobs are written at most this often (a gang's burst of task reports costs a
// few writes), or less often when encoding them takes long: the io thread spends at
// most a tenth of its time on it. And again this long after a failed write.
constexpr int64_t kPersistIntervalMs = 20;
constexpr int64_t kPersistCostShare = 10;
constexpr int64_t kPersistRetryMs = 1000;

}  // namespace

void JobManager::persist(const Job& job, const std::vector<JobEvent>& new_events) {
  unsaved_.try_emplace(job.id, events_[job.id].size() - new_events.size());
  schedule_flush(last_flush_steady_ms_ + persist_interval_ms_ - deps_.clock.steady_ms());
}

void JobManager::after_durable(std::function<void()> fn) {
  durable_waiters_.push_back(std::move(fn));
  schedule_flush(last_flush_steady_ms_ + persist_interval_ms_ - deps_.clock.steady_ms());
}

void JobManager::schedule_flush(int64_t delay_ms) {
  if (flush_armed_) return;
  flush_armed_ = true;
  auto alive = alive_;
  deps_.timers.start(std::max<int64_t>(0, delay_ms), [this, alive] {
    if (!*alive) return;
    flush_armed_ = false;
    flush_unsaved();
  });
}

void JobManager::flush_unsaved() {
  // One write at a time, so that after_durable never answers ahead of an earlier write
  // that then fails: what changes meanwhile goes in the next one.
  if (flush_in_flight_) {
    flush_again_ = true;
    return;
  }
  last_flush_steady_ms_ = deps_.clock.steady_ms();
  std::vector<store::Mutation> batch;
  for (const auto& [id, first_event] : unsaved_) {
    auto job = jobs_.find(id);
    if (job == jobs_.end() || deletions_.count(id)) continue;
    batch.push_back({store::kJobsTable, id, job_to_json(job->second).dump()});
    const auto& events = events_[id];
    for (size_t i = first_event; i < events.size(); ++i) {
      batch.push_back({store::kEventsTable, event_key(id, i), event_to_json(events[i]).dump()});
    }
  }
  // Deleted jobs go in the same write, after any earlier write of them.
  for (const auto& [id, _] : deletions_) {
    batch.push_back({store::kJobsTable, id, std::nullopt});
    auto events = events_.find(id);
    for (size_t i = 0; events != events_.end() && i < events->second.size(); ++i) {
      batch.push_back({store::kEventsTable, event_key(id, i), std::nullopt});
    }
  }
  persist_interval_ms_ =
      std::max(kPersistIntervalMs, (deps_.clock.steady_ms() - last_flush_steady_ms_) * kPersistCostShare);
  if (batch.empty() && durable_waiters_.empty()) return;
  auto written = std::move(unsaved_);
  unsaved_.clear();
  auto deleted = std::move(deletions_);
  deletions_.clear();
  auto waiters = std::move(durable_waiters_);
  durable_waiters_.clear();
  flush_in_flight_ = true;
  auto alive = alive_;
  deps_.store.write(std::move(batch), [this, alive, written = std::move(written), waiters = std::move(waiters),
                                       deleted = std::move(deleted)](const Status& status) mutable {
    deps_.timers.post([this, alive, status, written = std::move(written), waiters = std::move(waiters),
                       deleted = std::move(deleted)]() mutable {
      if (!*alive) return;
      flush_in_flight_ = false;
      for (auto& [id, callbacks] : deleted) {
        if (status) forget(id);
        for (auto& fn : callbacks) fn(status);
      }
      if (status) {
        for (auto& fn : waiters) fn();
        if (flush_again_ || !unsaved_.empty() || !durable_waiters_.empty()) {
          flush_again_ = false;
          schedule_flush(last_flush_steady_ms_ + persist_interval_ms_ - deps_.clock.steady_ms());
        }
        return;
      }
      flush_again_ = false;
      // Kept as changed (with their events) and tried again; whoever waits, waits on.
      spdlog::error("could not store {} changed job(s): {}; trying again in {} ms", written.size(),
                    status.error().message, kPersistRetryMs);
      for (const auto& [id, first_event] : written) {
        auto [it, inserted] = unsaved_.try_emplace(id, first_event);
        if (!inserted) it->second = std::min(it->second, first_event);
      }
      // A job whose deletion failed is kept, and written whole again with what it skipped.
      for (const auto& [id, _] : deleted) unsaved_[id] = 0;
      waiters.insert(waiters.end(), std::make_move_iterator(durable_waiters_.begin()),
                     std::make_move_iterator(durable_waiters_.end()));
      durable_waiters_ = std::move(waiters);
      schedule_flush(kPersistRetryMs);
    });
  });
}

void JobManager::launch_when_stored(const std::string& job_id, const std::vector<TaskRef>& refs) {
  for (const auto& ref : refs) unstored_launches_.insert(ref.task);
  auto alive = alive_;
  auto launch = [this, alive, job_id, refs] {
    if (!*alive) return;
    for (const auto& ref : refs) {
      if (!unstored_launches_.erase(ref.task)) continue;  // sent already
      // Unless the attempt was stopped or given up meanwhile.
      const Job* job = find(job_id);
      const AttemptRecord* attempt = job ? job->current_attempt() : nullptr;
      if (!attempt || attempt->number != ref.task.attempt || attempt->ending) continue;
      const TaskRecord& task = attempt->tasks[static_cast<size_t>(ref.task.task_index)];
      if (task.state == TaskState::kStarting && task.node_id == ref.node_id) send_launch(*job, ref);
    }
  };
  // The placed job alone, at once: it does not wait for a flush in flight, and the
  // store commits it with whatever else is queued. The job stays marked changed, so
  // the next flush writes it again (with its events) whatever happens to this write;
  // a later flush always carries a newer copy, and the store applies writes in order.
  std::vector<store::Mutation> batch{{store::kJobsTable, job_id, job_to_json(jobs_.at(job_id)).dump()}};
  deps_.store.write(std::move(batch), [this, alive, launch](const Status& status) {
    deps_.timers.post([this, alive, launch, status] {
      if (!*alive) return;
      if (status) return launch();
      // A full disk, say: the launch waits for the flush, which retries until it is stored.
      after_durable(launch);
    });
  });
}

void JobManager::write_then(std::vector<store::Mutation> batch, std::function<void()> then,
                            std::function<void(Status)> done) {
  auto alive = alive_;
  deps_.store.write(std::move(batch), [this, alive, then = std::move(then), done = std::move(done)](const Status& status) {
    deps_.timers.post([alive, then, done, status] {
      if (!*alive) return;
      if (!status) return done(status.error());
      then();
      done({});
    });
  });
}

}  // namespace ag::head
