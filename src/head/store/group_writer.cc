#include "head/store/group_writer.h"

#include <chrono>

namespace ag::store {

GroupWriter::GroupWriter(Commit commit)
    : commit_(std::move(commit)),
      // From a quarter of a millisecond (SQLite on a fast disk) to seconds (a store far away).
      times_{{0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5},
             std::vector<uint64_t>(14, 0)},
      thread_([this] { run(); }) {}

GroupWriter::~GroupWriter() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void GroupWriter::write(std::vector<Mutation> batch, std::function<void(Status)> done) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back({std::move(batch), std::move(done)});
  }
  cv_.notify_one();
}

void GroupWriter::flush() {
  std::unique_lock lock(mu_);
  drained_cv_.wait(lock, [&] { return queue_.empty() && !writing_; });
}

uint64_t GroupWriter::commits() const {
  std::lock_guard lock(mu_);
  return commit_count_;
}

CommitTimes GroupWriter::commit_times() const {
  std::lock_guard lock(mu_);
  return times_;
}

void GroupWriter::run() {
  for (;;) {
    std::deque<Pending> group;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      group.swap(queue_);
      writing_ = true;
    }
    std::vector<const std::vector<Mutation>*> batches;
    for (const auto& p : group) batches.push_back(&p.batch);
    const auto began = std::chrono::steady_clock::now();
    Status status = commit_(batches);
    const double took_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    if (status) {
      for (auto& p : group) p.done(status);
    } else {
      // One bad batch must not fail its neighbours: each again on its own.
      for (auto& p : group) p.done(commit_({&p.batch}));
    }
    {
      std::lock_guard lock(mu_);
      ++commit_count_;
      writing_ = false;
      for (size_t i = 0; i < times_.upper_bounds.size(); ++i) {
        if (took_s <= times_.upper_bounds[i]) {
          ++times_.counts[i];
          break;
        }
      }
      times_.sum_s += took_s;
      ++times_.count;
    }
    drained_cv_.notify_all();
  }
}

}  // namespace ag::store
