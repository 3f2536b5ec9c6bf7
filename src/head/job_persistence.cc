// What JobManager hands its writer (job_writer.h): changed jobs with their new events.
#include "head/job_manager.h"

namespace ag::head {

void JobManager::persist(const Job& job, const std::vector<JobEvent>& new_events) {
  writer_.changed(job.id, events_[job.id].size() - new_events.size());
}

}  // namespace ag::head
