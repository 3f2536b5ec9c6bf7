// SchedulingLoop: the pending queue, when scheduling passes run and how many queued
// jobs each weighs.
//
//   queue()    --> the jobs waiting for a place: higher priority first, then the owner
//                  who used least lately, then submit order (sched::PendingQueue)
//   request()  --> one pass posted at a time (any event that frees capacity or queues
//                  a job asks; a burst of them costs one pass)
//   at(ms)     --> a pass when the earliest retry delay ends (one timer, the earliest)
//   passed()   --> the window: kMaxJobsPerPass queued jobs, four times wider (up to
//                  kWidestPass) while passes place most of what they weigh; a full
//                  window that placed something chains another pass
//   set_aside  --> jobs no node of the cluster can hold, left out of passes until the
//                  cluster changes (cluster_changed)
//   joining    --> submits being stored whose jobs may join the queue; while any is, or
//                  any job is queued, a new job is not placed at its submit (idle())
//
// The pass itself (`run_pass`) is the job controller's: plan_pass (scheduling_view.h)
// over the head's state, and its plan carried out. Scheduling is pushed, never polled. Io thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>

#include "common/clock.h"
#include "common/timers.h"
#include "head/scheduler/fair_share.h"

namespace ag::head {

class SchedulingLoop {
 public:
  // How many queued jobs (oldest first) one pass weighs: kMaxJobsPerPass, and up to
  // kWidestPass while passes place most of what they look at. A pass costs O(nodes +
  // running jobs) before it weighs any job; on a large cluster filling up (nodes
  // joined, a big job ended, an array submitted) a wider window spreads that over more
  // placements, and a pass whose jobs are mostly blocked goes back to the narrow one.
  static constexpr size_t kMaxJobsPerPass = 64;
  static constexpr size_t kWidestPass = 4096;

  SchedulingLoop(const Clock& clock, Timers& timers, std::function<void()> run_pass)
      : clock_(clock), timers_(timers), run_pass_(std::move(run_pass)) {}
  ~SchedulingLoop();
  SchedulingLoop(const SchedulingLoop&) = delete;
  SchedulingLoop& operator=(const SchedulingLoop&) = delete;

  sched::PendingQueue& queue() { return queue_; }
  const sched::PendingQueue& queue() const { return queue_; }

  void request();
  // A pass at `at_ms` (wall clock), unless one is due before.
  void at(int64_t at_ms);
  size_t window() const { return window_; }
  // A pass weighed `weighed` queued jobs and placed `placed` of them.
  void passed(size_t weighed, size_t placed);

  bool set_aside(const std::string& job_id) const { return set_aside_.count(job_id) > 0; }
  bool any_set_aside() const { return !set_aside_.empty(); }
  void set_aside_job(const std::string& job_id) { set_aside_.insert(job_id); }
  // The job is weighed again (gated, or gone).
  void take_back(const std::string& job_id) { set_aside_.erase(job_id); }
  // Nodes came or went, or queues changed: what no node could hold may fit now.
  void cluster_changed() { set_aside_.clear(); }

  // A submit whose jobs may queue is being stored (+1), or its write ended (-1).
  void joining(int delta) { joining_ += delta; }
  // Nothing waits or is about to: a job submitted now goes ahead of nobody if it is
  // placed at once.
  bool idle() const { return queue_.empty() && joining_ == 0; }

 private:
  const Clock& clock_;
  Timers& timers_;
  std::function<void()> run_pass_;
  sched::PendingQueue queue_;
  bool posted_ = false;
  size_t window_ = kMaxJobsPerPass;
  Timers::Id retry_timer_ = 0;
  int64_t retry_timer_at_ms_ = 0;
  std::set<std::string> set_aside_;
  int joining_ = 0;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ag::head
