#include "head/jobs/job_writer.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "head/jobs/job_codec.h"

namespace ag::head {
namespace {

// Changed jobs are written at most this often (a gang's burst of task reports costs a
// few writes), or less often when encoding them takes long: the io thread spends at
// most a tenth of its time on it. And again this long after a failed write.
constexpr int64_t kPersistIntervalMs = 20;
constexpr int64_t kPersistCostShare = 10;
constexpr int64_t kPersistRetryMs = 1000;

}  // namespace

JobWriter::JobWriter(const Clock& clock, Timers& timers, store::KvStore& store, Source source)
    : clock_(clock), timers_(timers), store_(store), source_(std::move(source)) {}

JobWriter::~JobWriter() {
  state_.durable_waiters.clear();  // nobody is left to tell
  source_.events_stored = nullptr;  // nor any reader of the stream (its listeners may be gone)
  state_.in_flight = false;        // the last changes go now, after whatever is in flight
  flush();
  // The store outlives the writer: wait for its thread, whose callbacks refer to this.
  store_.flush();
  *alive_ = false;
}

int64_t JobWriter::until_next_ms() const { return state_.last_steady_ms + state_.interval_ms - clock_.steady_ms(); }

void JobWriter::changed(const std::string& job_id, size_t first_new_event) {
  state_.unsaved.try_emplace(job_id, first_new_event);
  schedule(until_next_ms());
}

void JobWriter::changed_unhurried(const std::string& job_id, size_t first_new_event) {
  state_.unsaved.try_emplace(job_id, first_new_event);
  schedule(std::max(until_next_ms(), state_.interval_ms));
}

void JobWriter::after_durable(std::function<void()> fn) {
  state_.durable_waiters.push_back(std::move(fn));
  schedule(until_next_ms());
}

void JobWriter::remove(const std::string& job_id, std::function<void(Status)> done) {
  deletions_[job_id].push_back(std::move(done));
  flush();
}

void JobWriter::schedule(int64_t delay_ms) {
  delay_ms = std::max<int64_t>(0, delay_ms);
  const int64_t due = clock_.steady_ms() + delay_ms;
  // An armed flush stays unless this one is due sooner (a retry keeps its pace).
  if (state_.armed && (state_.retrying || state_.due_ms <= due)) return;
  if (state_.armed) timers_.cancel(state_.timer);
  state_.armed = true;
  state_.due_ms = due;
  state_.timer = timers_.start(delay_ms, [this, alive = alive_] {
    if (!*alive) return;
    state_.armed = false;
    state_.retrying = false;
    flush();
  });
}

void JobWriter::flush() {
  // One write at a time, so that after_durable never answers ahead of an earlier write
  // that then fails: what changes meanwhile goes in the next one.
  if (state_.in_flight) {
    state_.again = true;
    return;
  }
  state_.last_steady_ms = clock_.steady_ms();
  // The stream's events so far: each is in this write with its job's changes, or its job
  // is being deleted or gone (nothing of it to store).
  const int64_t events_upto = source_.events_appended ? source_.events_appended() : 0;
  std::vector<store::Mutation> batch;
  for (const auto& [id, first_event] : state_.unsaved) {
    const Job* job = source_.job(id);
    if (!job || deletions_.count(id)) continue;
    batch.push_back({store::kJobsTable, id, job_record_text(*job)});
    if (const auto* events = source_.events(id)) {
      for (size_t i = first_event; i < events->size(); ++i) {
        batch.push_back({store::kEventsTable, event_key(id, i), event_record_text((*events)[i])});
      }
    }
  }
  // Deleted jobs go in the same write, after any earlier write of them.
  for (const auto& [id, _] : deletions_) {
    batch.push_back({store::kJobsTable, id, std::nullopt});
    const auto* events = source_.events(id);
    for (size_t i = 0; events && i < events->size(); ++i) {
      batch.push_back({store::kEventsTable, event_key(id, i), std::nullopt});
    }
  }
  state_.interval_ms = std::max(kPersistIntervalMs, (clock_.steady_ms() - state_.last_steady_ms) * kPersistCostShare);
  if (batch.empty() && state_.durable_waiters.empty()) {
    if (source_.events_stored) source_.events_stored(events_upto);
    return;
  }
  auto written = std::move(state_.unsaved);
  state_.unsaved.clear();
  auto deleted = std::move(deletions_);
  deletions_.clear();
  for (const auto& [id, _] : deleted) deleting_.insert(id);
  auto waiters = std::move(state_.durable_waiters);
  state_.durable_waiters.clear();
  state_.in_flight = true;
  store_.write(std::move(batch), [this, alive = alive_, written = std::move(written), waiters = std::move(waiters),
                                  deleted = std::move(deleted), events_upto](const Status& status) mutable {
    timers_.post([this, alive, status, written = std::move(written), waiters = std::move(waiters),
                  deleted = std::move(deleted), events_upto]() mutable {
      if (!*alive) return;
      state_.in_flight = false;
      deleting_.clear();
      for (auto& [id, callbacks] : deleted) {
        if (status) source_.deleted(id);
        for (auto& fn : callbacks) fn(status);
      }
      if (status) {
        if (source_.events_stored) source_.events_stored(events_upto);
        for (auto& fn : waiters) fn();
        if (state_.again || !state_.unsaved.empty() || !state_.durable_waiters.empty()) {
          state_.again = false;
          schedule(until_next_ms());
        }
        return;
      }
      state_.again = false;
      // Kept as changed (with their events) and tried again; whoever waits, waits on.
      spdlog::error("could not store {} changed job(s): {}; trying again in {} ms", written.size(),
                    status.error().message, kPersistRetryMs);
      for (const auto& [id, first_event] : written) {
        auto [it, inserted] = state_.unsaved.try_emplace(id, first_event);
        if (!inserted) it->second = std::min(it->second, first_event);
      }
      // A job whose deletion failed is kept, and written whole again with what it skipped.
      for (const auto& [id, _] : deleted) state_.unsaved[id] = 0;
      waiters.insert(waiters.end(), std::make_move_iterator(state_.durable_waiters.begin()),
                     std::make_move_iterator(state_.durable_waiters.end()));
      state_.durable_waiters = std::move(waiters);
      schedule(kPersistRetryMs);
      state_.retrying = true;
    });
  });
}

void JobWriter::write_then(std::vector<store::Mutation> batch, std::function<void()> then,
                           std::function<void(Status)> done) {
  store_.write(std::move(batch), [this, alive = alive_, then = std::move(then), done = std::move(done)](const Status& status) {
    timers_.post([alive, then, done, status] {
      if (!*alive) return;
      if (!status) return done(status.error());
      then();
      done({});
    });
  });
}

std::vector<store::Mutation> JobWriter::records(const Job& job, const std::vector<JobEvent>& events) {
  std::vector<store::Mutation> out{{store::kJobsTable, job.id, job_record_text(job)}};
  for (size_t i = 0; i < events.size(); ++i) {
    out.push_back({store::kEventsTable, event_key(job.id, i), event_record_text(events[i])});
  }
  return out;
}

void JobWriter::write_now(const std::vector<const Job*>& jobs, std::function<void(bool ok)> stored) {
  std::vector<store::Mutation> batch;
  batch.reserve(jobs.size());
  for (const Job* job : jobs) batch.push_back({store::kJobsTable, job->id, job_record_text(*job)});
  store_.write(std::move(batch), [this, alive = alive_, stored = std::move(stored)](const Status& status) {
    timers_.post([alive, stored, ok = status.ok()] {
      if (*alive) stored(ok);
    });
  });
}

}  // namespace ag::head
