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
  flush_.unsaved.try_emplace(job.id, events_[job.id].size() - new_events.size());
  schedule_flush(flush_.last_steady_ms + flush_.interval_ms - deps_.clock.steady_ms());
}

void JobManager::after_durable(std::function<void()> fn) {
  flush_.durable_waiters.push_back(std::move(fn));
  schedule_flush(flush_.last_steady_ms + flush_.interval_ms - deps_.clock.steady_ms());
}

void JobManager::schedule_flush(int64_t delay_ms) {
  if (flush_.armed) return;
  flush_.armed = true;
  auto alive = alive_;
  deps_.timers.start(std::max<int64_t>(0, delay_ms), [this, alive] {
    if (!*alive) return;
    flush_.armed = false;
    flush_unsaved();
  });
}

void JobManager::flush_unsaved() {
  // One write at a time, so that after_durable never answers ahead of an earlier write
  // that then fails: what changes meanwhile goes in the next one.
  if (flush_.in_flight) {
    flush_.again = true;
    return;
  }
  flush_.last_steady_ms = deps_.clock.steady_ms();
  std::vector<store::Mutation> batch;
  for (const auto& [id, first_event] : flush_.unsaved) {
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
  flush_.interval_ms =
      std::max(kPersistIntervalMs, (deps_.clock.steady_ms() - flush_.last_steady_ms) * kPersistCostShare);
  if (batch.empty() && flush_.durable_waiters.empty()) return;
  auto written = std::move(flush_.unsaved);
  flush_.unsaved.clear();
  auto deleted = std::move(deletions_);
  deletions_.clear();
  auto waiters = std::move(flush_.durable_waiters);
  flush_.durable_waiters.clear();
  flush_.in_flight = true;
  auto alive = alive_;
  deps_.store.write(std::move(batch), [this, alive, written = std::move(written), waiters = std::move(waiters),
                                       deleted = std::move(deleted)](const Status& status) mutable {
    deps_.timers.post([this, alive, status, written = std::move(written), waiters = std::move(waiters),
                       deleted = std::move(deleted)]() mutable {
      if (!*alive) return;
      flush_.in_flight = false;
      for (auto& [id, callbacks] : deleted) {
        if (status) forget(id);
        for (auto& fn : callbacks) fn(status);
      }
      if (status) {
        for (auto& fn : waiters) fn();
        if (flush_.again || !flush_.unsaved.empty() || !flush_.durable_waiters.empty()) {
          flush_.again = false;
          schedule_flush(flush_.last_steady_ms + flush_.interval_ms - deps_.clock.steady_ms());
        }
        return;
      }
      flush_.again = false;
      // Kept as changed (with their events) and tried again; whoever waits, waits on.
      spdlog::error("could not store {} changed job(s): {}; trying again in {} ms", written.size(),
                    status.error().message, kPersistRetryMs);
      for (const auto& [id, first_event] : written) {
        auto [it, inserted] = flush_.unsaved.try_emplace(id, first_event);
        if (!inserted) it->second = std::min(it->second, first_event);
      }
      // A job whose deletion failed is kept, and written whole again with what it skipped.
      for (const auto& [id, _] : deleted) flush_.unsaved[id] = 0;
      waiters.insert(waiters.end(), std::make_move_iterator(flush_.durable_waiters.begin()),
                     std::make_move_iterator(flush_.durable_waiters.end()));
      flush_.durable_waiters = std::move(waiters);
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
