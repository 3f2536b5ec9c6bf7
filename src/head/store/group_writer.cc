#include "head/store/group_writer.h"

namespace ag::store {

GroupWriter::GroupWriter(Commit commit) : commit_(std::move(commit)), thread_([this] { run(); }) {}

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
    Status status = commit_(batches);
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
    }
    drained_cv_.notify_all();
  }
}

}  // namespace ag::store
