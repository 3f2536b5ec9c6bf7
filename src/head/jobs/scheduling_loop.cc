#include "head/jobs/scheduling_loop.h"

#include <algorithm>

namespace ag::head {

SchedulingLoop::~SchedulingLoop() {
  if (retry_timer_ != 0) timers_.cancel(retry_timer_);
  *alive_ = false;
}

void SchedulingLoop::request() {
  if (posted_) return;
  posted_ = true;
  timers_.post([this, alive = alive_] {
    if (!*alive) return;
    posted_ = false;
    run_pass_();
  });
}

void SchedulingLoop::at(int64_t at_ms) {
  if (retry_timer_ != 0 && retry_timer_at_ms_ <= at_ms) return;
  if (retry_timer_ != 0) timers_.cancel(retry_timer_);
  retry_timer_at_ms_ = at_ms;
  retry_timer_ = timers_.start(std::max<int64_t>(0, at_ms - clock_.now_ms()), [this, alive = alive_] {
    if (!*alive) return;  // (a cancel cannot stop a handler already queued)
    retry_timer_ = 0;
    run_pass_();
  });
}

void SchedulingLoop::passed(size_t weighed, size_t placed) {
  // The window was full and moved: the jobs behind it were not weighed and may fit now
  // (room came at once: nodes joined, a big job ended). Another pass, after whatever
  // is waiting on the io thread, wider while most of the window was placed; one that
  // places nothing ends the chain.
  const bool window_full = weighed >= window_;
  window_ = window_full && placed * 4 >= weighed * 3 ? std::min(window_ * 4, kWidestPass) : kMaxJobsPerPass;
  if (window_full && placed > 0) request();
}

}  // namespace ag::head
