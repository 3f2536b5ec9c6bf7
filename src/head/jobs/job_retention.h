// JobRetention: deleting finished jobs for good, one at a user's request
// (DELETE /api/jobs/{id}, `ag delete-job`) or all that finished before the head's
// retention period (--job-retention). A deletion is written with the next batch of job
// changes (JobWriter), so it lands after every earlier write of the job; only then is
// the job dropped from memory (forget), its logs removed and the removal observers
// told. It owns no state of its own. Io thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "common/result.h"
#include "head/jobs/array_throttle.h"
#include "head/jobs/gate_index.h"
#include "head/jobs/job_events.h"
#include "head/jobs/job_table.h"
#include "head/jobs/job_writer.h"
#include "head/logs/log_store.h"
#include "head/jobs/scheduling_loop.h"

namespace ag::head {

class JobRetention {
 public:
  struct Units {
    JobTable& jobs;
    JobWriter& writer;
    const GateIndex& gates;
    SchedulingLoop& loop;
    ArrayThrottle& arrays;
    LogStore& logs;
    JobEvents& listeners;
  };
  explicit JobRetention(Units units) : u_(units) {}

  // Removes a finished job for good: its record, events, logs and submission id; `done`
  // gets ok once that is durable. Errors: kNotFound; kConflict while the job is not
  // finished (stop it first), is being deleted already, or a pending job depends on it;
  // the store's (the job is kept then).
  void delete_job(const std::string& job_id, std::function<void(Status)> done);
  // Deletes every job that finished before `before_ms`; returns how many.
  int delete_finished_before(int64_t before_ms);
  // The deletion is durable: drops the job from memory (its logs too) and tells the
  // removal observers (JobWriter calls it).
  void forget(const std::string& job_id);

 private:
  Units u_;
};

}  // namespace ag::head
