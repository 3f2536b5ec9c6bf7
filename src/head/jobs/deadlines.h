// Deadlines: the run and attempt timeouts of running jobs (job_state_machine.h's
// Deadline), one timer each. The job controller arms a job's deadline whenever it may have
// changed (placement, recovery) and disarms it when the job finishes; when a deadline
// passes, `on_due` gets the job and the deadline (the state machine decides whether it
// still applies). Io thread only.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "common/clock.h"
#include "common/timers.h"
#include "head/jobs/job_state_machine.h"

namespace ag::head {

class Deadlines {
 public:
  using OnDue = std::function<void(const std::string& job_id, const Deadline& deadline)>;
  Deadlines(const Clock& clock, Timers& timers, OnDue on_due) : clock_(clock), timers_(timers), on_due_(std::move(on_due)) {}
  ~Deadlines();
  Deadlines(const Deadlines&) = delete;
  Deadlines& operator=(const Deadlines&) = delete;

  // The job's deadline is `deadline` now (nullopt: none): a timer for it, unless the
  // same one is armed already.
  void arm(const std::string& job_id, const std::optional<Deadline>& deadline);
  void disarm(const std::string& job_id);
  size_t armed() const { return armed_.size(); }

 private:
  struct Armed {
    Deadline deadline;
    Timers::Id timer = 0;
  };
  const Clock& clock_;
  Timers& timers_;
  OnDue on_due_;
  std::map<std::string, Armed> armed_;
  // A cancel cannot stop a timer's handler already queued: it checks this first.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ag::head
